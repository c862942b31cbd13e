#!/usr/bin/env bash
# Host time per call of the launch path before and after the Python package
# was split into rooms, in one run on one GPU: the same built module
# (_thdc, from the wheel) under two trees of pure-Python files, "before"
# (python/thdc of b68c5d6: megatron.py in one file, members set per
# instance) and "after" (this tree), alternated ROUNDS times.
#   run.sh WHEEL BEFORE_PY OUT      BEFORE_PY: the old python/thdc folder
# ROUNDS: alternations (default 4); PIN: a command prefix such as
# 'taskset -c 3', to keep every process on one core.
set -euo pipefail
wheel=$1 before_py=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
mkdir -p "$work/after" "$work/before" "$out"
python3 -m zipfile -e "$wheel" "$work/after"     # thdc/ and thdc.libs/
cp -r "$root"/python/thdc/* "$work/after/thdc/"  # this tree's Python files
cp -r "$work/after/thdc.libs" "$work/before/"
mkdir "$work/before/thdc"
cp "$work"/after/thdc/_thdc*.so "$work/before/thdc/"
cp -r "$before_py"/* "$work/before/thdc/"
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  lscpu | grep -m1 'Model name'
} > "$out/machine.txt"
for round in $(seq 1 "${ROUNDS:-4}"); do
  for tree in before after; do
    ${PIN:-} python3 "$here/host_time.py" "$work/$tree" "$tree" >> "$out/host_time.jsonl"
  done
done
python3 - "$out/host_time.jsonl" > "$out/host_time.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{rows[0]['device']}, torch {rows[0]['torch']}; median of {len(rows) // 2} "
      "processes per tree, alternated, "
      "each the median of 7 rounds of 2000 calls (µs of host time per call)")
for path in rows[0]["us_per_call"]:
    before = [r["us_per_call"][path] for r in rows if r["tree"] == "before"]
    after = [r["us_per_call"][path] for r in rows if r["tree"] == "after"]
    b, a = statistics.median(before), statistics.median(after)
    print(f"{path:>16}: before {b:6.2f} (runs {min(before):.2f}-{max(before):.2f}), "
          f"after {a:6.2f} (runs {min(after):.2f}-{max(after):.2f}), after - before "
          f"{a - b:+.2f}")
PY
cat "$out/host_time.txt"
