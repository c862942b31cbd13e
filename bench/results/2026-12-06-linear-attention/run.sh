#!/usr/bin/env bash
# flash-linear-attention's GDN and KDA kernels fed the step's chunk metadata,
# captured with the step (bench/linear_attention.py), on one GPU, and the
# GPU tests of the step's option.
#   run.sh WHEEL FLA_DIR OUT WHAT [ARGS...]
# WHEEL: thdc's wheel (its module; this tree's Python files go over it);
# FLA_DIR: a folder holding fla-core 0.6.0's `fla` package and einops.
# PY_TREE: the Python files to put over the wheel's (default this tree's).
# WHAT: "tests" (the option's GPU and CPU tests, then the GPU test under
# compute-sanitizer memcheck; TEST_FILES and MEMCHECK_FILES name others) or
# "bench" (bench/linear_attention.py ARGS).
set -euo pipefail
wheel=$1 fla_dir=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
mkdir -p "$out"
python3 -m zipfile -e "$wheel" "$work"          # thdc/ and thdc.libs/
cp -r "${PY_TREE:-$root/python/thdc}"/* "$work/thdc/"  # this tree's Python files
# (PY_TREE: another tree's python/thdc, for a before/after of the same module)
export PYTHONPATH="$work:$fla_dir"
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton, fla; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'fla-core', fla.__version__)"
} > "$out/machine.txt"
case $4 in
  tests)
    cd "$root/test/python"
    python3 -m pytest -q -p no:cacheprovider -rs \
      ${TEST_FILES:-test_linear_attention_gpu.py test_linear_attention_cpu.py test_stages.py} \
      2>&1 | tee "$out/pytest.txt" || true
    compute-sanitizer --tool memcheck --error-exitcode 9 \
      python3 -m pytest -q -p no:cacheprovider ${MEMCHECK_FILES:-test_linear_attention_gpu.py} \
      2>&1 | tail -n 30 | tee "$out/memcheck.txt" ;;
  bench)
    name=${BENCH_NAME:-linear_attention}
    python3 "$root/bench/linear_attention.py" --json "$out/$name.json" "${@:5}" \
      2>&1 | tee "$out/$name.txt" ;;
esac
