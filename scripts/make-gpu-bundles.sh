#!/usr/bin/env bash
# Compiles the bundles that the GPU suite and the benchmark load, into
# build-gpu-bundles/ (a GPU host has no MLIR: it gets them from here).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${THDC_BUILD_DIR:-$root/build}/bin
out=${1:-$root/build-gpu-bundles}
example="$root/examples/megatron_graph_step.mlir"
rm -rf "$out"
mkdir -p "$out/check" "$out/bench"
# Checked against the reference on the GPU and against their host code.
for shape in "8 2 6" "1024 4 33" "2048 1 128" "4096 8 64" "32768 2 64"; do
  set -- $shape
  "$bin/thdc" "$example" --param C=$1 --param cp=$2 --param N=$3 -o "$out/check/C$1_cp$2_N$3"
done
# Threads computing several rows each (a capped grid; unrolled rows), checked
# too.
"$bin/thdc" "$example" --param C=32768 --param cp=2 --param N=64 --block-size 512 --max-blocks 8 -o "$out/check/C32768_cp2_N64_grid8x512"
"$bin/thdc" "$example" --param C=32768 --param cp=2 --param N=64 --rows-per-thread 4 -o "$out/check/C32768_cp2_N64_rows4"
# Two elements a step with one vector store (the default from 2^18 rows on):
# on a capped grid too, and on an odd row count (C = 1025, rows one at a
# time) whose offset arrays (N+1 = 34 entries) take vector stores.
"$bin/thdc" "$example" --param C=32768 --param cp=2 --param N=64 --vector-width 2 -o "$out/check/C32768_cp2_N64_vec2"
"$bin/thdc" "$example" --param C=32768 --param cp=2 --param N=64 --vector-width 2 --block-size 256 --max-blocks 8 -o "$out/check/C32768_cp2_N64_vec2_grid8x256"
"$bin/thdc" "$example" --param C=1025 --param cp=1 --param N=33 --vector-width 2 -o "$out/check/C1025_cp1_N33_vec2"
# The PTX alone (the others carry a cubin for sm_90 too): the driver compiles
# it at load, as on any chip the bundle has no cubin for.
"$bin/thdc" "$example" --param C=32768 --param cp=2 --param N=64 --no-cubin -o "$out/check/C32768_cp2_N64_ptx-only"
# Every example pipeline at the differential harness's shapes, each with the
# cases the harness recorded (inputs and the reference interpreter's
# outputs) in cases.bin: thdc-runtime-check replays them on the GPU.
mkdir -p "$out/examples" "$out/cases"
THDC_RECORD_CASES="$out/cases" "$bin/thdc-interpreter-differential-tests" \
  --gtest_filter='InterpreterDifferential.*' > "$out/cases/harness.txt"
for args in "$out"/cases/*.args; do
  stem=$(basename "$args" .args)
  read -r pipeline params < "$args"
  "$bin/thdc" "$root/examples/$pipeline" $params -o "$out/examples/$stem"
  cp "$out/cases/$stem.cases" "$out/examples/$stem/cases.bin"
done
rm -rf "$out/cases"
# The benchmark's configurations (bench/inputs.h).
for shape in "8192 1 64" "32768 2 64" "32768 4 128" "131072 2 256" "1048576 2 1024"; do
  set -- $shape
  "$bin/thdc" "$example" --param C=$1 --param cp=$2 --param N=$3 --no-host -o "$out/bench/C$1_cp$2_N$3"
done
# The scaling run: 8K to 4M rows per rank, cp = 2, N = 1024.
for C in 8192 16384 32768 65536 131072 262144 524288 1048576 2097152 4194304; do
  "$bin/thdc" "$example" --param C=$C --param cp=2 --param N=1024 --no-host -o "$out/scaling/C${C}_cp2_N1024"
done
# Launch geometry sweep (THDC_GEOMETRY_SWEEP=1): the benchmark's two
# largest configurations and the scaling run's largest at each block size,
# rows (steps) per thread and vector width, one bench-b<B>-r<R>-v<V> folder
# each; the measurements behind the geometry the compiler chooses
# (docs/launch-geometry.md).
if [ "${THDC_GEOMETRY_SWEEP:-0}" = 1 ]; then
  for b in 256 512 1024; do
    for r in 1 2; do
      for v in 1 2; do
        for shape in "131072 2 256" "1048576 2 1024" "4194304 2 1024"; do
          set -- $shape
          "$bin/thdc" "$example" --param C=$1 --param cp=$2 --param N=$3 --no-host \
            --block-size $b --rows-per-thread $r --vector-width $v \
            -o "$out/bench-b$b-r$r-v$v/C$1_cp$2_N$3"
        done
      done
    done
  done
fi
# The Python tests' kernels (test/python/test_torch_gpu.py, torchrun_cp.py)
# and examples/python/quickstart.py's and global_batch.py's: the examples and
# the megatron drop-in's pipeline.
mkdir -p "$out/python"
"$bin/thdc" "$example" --param C=1024 --param cp=2 --param N=33 -o "$out/python/megatron_graph_step_C1024_cp2_N33"
# thdc.megatron.GraphStep's pipelines (python/thdc/stages.py writes them):
# "OPTIONS|C,cp,N[,R] ..." per line, each folder named by
# thdc.stages.bundle_name (the last line: examples/train/'s presets).
mkdir -p "$out/python/pipelines"
while IFS='|' read -r options shapes; do
  variant=$(python3 "$root/python/thdc/stages.py" $options --variant)
  source="$out/python/pipelines/megatron_step${variant:+_$variant}.mlir"
  python3 "$root/python/thdc/stages.py" $options > "$source"
  for shape in $shapes; do
    IFS=, read -r C cp N R <<< "$shape"
    name=$(python3 "$root/python/thdc/stages.py" $options --bundle-name "$shape")
    "$bin/thdc" "$source" --param C=$C --param cp=$cp --param N=$N ${R:+--param R=$R} \
      -o "$out/python/$name"
  done
done <<'STAGES'
|1024,1,17 1024,2,33 4096,2,64 1024,1,33 1024,4,33 2048,1,17 2048,1,33
--stage first|1024,2,33
--stage middle|1024,2,33
--stage last|1024,2,33
--rope --cp-order-index|512,1,17,512 512,2,17,1024 512,2,17,4096 512,4,17,4096
--cp-mode contiguous --cp-order-index|1024,2,33
--rope|8192,1,64,8192 16384,1,64,16384 256,1,16,256
STAGES
# examples/pack_microbatch.mlir (C, cp, N, pool rows P, pool samples S):
# examples/python/global_batch.py's, one process per CP rank (cp = 1 and 2;
# 1M pool rows and 512 samples hold its global batch of 256 samples of up to
# C*cp tokens), and test_torch_gpu.py's.
for shape in "4096 1 64 1048576 512" "4096 2 64 1048576 512" "1024 2 33 16384 64"; do
  set -- $shape
  "$bin/thdc" "$root/examples/pack_microbatch.mlir" --param C=$1 --param cp=$2 --param N=$3 \
    --param P=$4 --param S=$5 -o "$out/python/pack_microbatch_C$1_cp$2_N$3_P$4_S$5"
done
echo "bundles written to $out"
