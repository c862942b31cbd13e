#!/usr/bin/env bash
# The H200 run of the final tree: machine and versions, the dev-vs-thdc
# tests (dev live, TE's own index), then examples/megatron at the sizes given.
# From the repository root:
#   bench/results/2026-12-04-h200-megatron-gpt/run-final.sh OUT "PRESET:C:STEPS:WARMUP:TIMEOUT[:rerun] ..." [tests]
# (rerun: megatron-eager once more at the end, for the bf16 noise)
set -uo pipefail
out=$1; runs=$2; tests=${3:-}
mkdir -p "$out"
here=$(dirname "$0")
source "$here/site.sh"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, transformer_engine as te, megatron.core as m, thdc; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| TE', te.__version__, '| megatron-core', m.__version__, '(dev d48bd6be0a)', '| thdc jit', thdc.has_jit)" 2>&1 | grep -v -i warn; } > "$out/machine.txt"
cat "$out/machine.txt"
if [ -n "$tests" ]; then
  echo "== pytest"
  export THDC_DEV_REPORT=$out/dev-report.txt
  timeout 240 python3 -m pytest -q -rs -p no:cacheprovider test/python/test_megatron_dev_gpu.py \
    test/python/test_megatron_dev_cpu.py test/python/test_capacity_ladder_cpu.py > "$out/pytest.txt" 2>&1
  echo "   rc $?"; grep -E "passed|failed|SKIPPED|FAILED" "$out/pytest.txt" | tail -8; cat "$out/dev-report.txt" 2>/dev/null
fi
for run in $runs; do
  IFS=: read -r preset C steps warmup limit extra <<< "$run"
  name=$preset-C$C
  echo "== $name"
  timeout "$limit" python3 examples/megatron/train.py --preset "$preset" --C "$C" --N 64 \
    --steps "$steps" --warmup "$warmup" ${extra:+--repeat-eager} --json "$out/$name.json" > "$out/$name.log" 2>&1
  echo "   rc $?"; grep -A8 "^mode " "$out/$name.log"
done
