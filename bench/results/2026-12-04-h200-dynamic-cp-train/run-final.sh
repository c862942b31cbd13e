#!/usr/bin/env bash
# The last H200 run, on the final tree (the extension rebuilt from it, as
# run.sh): the dynamic-CP and Megatron test files, the cost per call again,
# and examples/train with dynamic CP and TP 2 (the broadcast's size check
# on CUDA tensors), 10 steps against a 10-step single-process run.
#   bench/results/2026-12-04-h200-dynamic-cp-train/run-final.sh OUT
set -uo pipefail
out=$1; mkdir -p "$out"
source "$(dirname "$0")/site.sh"
timeout 300 python3 -m pytest -q -rs -p no:cacheprovider test/python/test_dynamic_cp_gpu.py \
  test/python/test_dynamic_cp_cpu.py test/python/test_megatron_gpu.py \
  > "$out/pytest-final.txt" 2>&1
echo "pytest rc $?"; tail -n 6 "$out/pytest-final.txt"
timeout 60 python3 bench/get_batch.py --C 8192 --N 64 --dynamic-cp 4 --calls 1000 \
  --json "$out/get-batch-dynamic-4-final.json" > "$out/get-batch-dynamic-4-final.txt" 2>&1
cat "$out/get-batch-dynamic-4-final.txt"
timeout 90 python3 examples/train/train.py --preset small --steps 10 --mode thdc-eager \
  --log-every 5 --json "$out/single-10.json" > "$out/single-10.log" 2>&1
echo "single rc $?"
timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node 4 \
  examples/train/train.py --preset small --steps 10 --cp 2 --tp 2 --dynamic-cp --log-every 5 \
  --compare "$out/single-10.json" --compare-steps 6 --json "$out/parallel-dcp2-tp2.json" \
  > "$out/parallel-dcp2-tp2.log" 2>&1
echo "dcp2 x tp2 rc $?"; grep -E "against|per step" "$out/parallel-dcp2-tp2.log"
