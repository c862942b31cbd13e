#!/usr/bin/env bash
# The cost per call on the H200 (bench/get_batch.py): dynamic CP over 4 and
# 8 ranks beside fixed CP, and the fixed-CP bench at cp = 2 with the eager
# reference, from the repository root:
#   bench/results/2026-12-04-h200-dynamic-cp-train/run-bench.sh OUT
set -uo pipefail
out=$1; mkdir -p "$out"
source "$(dirname "$0")/site.sh"
for W in 4 8; do
  timeout 120 python3 bench/get_batch.py --C 8192 --N 64 --dynamic-cp $W --calls 1000 \
    --json "$out/get-batch-dynamic-$W.json" > "$out/get-batch-dynamic-$W.txt" 2>&1
  echo "rc $?"; cat "$out/get-batch-dynamic-$W.txt"
done
timeout 120 python3 bench/get_batch.py --C 8192 --cp 2 --N 64 --calls 1000 \
  --json "$out/get-batch-fixed-cp2.json" > "$out/get-batch-fixed-cp2.txt" 2>&1
echo "rc $?"; grep -v -i "warn" "$out/get-batch-fixed-cp2.txt"
