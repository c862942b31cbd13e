#!/usr/bin/env bash
# The same comparison without a GPU: the step on the CPU, the build tree's
# module (build/python/thdc) under the two trees of Python files, ROUNDS
# alternations (default 10), every process on core 1.
#   run-cpu.sh BEFORE_PY      BEFORE_PY: the old python/thdc folder
set -euo pipefail
before_py=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/before/thdc" "$work/after"
cp -r "$before_py"/* "$work/before/thdc/"
cp "$root"/build/python/thdc/_thdc*.so "$work/before/thdc/"
cp -r "$root/build/python/thdc" "$work/after/"
out=$here/host_time-cpu.jsonl
rm -f "$out"
for round in $(seq 1 "${ROUNDS:-10}"); do
  for tree in before after; do
    taskset -c 1 python3 "$here/host_time.py" "$work/$tree" "$tree" cpu 2>/dev/null | tail -1 >> "$out"
  done
done
