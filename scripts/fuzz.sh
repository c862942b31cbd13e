#!/usr/bin/env bash
# Long fuzzing runs of every libFuzzer target, each for SECONDS, in
#   sanitize: ./build-sanitize, ASan + UBSan (configured as scripts/sanitize.sh
#             does it): finds memory and undefined-behaviour errors;
#   release:  ./build-fuzz, optimised, coverage instrumentation only
#             (-fsanitize=fuzzer-no-link): many times the executions per
#             second, for hangs, aborts and deep inputs.
#   scripts/fuzz.sh SECONDS_PER_TARGET [release|sanitize|both] [TARGET...]
#                                         (default both, every target)
#   scripts/fuzz.sh --merge [release|sanitize|both] [TARGET...]
# Only the fuzz targets are built (the release build's other binaries would
# lack the coverage callbacks that only the fuzzer's runtime provides).
# Each target starts from its seeds (test/fuzz/corpus/<target>; the pipeline
# fuzzer also from every example and test pipeline, with its dictionary) and
# keeps what it finds in <build>/fuzz-corpus/<target>, so that the next run
# goes on from there. A crash, hang (-timeout, default 10 s: THDC_FUZZ_TIMEOUT),
# leak or OOM leaves its input in <build>/fuzz-artifacts and fails the script,
# after every target ran; reproduce with `<build>/bin/<target> <artifact>`.
# --merge grows the seed corpora from those runs instead: each target's
# <build>/fuzz-corpus/<target> goes into test/fuzz/corpus/<target> through
# libFuzzer's merge, which adds only inputs that reach coverage the seeds do
# not, so the committed corpus stays small; commit what it adds. The merge
# is -set_cover_merge=1 (as -merge=1, but a near-minimal set of inputs: the
# scheduler's 927 found inputs gave 764 files with -merge=1, 236 with it);
# THDC_FUZZ_MERGE=-merge=1 for the plain one. Targets are named as
# thdc-fuzz-scheduler or scheduler.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/fuzz.sh SECONDS_PER_TARGET|--merge [release|sanitize|both] [TARGET...]"
seconds=${1:?$usage}
which=${2:-both}
case $which in
  release) builds=(release) ;;
  sanitize) builds=(sanitize) ;;
  both) builds=(release sanitize) ;;
  *) echo "scripts/fuzz.sh: unknown build '$which' (release, sanitize or both)" >&2; exit 2 ;;
esac
targets=(thdc-fuzz-param-expr thdc-fuzz-pipeline thdc-fuzz-opt thdc-fuzz-input-json thdc-fuzz-manifest
         thdc-fuzz-scheduler thdc-fuzz-planner thdc-fuzz-input-load)
if [ $# -gt 2 ]; then
  chosen=()
  for target in "${@:3}"; do
    target=thdc-fuzz-${target#thdc-fuzz-}
    if [[ " ${targets[*]} " != *" $target "* ]]; then
      echo "scripts/fuzz.sh: unknown target '$target' (${targets[*]})" >&2
      exit 2
    fi
    chosen+=("$target")
  done
  targets=("${chosen[@]}")
fi
if [ "$seconds" != --merge ] && ! [[ $seconds =~ ^[0-9]+$ ]]; then
  echo "$usage" >&2
  exit 2
fi
jobs=${THDC_BUILD_JOBS:-$(nproc)}

configure() {
  local kind=$1 build=$2
  [ -f "$build/build.ninja" ] && return
  if [ "$kind" = sanitize ]; then
    # scripts/sanitize.sh's build, configured by it.
    THDC_SANITIZE_BUILD_DIR=$build "$root/scripts/sanitize.sh" --configure
  else
    CC=clang-14 CXX=clang++-14 cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
      -DMLIR_LINK_MLIR_DYLIB=ON -DTHDC_PYTHON=OFF -DTHDC_FUZZ=ON \
      -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link -gline-tables-only" \
      -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link -gline-tables-only"
  fi
}

failed=()
for kind in "${builds[@]}"; do
  if [ "$kind" = sanitize ]; then
    build=${THDC_SANITIZE_BUILD_DIR:-$root/build-sanitize}
  else
    build=${THDC_FUZZ_BUILD_DIR:-$root/build-fuzz}
  fi
  configure "$kind" "$build"
  cmake --build "$build" -j "$jobs" --target "${targets[@]}"
  if [ "$seconds" = --merge ]; then
    for target in "${targets[@]}"; do
      name=${target#thdc-fuzz-}
      seeds=$name
      [ "$name" = opt ] && seeds=pipeline
      found=$build/fuzz-corpus/$name
      if ! compgen -G "$found/*" > /dev/null; then
        echo "== $kind: $target: nothing in $found to merge"
        continue
      fi
      before=$(ls "$root/test/fuzz/corpus/$seeds" | wc -l)
      echo "== $kind: merging $found into test/fuzz/corpus/$seeds"
      if ! "$build/bin/$target" "${THDC_FUZZ_MERGE:--set_cover_merge=1}" -rss_limit_mb=4096 \
          "-timeout=${THDC_FUZZ_TIMEOUT:-10}" "$root/test/fuzz/corpus/$seeds" "$found" \
          > "$build/fuzz-merge-$name.log" 2>&1; then
        tail -n 20 "$build/fuzz-merge-$name.log"
        failed+=("$kind/$target (merge)")
        continue
      fi
      echo "   $before -> $(ls "$root/test/fuzz/corpus/$seeds" | wc -l) files"
    done
    continue
  fi
  export THDC_FUZZ_ARTIFACTS=$build/fuzz-artifacts
  mkdir -p "$THDC_FUZZ_ARTIFACTS"
  for target in "${targets[@]}"; do
    name=${target#thdc-fuzz-}
    seeds=$name extra=()
    if [ "$name" = pipeline ] || [ "$name" = opt ]; then
      # thd-opt's input is pipeline text: the same seeds and dictionary.
      seeds=pipeline
      extra=("$build/test/fuzz/pipeline-seeds" "-dict=$build/test/fuzz/pipeline.dict"
             -max_len=32768)
    fi
    export THDC_FUZZ_CORPUS=$build/fuzz-corpus/$name
    echo "== $kind: $target, ${seconds} s"
    if ! "$root/test/fuzz/run-fuzzer.sh" "$build/bin/$target" "$root/test/fuzz/corpus/$seeds" \
        "$seconds" "${extra[@]}" "-timeout=${THDC_FUZZ_TIMEOUT:-10}"; then
      failed+=("$kind/$target")
    fi
  done
  # Artifacts a run of this script or an earlier one left and nobody looked at.
  if compgen -G "$THDC_FUZZ_ARTIFACTS/*" > /dev/null; then
    echo "== $kind: inputs that failed, in $THDC_FUZZ_ARTIFACTS:"
    ls -l "$THDC_FUZZ_ARTIFACTS"
    [ ${#failed[@]} -gt 0 ] || failed+=("$kind (earlier artifacts)")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: failing inputs found by: ${failed[*]}"
  exit 1
fi
[ "$seconds" = --merge ] || echo "scripts/fuzz.sh: no failing input"
