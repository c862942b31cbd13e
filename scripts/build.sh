#!/usr/bin/env bash
# Configures and builds thdc into ./build (Ninja, linked against the MLIR dylib).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${THDC_BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DMLIR_LINK_MLIR_DYLIB=ON \
    -DPython_EXECUTABLE="$(python3 -c 'import sys; print(sys.executable)')"
fi
cmake --build "$build" -j "$(nproc)"
