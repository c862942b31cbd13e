#!/usr/bin/env bash
# The GPU run of 2026-12-06 (one H100: no H200 was free): the load contract moved into the
# runtime and the TP broadcast's layout header, on the GPU, under
# compute-sanitizer memcheck, and long runs of the fuzz targets that need no
# LLVM (release and sanitized builds made on Debian 12), in the background.
# Carried: .carry/thdc.whl (the cp312-abi3 wheel of this tree's module),
# .carry/fuzz-bin.tar.xz (the fuzz binaries). Writes into $OUT.
#   bench/results/2026-12-06-h100-reliability/run.sh start   fuzzers, then the tests
#   bench/results/2026-12-06-h100-reliability/run.sh collect the fuzzers' logs
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${OUT:?}/files
mkdir -p "$out"
# What comes back is one archive per call.
trap 'tar czf "$OUT/${1:-start}.tgz" -C "$OUT" files && rm -rf "$out"' EXIT
fz=/tmp/thdc-fuzz
if [ "${1:-start}" = collect ]; then
  # The fuzzers of `start`, if still running, to their end (600 s each).
  for _ in $(seq 1 560); do
    pgrep -f "thdc-fuzz-" > /dev/null || break
    sleep 1
  done
  pgrep -fa "thdc-fuzz-" > "$out/fuzz-still-running.txt"
  mkdir -p "$out/fuzz"
  cp "$fz"/logs/*.txt "$out/fuzz/" 2>/dev/null
  for log in "$fz"/logs/*.txt; do
    echo "== $(basename "$log" .txt): $(grep -E '^Done [0-9]+ runs|stat::number_of_executed_units' "$log" | tr '\n' ' ') $(grep -c 'ERROR' "$log") errors"
  done | tee "$out/fuzz-summary.txt"
  ls -l "$fz"/artifacts > "$out/fuzz-artifacts.txt" 2>&1
  exit 0
fi

{ date -u +"%Y-%m-%d %H:%M UTC"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -1; nproc; python3 -c 'import torch; print("torch", torch.__version__)'
  compute-sanitizer --version | tail -1; } > "$out/machine.txt" 2>&1

if [ "${1:-start}" = memcheck-rest ]; then
  # What memcheck-load-inputs left after its -x stop (the leak test's child
  # reports nanobind leaks under compute-sanitizer only), and the drop-in's
  # GPU tests.
  pkg=/tmp/thdc-pkg
  if [ ! -d "$pkg/thdc" ]; then  # a fresh machine
    python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
      "$root/.carry/thdc.whl" "$pkg"
    cp -r "$root"/python/thdc/* "$pkg/thdc/"
  fi
  export PYTHONPATH=$pkg THDC_CACHE_DIR=/tmp/thdc-cache
  cd "$root/test/python"
  start=$SECONDS
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider \
    test_load_inputs_gpu.py test_megatron_gpu.py \
    --deselect test_load_inputs_gpu.py::test_no_leak_warnings_when_a_process_exits_with_steps \
    > "$out/memcheck-rest.txt" 2>&1
  echo "memcheck-rest: exit $? in $((SECONDS - start)) s: $(grep -E 'passed|failed' "$out/memcheck-rest.txt" | tail -1) $(tail -n 1 "$out/memcheck-rest.txt")" | tee "$out/summary.txt"
  exit 0
fi

if [ "${1:-start}" = rest ]; then
  # The GPU files the other modes left out, and the changed paths again on
  # this tree's Python files.
  pkg=/tmp/thdc-pkg
  rm -rf "$pkg" && mkdir -p "$pkg"
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
    "$root/.carry/thdc.whl" "$pkg"
  cp -r "$root"/python/thdc/* "$pkg/thdc/"
  export PYTHONPATH=$pkg THDC_CACHE_DIR=/tmp/thdc-cache
  cd "$root/test/python"
  { date -u +"%Y-%m-%d %H:%M UTC"; nvidia-smi --query-gpu=name --format=csv,noheader; } > "$out/machine-rest.txt"
  python3 -m pytest -q -p no:cacheprovider -rs test_torch_gpu.py test_attention_gpu.py \
    test_load_inputs_gpu.py test_megatron_gpu.py test_capacity_ladder_gpu.py \
    test_dynamic_cp_gpu.py > "$out/pytest-rest.txt" 2>&1
  echo "pytest-rest: exit $?: $(tail -n 1 "$out/pytest-rest.txt")" | tee "$out/summary.txt"
  exit 0
fi

# The fuzzers, one process each, detached from this command's session
# (`tests`: the tests alone, the fuzzers of an earlier `start` running on).
[ "${1:-start}" = tests ] || {
mkdir -p "$fz/logs" "$fz/artifacts" && tar xJf "$root/.carry/fuzz-bin.tar.xz" -C "$fz"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for build in sanitize release; do
  for target in scheduler planner input-load manifest; do
    mkdir -p "$fz/corpus/$build-$target"
    setsid nohup "$fz/$build/thdc-fuzz-$target" -max_total_time=600 -timeout=10 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$fz/artifacts/$build-$target-" \
      "$fz/corpus/$build-$target" "$root/test/fuzz/corpus/$target" \
      > "$fz/logs/$build-$target.txt" 2>&1 < /dev/null &
  done
done
echo "fuzzers started $(date -u +%H:%M:%S)" > "$out/fuzz-started.txt"
}

# The package: this tree's Python files beside the wheel's module.
pkg=/tmp/thdc-pkg
rm -rf "$pkg" && mkdir -p "$pkg"
# The whole wheel: auditwheel put the libraries it grafted in thdc.libs/.
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
  "$root/.carry/thdc.whl" "$pkg"
cp -r "$root"/python/thdc/* "$pkg/thdc/"
export PYTHONPATH=$pkg THDC_CACHE_DIR=/tmp/thdc-cache
cd "$root/test/python"
t() { local name=$1; shift; local start=$SECONDS
  "$@" > "$out/$name.txt" 2>&1; local rc=$?
  echo "$name: exit $rc in $((SECONDS - start)) s: $(tail -n 1 "$out/$name.txt")" | tee -a "$out/summary.txt"; }
t pytest-gpu python3 -m pytest -q -p no:cacheprovider -rs test_load_inputs_gpu.py \
  test_megatron_gpu.py test_capacity_ladder_gpu.py test_dynamic_cp_gpu.py test_input_loader.py
t torchrun-tp python3 -m torch.distributed.run --standalone --nproc-per-node 2 torchrun_tp.py \
  --microbatches 50
t memcheck-load-inputs compute-sanitizer --tool memcheck --error-exitcode 9 \
  python3 -m pytest -q -p no:cacheprovider -x test_load_inputs_gpu.py
t memcheck-torchrun-tp compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all \
  python3 -m torch.distributed.run --standalone --nproc-per-node 2 torchrun_tp.py --microbatches 10
t memcheck-broadcast-ladder compute-sanitizer --tool memcheck --error-exitcode 9 \
  python3 -m pytest -q -p no:cacheprovider -x test_capacity_ladder_gpu.py test_dynamic_cp_gpu.py
cp "$out/summary.txt" "$out/summary-start.txt"
