#!/usr/bin/env bash
# The H200 run of the Megatron integration (docs/megatron.md, "Where Megatron
# calls it"), from the repository root with the thdc wheel and megatron-core's
# wheel in dist/:
#   bench/results/2026-12-03-h200-megatron/run.sh PART OUT
# PART: all (below), train (examples/train only: the single-process run
# twice, for the drift between two runs of one mode, and --cp/--tp 2x2, 2x1,
# 1x2 against it) or final (the batch function's test files and cost again,
# on the last wheel).
# all: every pytest file of test/python (the GPU ones included: the batch
# function under torchrun, TP 2 x CP 2 sharing the GPU over gloo, and under
# set_sync_debug_mode("error")), with megatron-core installed, and the
# function's cost per call beside the eager reference step
# (bench/get_batch.py).
set -uo pipefail
part=$1
out=$2
mkdir -p "$out"
site=$(mktemp -d)
python3 -m pip install --quiet --no-deps --no-index --target "$site" dist/thdc-*.whl \
  dist/megatron_core-*.whl
export PYTHONPATH=$site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/machine.txt"
python3 -c "import torch, thdc, thdc.megatron as m; print('torch', torch.__version__, 'thdc',
thdc.__version__, 'jit', thdc.has_jit, 'megatron-core', m.USING_MEGATRON_CORE,
m.MEGATRON_CORE_IMPORT_ERROR)" >> "$out/machine.txt" 2>&1
cat "$out/machine.txt"
single() { # name
  timeout 100 python3 examples/train/train.py --preset small --steps 30 --mode thdc-eager \
    --log-every 10 --json "$out/$1.json" > "$out/$1.log" 2>&1
  echo "   $1 rc $?"; tail -n 1 "$out/$1.log"
}
if [ "$part" = final ]; then  # the batch function's files again, on the final wheel
  timeout 400 python3 -m pytest -q -rs -p no:cacheprovider test/python/test_megatron_gpu.py \
    test/python/test_megatron_cpu.py test/python/test_step_options.py \
    test/python/test_planner.py > "$out/pytest-final.txt" 2>&1
  echo "   rc $?"; grep -E "passed|failed|SKIPPED|FAILED" "$out/pytest-final.txt" | tail -n 8
  timeout 60 python3 bench/get_batch.py --C 8192 --cp 2 --N 64 \
    --json "$out/get-batch-8192-final.json" > "$out/get-batch-8192-final.txt" 2>&1
  grep -v -i warn "$out/get-batch-8192-final.txt"
  exit 0
fi
if [ "$part" = train ]; then
  echo "== train"
  single single
  single single-again
  python3 - "$out" <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/{n}.json"))["modes"]["thdc-eager"]["loss"]
        for n in ("single", "single-again"))
d = [abs(x - y) for x, y in zip(a, b)]
print(f"   two single-process runs: largest difference {max(d[:10]):.2e} over the first 10 "
      f"steps, {max(d):.2e} over 30; per step: " + " ".join(f"{x:.1e}" for x in d))
PY
  for shape in "2 2" "2 1" "1 2"; do
    set -- $shape
    name=parallel-cp$1-tp$2
    timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node $(($1 * $2)) \
      examples/train/train.py --preset small --steps 30 --cp $1 --tp $2 --log-every 10 \
      --compare "$out/single.json" --compare-steps 6 --json "$out/$name.json" \
      > "$out/$name.log" 2>&1
    echo "   $name rc $?"; grep -E "against|per step" "$out/$name.log" | sed 's/^/   /'
  done
  tar czf /tmp/all.tgz -C "$out" . && mv /tmp/all.tgz "$out/all.tgz"
  exit 0
fi
echo "== pytest"
timeout 420 python3 -m pytest -q -rs -p no:cacheprovider test/python > "$out/pytest.txt" 2>&1
echo "   rc $?"; grep -E "passed|failed|SKIPPED|FAILED" "$out/pytest.txt" | tail -n 25 | sed 's/^/   /'
echo "== get_batch"
for C in 8192 32768; do
  timeout 60 python3 bench/get_batch.py --C $C --cp 2 --N 64 --json "$out/get-batch-$C.json" \
    > "$out/get-batch-$C.txt" 2>&1
  cat "$out/get-batch-$C.txt"
done
tar czf /tmp/all.tgz -C "$out" . && mv /tmp/all.tgz "$out/all.tgz"
