#!/usr/bin/env bash
# The launch path's host cost from Python with two builds of the package in
# one run: each wheel installed into a folder of its own (put on PYTHONPATH
# before the machine's PyTorch), then bench/python_call.py (one checked call with the
# outputs given, and launch_pointers) and bench/load_inputs.py (GraphStep's
# load_inputs + replay) run with each in turn, ROUNDS times alternated, so
# that both see the same machine state.
#   bench/compare_wheels.sh BEFORE.whl AFTER.whl BUNDLES OUT [ROUNDS]
# BUNDLES: holds bench/ (scripts/make-gpu-bundles.sh) and load-inputs/
# (bench/load_inputs.py --write-bundles BUNDLES/load-inputs).
# OUT receives <round>-<name>-python_call.{json,txt} and -load_inputs.*.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
before=${1:?usage: bench/compare_wheels.sh BEFORE.whl AFTER.whl BUNDLES OUT [ROUNDS]}
after=${2:?}
bundles=$(cd "${3:?}" && pwd)
out=${4:?}
rounds=${5:-2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
before=$(realpath "$before")
after=$(realpath "$after")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in before after; do
  wheel=$before
  [ "$name" = after ] && wheel=$after
  echo "installing $(basename "$wheel") as '$name'"
  python3 -m pip install --quiet --no-deps --no-index --no-compile --target "$work/$name" "$wheel"
  echo "$name: $(basename "$wheel")" >> "$out/wheels.txt"
done
cd "$work"
for round in $(seq 1 "$rounds"); do
  for name in before after; do
    echo "round $round, $name: python_call"
    PYTHONPATH=$work/$name python3 "$root/bench/python_call.py" "$bundles/bench" \
      --json "$out/$round-$name-python_call.json" > "$out/$round-$name-python_call.txt" 2>&1
    echo "round $round, $name: load_inputs"
    PYTHONPATH=$work/$name python3 "$root/bench/load_inputs.py" --bundles "$bundles/load-inputs" \
      --json "$out/$round-$name-load_inputs.json" > "$out/$round-$name-load_inputs.txt" 2>&1
  done
done
echo "done: $out"
