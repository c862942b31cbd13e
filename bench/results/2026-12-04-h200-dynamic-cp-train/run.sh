#!/usr/bin/env bash
# The H200 run of dynamic CP through Megatron's batch function, from the
# repository root: bench/results/2026-12-04-h200-dynamic-cp-train/run.sh OUT
# .carry/ holds thdc's Python extension for CPython 3.12 built from this
# commit with LLVM and MLIR linked in (thdc-ext.tar.xz, the JIT included);
# the Python sources of thdc are the repository's.
# 1. test_dynamic_cp_gpu.py and test_dynamic_cp_cpu.py (the drop-in's tests
#    with them);
# 2. examples/train, small preset, 30 steps: the single-process thdc-eager
#    run, then four ranks sharing the GPU over gloo with fixed CP 4 and with
#    dynamic CP over the same four ranks, each against the single run;
# 3. bench/get_batch.py --dynamic-cp 4: host time per call of the dynamic
#    paths beside the fixed ones, and each size's replay.
set -uo pipefail
out=$1
mkdir -p "$out"
source "$(dirname "$0")/site.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/machine.txt"
python3 -c "import torch, thdc, thdc.planner as p; print('torch', torch.__version__, 'thdc jit', thdc.has_jit)" >> "$out/machine.txt" 2>&1
cat "$out/machine.txt"
echo "== pytest"
export THDC_ATTENTION_REPORT=$out/report.jsonl
timeout 240 python3 -m pytest -v -rs -p no:cacheprovider test/python/test_dynamic_cp_gpu.py \
  test/python/test_dynamic_cp_cpu.py > "$out/pytest.txt" 2>&1
echo "   rc $?"
grep -E "passed|failed|SKIPPED|FAILED|Error" "$out/pytest.txt" | tail -n 12
echo "== train"
steps=${STEPS:-30}
timeout 120 python3 examples/train/train.py --preset small --steps $steps --mode thdc-eager \
  --log-every 10 --json "$out/single.json" > "$out/single.log" 2>&1
echo "   single rc $?"; tail -n 1 "$out/single.log"
for flags in "" "--dynamic-cp"; do
  name=parallel-cp4${flags:+-dynamic}
  timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node 4 \
    examples/train/train.py --preset small --steps $steps --cp 4 $flags --log-every 10 \
    --compare "$out/single.json" --compare-steps 6 --json "$out/$name.json" \
    > "$out/$name.log" 2>&1
  echo "   $name rc $?"; grep -E "against|per step" "$out/$name.log" | sed 's/^/   /'
done
echo "== get_batch"
timeout 90 python3 bench/get_batch.py --C 8192 --N 64 --dynamic-cp 4 \
  --json "$out/get-batch-dynamic-8192.json" > "$out/get-batch-dynamic-8192.txt" 2>&1
grep -v -i warn "$out/get-batch-dynamic-8192.txt"
