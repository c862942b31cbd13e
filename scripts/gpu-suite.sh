#!/usr/bin/env bash
# Runs on a GPU host, which needs CUDA, CMake, Ninja and Python (PyTorch for
# the eager baseline) but no MLIR: builds the parts of thdc without MLIR and
# runs, on bundles compiled elsewhere by scripts/make-gpu-bundles.sh,
#   check: the GPU suite (thdc-runtime-check: random microbatches, 1000 graph
#          replays with new data, every status bit, GPU against host code;
#          every example pipeline against its recorded reference cases),
#          then under compute-sanitizer memcheck and racecheck; and cache;
#   cache: thdc's cache of driver-compiled cubins, damaged, repaired;
#   jit:   cold and warm JIT compile times, when a thdc-embed binary and the
#          LLVM/MLIR runtime libraries are given (THDC_EMBED; THDC_MLIR_DEBS,
#          a folder of Debian packages or .tar.xz of their files);
#   bench: bench/thdc_bench and bench/eager.py in one run, then
#          bench/report.py writes the results table;
#   python: the Python package built there (nanobind), or the wheel named by
#          THDC_PACKAGE (with the compiler, so nothing needs a JIT), and its
#          pytest suites
#          on PyTorch (test/python), examples/python/global_batch.py on one
#          GPU (cp = 1), torchrun with cp = 2 (torchrun_cp.py, and
#          global_batch.py) when there are two GPUs (else global_batch.py's
#          two ranks share the GPU over gloo), and
#          bench/python_call.py beside bench/thdc_bench.
#   scripts/gpu-suite.sh [check|cache|jit|bench|python|all][,...] RESULTS_DIR
# A Python package missing there can be given as wheels in THDC_WHEELS; they
# are installed into a temporary folder. megatron-core releases given in
# THDC_MEGATRON_WHEELS are each tested with the drop-in on their own.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-all}
out=${2:-$root/gpu-results}
bundles=${THDC_BUNDLES:-$root/build-gpu-bundles}
build=$root/build-gpu
mkdir -p "$out"
status=0
run() { # name command...: logs to $out/name.txt, keeps going on failure
  local name=$1; shift
  echo "== $name: $*" | tee -a "$out/summary.txt"
  "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  tail -n 3 "$out/$name.txt" | sed 's/^/   /' | tee -a "$out/summary.txt"
  [ $rc -eq 0 ] || { echo "   exit code $rc" | tee -a "$out/summary.txt"; status=1; }
}

{ date -u +"%Y-%m-%d %H:%M UTC"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -1; } > "$out/machine.txt" 2>&1
wants() { [[ ",$mode," == *",$1,"* || ",$mode," == *",all,"* ]]; }
cmake -G Ninja -S "$root" -B "$build" -DTHDC_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(python3 -c 'import sys; print(sys.executable)')" > "$out/build.txt" 2>&1 &&
  cmake --build "$build" >> "$out/build.txt" 2>&1 || { echo "build failed"; tail -30 "$out/build.txt"; exit 1; }

