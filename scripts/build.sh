#!/usr/bin/env bash
# Configures and builds thdc into ./build (Ninja, linked against the MLIR
# dylib; THDC_BUILD_DIR names another folder). Configures only where the
# folder has no build.ninja yet.
#   scripts/build.sh               everything (what scripts/test.sh tests)
#   scripts/build.sh TARGET...     those targets and what they need, e.g.
#                                  thdc-demo: what scripts/run-example.sh runs
#   scripts/build.sh --configure   configures, builds nothing
# THDC_BUILD_JOBS: how many jobs at once (default: one per core).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${THDC_BUILD_DIR:-$root/build}
jobs=${THDC_BUILD_JOBS:-$(nproc)}
configure_only=0
if [ "${1:-}" = --configure ]; then
  configure_only=1
  shift
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DMLIR_LINK_MLIR_DYLIB=ON \
    -DPython_EXECUTABLE="$(python3 -c 'import sys; print(sys.executable)')"
fi
if [ "$configure_only" = 1 ]; then
  exit 0
fi
if [ $# -gt 0 ]; then
  cmake --build "$build" -j "$jobs" --target "$@"
else
  cmake --build "$build" -j "$jobs"
fi
