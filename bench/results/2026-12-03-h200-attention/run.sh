#!/usr/bin/env bash
# The H200 run of the attention consumers (thdc.attention, docs/megatron.md
# "Attention kernels"), from the repository root:
#   bench/results/2026-12-03-h200-attention/run.sh PART OUT [PYTEST -k EXPR]
# The packages travel as archives (the host has no network): .carry1/ holds
# thdc's wheel unpacked and xz'd, cuDNN's frontend, FlashInfer's package
# (its sources for the kernels it compiles, without the bundled sources of
# other kernels), apache-tvm-ffi, cuda-tile and the first piece of
# nvidia-cutlass-dsl-libs-cu13; .carry2/ the rest of it, flash-attn-4 and
# its dependencies. PART one unpacks .carry1 into /tmp/attn (kept for part
# two) and runs the consumers that import; two adds .carry2 and runs the
# rest. The Python sources of thdc are the repository's.
set -uo pipefail
part=$1
out=$2
expr=${3:-}
mkdir -p "$out"
site=/tmp/attn/site
wheels() { for w in "$@"; do python3 -m zipfile -e "$w" "$site" || exit 4; done; }
if [ "$part" = one ]; then
  rm -rf /tmp/attn && mkdir -p "$site" /tmp/attn/stage
  cp .carry1/*.partA /tmp/attn/stage/
  for a in .carry1/*.tar.xz; do tar -xJf "$a" -C "$site" || exit 4; done
  wheels .carry1/*.whl
else
  if [ ! -d "$site" ]; then echo "part one's files are gone (a new machine)"; exit 3; fi
  cat /tmp/attn/stage/*.partA .carry2/*.partB | xz -d | tar -x -C "$site" || exit 4
  wheels .carry2/*.whl
fi
cp python/thdc/*.py "$site/thdc/"
export PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages  # what its .pth file adds
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/machine-$part.txt"
python3 - >> "$out/machine-$part.txt" 2>&1 <<'PY'
import importlib, torch, thdc
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
      torch.backends.cudnn.version(), "thdc jit", thdc.has_jit)
for name in ("cudnn", "flashinfer", "flash_attn.cute", "cutlass"):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"),
              getattr(m, "backend_version_string", lambda: "")())
    except Exception as e:
        print(name, "does not import:", type(e).__name__, str(e)[:300])
PY
cat "$out/machine-$part.txt"
export FLASHINFER_CUDA_ARCH_LIST=9.0a
export THDC_ATTENTION_REPORT=$out/report-$part.jsonl
rm -f "$THDC_ATTENTION_REPORT"
timeout 520 python3 -m pytest -q -rs -p no:cacheprovider test/python/test_attention_gpu.py \
  ${expr:+-k "$expr"} --maxfail=100 > "$out/pytest-$part.txt" 2>&1
echo "   rc $?"
grep -E "passed|failed|SKIPPED|FAILED|Error" "$out/pytest-$part.txt" | tail -n 30
python3 - "$THDC_ATTENTION_REPORT" <<'PY'
import json, sys
for line in open(sys.argv[1]) if __import__("os").path.exists(sys.argv[1]) else []:
    r = json.loads(line)
    print(r["consumer"], r["convention"], r["cp"], r["head_dim"], r["result"],
          r.get("worst_relative_error", ""), r.get("error", "")[:400])
PY
# After the tests: the argument functions' cost per call (bench/attention_args.py).
timeout 60 python3 bench/attention_args.py --C 8192 --cp 2 --N 64 \
  --json "$out/attention-args-$part.json" > "$out/attention-args-$part.txt" 2>&1
cat "$out/attention-args-$part.txt"
