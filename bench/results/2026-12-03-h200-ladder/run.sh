#!/usr/bin/env bash
# The H200 runs of the capacity ladder (docs/capacity-ladder.md), from the
# repository root with the wheel in dist/:
#   bench/results/2026-12-03-h200-ladder/run.sh PART OUT
# PART: tests (the GPU tests of the ladder, the drop-in and the example,
# bench/attention_tax.py, small C = 8192 and 16384) or medium (C = 16384 and
# 8192) or sweep (ladder sizes, setup cost, eager-again, memcheck) or final
# (every GPU test of test/python, racecheck, the launch path's host cost) or
# dummies (split_dummy_sequences: its GPU tests, attention and training).
set -uo pipefail
part=$1
out=$2
mkdir -p "$out"
site=$(mktemp -d)
python3 -m pip install --quiet --no-deps --no-index --target "$site" dist/thdc-*.whl
export PYTHONPATH=$site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/machine.txt"
python3 -c "import torch, thdc; print('torch', torch.__version__, 'thdc', thdc.__version__)" \
  >> "$out/machine.txt" 2>&1
train() { # name args...
  local name=$1; shift
  echo "== train $name: $*"
  python3 examples/train/train.py "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1
  echo "   rc $?"; grep -E "ms/iter|ladder:" "$out/$name.log" | sed 's/^/   /'
}
modes=eager,thdc-graphs,thdc-ladder,thdc-exact
case $part in
  tests)
    echo "== pytest"
    timeout 300 python3 -m pytest -q -p no:cacheprovider test/python/test_capacity_ladder_gpu.py \
      test/python/test_megatron_gpu.py test/python/test_capacity_ladder_cpu.py \
      > "$out/pytest.txt" 2>&1
    echo "   rc $?"; tail -n 3 "$out/pytest.txt" | sed 's/^/   /'
    for p in "medium --C 16384" "small --C 8192"; do
      name=attention-$(echo $p | tr -d ' -')
      python3 bench/attention_tax.py --preset $p --json "$out/$name.json" > "$out/$name.txt" 2>&1
      cat "$out/$name.txt"
    done
    for C in 8192 16384; do
      train small-$C --preset small --C $C --steps 110 --warmup 10 --log-every 50 --mode $modes
    done
    ;;
  medium)
    echo "== pytest"
    timeout 120 python3 -m pytest -q -p no:cacheprovider test/python/test_capacity_ladder_gpu.py \
      > "$out/pytest-ladder.txt" 2>&1
    echo "   rc $?"; tail -n 2 "$out/pytest-ladder.txt" | sed 's/^/   /'
    python3 bench/attention_tax.py --preset medium --C 16384 \
      --json "$out/attention-medium-16384.json" > "$out/attention-medium-16384.txt" 2>&1
    cat "$out/attention-medium-16384.txt"
    for C in 16384 8192; do
      train medium-$C --preset medium --C $C --steps 50 --warmup 10 --log-every 25 \
        --algorithm ladder --mode $modes
    done
    ;;
  sweep)
    for C in 16384 8192; do
      python3 bench/ladder_compile.py --C $C --json "$out/compile-$C.json" > "$out/compile-$C.txt" 2>&1
      tail -n 12 "$out/compile-$C.txt"
    done
    train small-8192-ladderpack --preset small --C 8192 --steps 110 --warmup 10 --log-every 50 \
      --algorithm ladder --mode $modes
    for k in 4 16; do
      train small-8192-k$k --preset small --C 8192 --steps 110 --warmup 10 --log-every 50 \
        --algorithm ladder --mode thdc-ladder --ladder $k
    done
    for k in 4 9 16; do
      train medium-16384-k$k --preset medium --C 16384 --steps 30 --warmup 8 --log-every 25 \
        --algorithm ladder --mode thdc-ladder --ladder $k
    done
    train medium-8192-again --preset medium --C 8192 --steps 8 --warmup 2 --log-every 4 \
      --algorithm ladder --mode eager --repeat-eager
    echo "== memcheck"
    timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest -q \
      -p no:cacheprovider test/python/test_capacity_ladder_gpu.py -k "every_rung and 2" \
      > "$out/memcheck.txt" 2>&1
    echo "   rc $?"; tail -n 4 "$out/memcheck.txt" | sed 's/^/   /'
    ;;
  dummies)
    echo "== pytest"
    timeout 150 python3 -m pytest -q -p no:cacheprovider test/python/test_capacity_ladder_gpu.py \
      > "$out/pytest-ladder.txt" 2>&1
    echo "   rc $?"; tail -n 2 "$out/pytest-ladder.txt" | sed 's/^/   /'
    python3 bench/attention_tax.py --preset medium --C 16384 \
      --json "$out/attention-medium-16384.json" > "$out/attention-medium-16384.txt" 2>&1
    cat "$out/attention-medium-16384.txt"
    for L in none 1024; do
      extra=$([ $L = none ] || echo "--dummy-length $L")
      train medium-16384-dummy-$L --preset medium --C 16384 --steps 30 --warmup 8 \
        --log-every 25 --algorithm ladder --mode thdc-graphs,thdc-ladder $extra
    done
    ;;
  final)
    echo "== pytest test/python"
    timeout 420 python3 -m pytest -q -p no:cacheprovider test/python > "$out/pytest-all.txt" 2>&1
    echo "   rc $?"; tail -n 3 "$out/pytest-all.txt" | sed 's/^/   /'
    echo "== racecheck"
    timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 python3 -m pytest -q \
      -p no:cacheprovider test/python/test_capacity_ladder_gpu.py -k "every_rung and 2" \
      > "$out/racecheck.txt" 2>&1
    echo "   rc $?"; grep -E "passed|failed|SUMMARY" "$out/racecheck.txt" | sed 's/^/   /'
    python3 bench/load_inputs.py --microbatches 1000 --repeats 5 --json "$out/load_inputs.json" \
      > "$out/load_inputs.txt" 2>&1
    tail -n 8 "$out/load_inputs.txt"
    ;;
esac
tar -C "$out/.." -czf "$out.tgz" "$(basename "$out")"