if wants check; then
  export THDC_CACHE_DIR=$(mktemp -d)
  run gpu-suite "$build/bin/thdc-runtime-check" --replays 1000 "$bundles"/check/*
  run gpu-suite-cached "$build/bin/thdc-runtime-check" --replays 10 --microbatches 2 "$bundles"/check/C32768_cp2_N64
  # Every example pipeline against its recorded reference cases.
  run gpu-examples "$build/bin/thdc-runtime-check" "$bundles"/examples/*
  # A manifest edited to another buffer size, type or direction is refused:
  # the kernel states its own buffers (the edits drop the manifest's own
  # hash, which would refuse them first).
  tampered=$(mktemp -d)
  cp -r "$bundles/check/C8_cp2_N6" "$tampered/other-size"
  sed -i '0,/"elements": 16/s//"elements": 32/' "$tampered/other-size/manifest.json"
  cp -r "$bundles/check/C8_cp2_N6" "$tampered/other-type"
  sed -i '0,/"type": "i64"/s//"type": "i32"/' "$tampered/other-type/manifest.json"
  cp -r "$bundles/check/C8_cp2_N6" "$tampered/other-direction"
  sed -i '0,/"direction": "output"/s//"direction": "input"/' "$tampered/other-direction/manifest.json"
  rm -f "$tampered"/*/manifest.json.sha256
  run gpu-tampered-manifest sh -c "\"$build/bin/thdc-runtime-check\" --replays 2 --microbatches 1 \"$tampered\"/* > \"$tampered.log\" 2>&1; cat \"$tampered.log\"; test \$(grep -c 'but the kernel was compiled' \"$tampered.log\") -eq 3"
  # Module loads in new processes with no driver cache and no thdc cache:
  # the bundle's cubin, then the PTX alone (compiled by the driver).
  for attempt in 1 2 3; do
    for bundle in C32768_cp2_N64 C32768_cp2_N64_ptx-only; do
      run "gpu-load-$bundle-$attempt" env CUDA_CACHE_DISABLE=1 THDC_CACHE_DIR=- \
        "$build/bin/thdc-runtime-check" --replays 2 --microbatches 1 "$bundles/check/$bundle"
      grep -h "module load" "$out/gpu-load-$bundle-$attempt.txt" | tee -a "$out/summary.txt"
    done
  done
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    run "sanitizer-$tool" "$sanitizer" --tool "$tool" --error-exitcode 1 \
      "$build/bin/thdc-runtime-check" --replays 20 --microbatches 3 \
      "$bundles/check/C8_cp2_N6" "$bundles/check/C1024_cp4_N33" "$bundles/check/C4096_cp8_N64"
    run "sanitizer-$tool-examples" "$sanitizer" --tool "$tool" --error-exitcode 1 \
      "$build/bin/thdc-runtime-check" "$bundles"/examples/*_C1024_* "$bundles"/examples/pack_microbatch_C8_* \
      "$bundles"/examples/pack_microbatch_dynamic_cp_C16_* "$bundles"/examples/model_positions_C8_*
  done
fi

if wants check || wants cache; then
  # thdc's cache of the driver's cubin, damaged (one bit flipped, then the
  # entry replaced by another file): compiled again from the PTX and
  # replaced, so the next process loads the repaired entry.
  repair=$(mktemp -d)
  check_repair() {
    local check="$build/bin/thdc-runtime-check --replays 2 --microbatches 1 $bundles/check/C32768_cp2_N64_ptx-only"
    load() { # expected text of the load line; prints the line
      local line; line=$(THDC_CACHE_DIR=$repair $check | grep "module load") || return 1
      echo "$line"
      [[ $line == *"$1"* ]]
    }
    load "module load" || return 1
    local entry; entry=$(ls "$repair"/cubin-*.cubin) || return 1
    echo "one bit of $entry flipped"
    python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 1; open(p, "wb").write(b)' "$entry"
    load "damaged cached cubin" && load "(cached cubin)" || return 1
    echo "$entry replaced by another file"
    cp "$bundles/check/C32768_cp2_N64_ptx-only/manifest.json" "$entry"
    load "damaged cached cubin" && load "(cached cubin)"
  }
  run gpu-cubin-cache-repair check_repair
fi

if wants jit; then
  if [ -n "${THDC_EMBED:-}" ] && [ -n "${THDC_MLIR_DEBS:-}" ]; then
    libs=$(mktemp -d)
    for deb in "$THDC_MLIR_DEBS"/*.deb; do [ -f "$deb" ] && dpkg -x "$deb" "$libs"; done
    for tarball in "$THDC_MLIR_DEBS"/*.tar.xz; do [ -f "$tarball" ] && tar xJf "$tarball" -C "$libs"; done
    export LD_LIBRARY_PATH=$libs/usr/lib/llvm-22/lib:$libs/usr/lib/x86_64-linux-gnu
    cache=$(mktemp -d)
    # Cold: an empty thdc cache and no driver cache (the driver compiles the
    # PTX); then new processes that find the bundle in the disk cache.
    for attempt in cold warm-1 warm-2 warm-3; do
      driver_cache=0; [ "$attempt" = cold ] && driver_cache=1
      run "jit-$attempt" env CUDA_CACHE_DISABLE=$driver_cache THDC_LOG=1 THDC_CACHE_DIR="$cache" \
        "$THDC_EMBED" "$root/examples/megatron_graph_step.mlir" --param C=32768 --param cp=2 --param N=64
    done
  else
    echo "== jit: skipped (set THDC_EMBED and THDC_MLIR_DEBS)" | tee -a "$out/summary.txt"
  fi
fi

if wants bench; then
  run bench-thdc sh -c "\"$build/bench/thdc_bench\" \"$bundles/bench\" > \"$out/bench.jsonl\""
  for variant in "$bundles"/bench-*; do # launch-geometry variants, if any
    [ -d "$variant" ] || continue
    name=$(basename "$variant")
    run "bench-thdc-$name" sh -c "\"$build/bench/thdc_bench\" \"$variant\" > \"$out/$name.jsonl\""
  done
  run bench-handwritten-check "$build/bench/handwritten_check"
  run bench-eager-check python3 "$root/bench/eager.py" --selftest
  run bench-eager python3 "$root/bench/eager.py" --time --iters 100 --json "$out/eager.json"
  report_args=()
  if [ -d "$bundles/scaling" ]; then
    run bench-scaling sh -c "\"$build/bench/thdc_bench\" \"$bundles/scaling\" > \"$out/scaling.jsonl\""
    configs=()
    for dir in "$bundles"/scaling/C*_cp*_N*; do
      c=$(basename "$dir" | sed 's/^C\([0-9]*\)_cp\([0-9]*\)_N\([0-9]*\)$/\1,\2,\3/')
      configs+=(--config "$c")
    done
    run bench-eager-scaling python3 "$root/bench/eager.py" --time --iters 50 "${configs[@]}" --json "$out/eager-scaling.json"
    report_args=(--scaling "$out/scaling.jsonl" "$out/eager-scaling.json" --plot "$out/scaling.svg")
  fi
  run bench-report python3 "$root/bench/report.py" "$out/bench.jsonl" "$out/eager.json" "$out/machine.txt" \
    --output "$out/RESULTS.md" ${report_args[@]+"${report_args[@]}"}
fi
if wants python; then
  if [ -n "${THDC_WHEELS:-}" ]; then
    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$THDC_WHEELS"/*.whl &&
      export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  fi
  if [ -n "${THDC_PACKAGE:-}" ]; then
    # thdc itself from a wheel built elsewhere (scripts/test-wheel.sh), with
    # its compiler: nothing of the build tree's package is used.
    package_site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$package_site" "$THDC_PACKAGE" ||
      { echo "cannot install $THDC_PACKAGE"; exit 1; }
    export PYTHONPATH=$package_site${PYTHONPATH:+:$PYTHONPATH} PATH=$package_site/bin:$PATH
    run python-package python3 -c "import thdc; print(thdc.__file__, 'JIT:', thdc.has_jit); assert thdc.has_jit"
  else
    export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
  fi
  export THDC_BUNDLES=$bundles
  export THDC_CACHE_DIR=$(mktemp -d)
  run python-pytest python3 -m pytest -v -rs -p no:cacheprovider "$root/test/python"
  # The loader's gather under compute-sanitizer: every copy bounded by the
  # static buffers it writes (short microbatches, refused sizes, odd
  # segments). Not the test of a clean interpreter exit: under the
  # sanitizer nanobind reports the steps' objects as leaked at exit, which
  # it does not without it (test_no_leak_warnings_when_a_process_exits_with_steps
  # checks that in the run above).
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  run python-sanitizer-load-inputs "$sanitizer" --tool memcheck --error-exitcode 1 \
    python3 -m pytest -q -p no:cacheprovider "$root/test/python/test_load_inputs_gpu.py" \
    -k "not no_leak_warnings"
  # The drop-in against each megatron-core release given as a wheel in
  # THDC_MEGATRON_WHEELS (one at a time, each in its own folder): the
  # PackedSeqParams fields and the global seq_idx against the release's own.
  if [ -n "${THDC_MEGATRON_WHEELS:-}" ]; then
    for wheel in "$THDC_MEGATRON_WHEELS"/megatron_core-*.whl; do
      version=$(basename "$wheel" | cut -d- -f2)
      site_mc=$(mktemp -d)
      python3 -m pip install -q --no-index --no-deps --no-compile --target "$site_mc" "$wheel" &&
        run "python-megatron-core-$version" env PYTHONPATH="$site_mc:$PYTHONPATH" THDC_EXPECT_MEGATRON_CORE=1 \
          python3 -m pytest -v -rP -p no:cacheprovider "$root/test/python/test_megatron_gpu.py" \
          -k "packed_seq_params or global_seq_idx"
    done
  fi
  run python-quickstart env THDC_STEP_BUNDLE="$bundles/python/megatron_step_C4096_cp2_N64" \
    python3 "$root/examples/python/quickstart.py"
  # A global batch planned on the host and packed on the GPU, against the
  # reference and the eager PyTorch step: one process (cp = 1), then one per
  # CP rank under torchrun (cp = 2).
  run python-global-batch-cp1 python3 "$root/examples/python/global_batch.py" \
    --bundle "$bundles/python/pack_microbatch_C4096_cp1_N64_P1048576_S512" --json "$out/global-batch-cp1.json"
  gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
  if [ "$gpus" -ge 2 ]; then
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    run python-torchrun torchrun --standalone --nproc-per-node 2 "$root/test/python/torchrun_cp.py" \
      --bundle "$bundles/python/megatron_step_C1024_cp2_N33" --microbatches 500
    run python-global-batch-cp2 torchrun --standalone --nproc-per-node 2 "$root/examples/python/global_batch.py" \
      --bundle "$bundles/python/pack_microbatch_C4096_cp2_N64_P1048576_S512" --json "$out/global-batch-cp2.json"
  else
    echo "== python-torchrun: skipped (one GPU)" | tee -a "$out/summary.txt"
    # Two CP ranks sharing the one GPU, exchanging lengths over gloo: each
    # rank's outputs against the reference (the times are not two GPUs').
    run python-global-batch-cp2-one-gpu torchrun --standalone --nproc-per-node 2 "$root/examples/python/global_batch.py" \
      --backend gloo --bundle "$bundles/python/pack_microbatch_C4096_cp2_N64_P1048576_S512" --json "$out/global-batch-cp2-one-gpu.json"
  fi
  run python-bench-cpp sh -c "\"$build/bench/thdc_bench\" \"$bundles/bench\" > \"$out/python-bench-cpp.jsonl\""
  run python-bench python3 "$root/bench/python_call.py" "$bundles/bench" \
    --json "$out/python-call.jsonl" --cpp "$out/python-bench-cpp.jsonl"
fi
exit $status
