#!/usr/bin/env bash
# The unit, lit and fuzz suites again, on a build with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, into ./build-sanitize): the project's
# own code is instrumented; LLVM and MLIR come uninstrumented from Debian, so
# errors inside them are not seen, the allocator poisoning of LLVM's headers
# is turned off (it cannot be kept consistent across the two), and leak
# checking is off (their static
# state and the JIT's fatal-error guard, which leaks by design, would be
# reported). Each libFuzzer target runs for THDC_FUZZ_SECONDS (default 10)
# from its seed corpus (long runs of them: scripts/fuzz.sh). The Python
# module is built instrumented too, and the drop-in's CPU tests and the
# binding's argument edges run on it with the sanitizer's shared runtime
# preloaded into (uninstrumented) Python (test/CMakeLists.txt,
# THDC_PYTEST_PRELOAD), their commands the release build's.
#   scripts/sanitize.sh               configure (once), build, test
#   scripts/sanitize.sh --configure   configure only (scripts/fuzz.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${THDC_SANITIZE_BUILD_DIR:-$root/build-sanitize}
sanitizers="-fsanitize=address,undefined -fno-sanitize=vptr,function -fno-sanitize-recover=all"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS_RELEASE="-O1" -DCMAKE_CXX_FLAGS_RELEASE="-O1" \
    -DCMAKE_C_FLAGS="$sanitizers -fno-omit-frame-pointer -gline-tables-only" \
    -DCMAKE_CXX_FLAGS="$sanitizers -fsanitize=fuzzer-no-link -fno-omit-frame-pointer -gline-tables-only" \
    -DCMAKE_EXE_LINKER_FLAGS="$sanitizers" -DCMAKE_SHARED_LINKER_FLAGS="$sanitizers" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DMLIR_LINK_MLIR_DYLIB=ON -DTHDC_FUZZ=ON -DTHDC_TEST_BUILDS_ALONE=OFF \
    -DPython_EXECUTABLE="$(python3 -c 'import sys; print(sys.executable)')" \
    -DTHDC_PYTEST_PRELOAD="$(clang++-14 -print-file-name=libclang_rt.asan-x86_64.so)" \
    -DTHDC_PYTEST_BIN_DIR="${THDC_BUILD_DIR:-$root/build}/bin" \
    -DTHDC_FUZZ_SECONDS="${THDC_FUZZ_SECONDS:-10}"
fi
if [ "${1:-}" = --configure ]; then
  exit 0
fi
cmake --build "$build" -j "$(nproc)"
# allow_user_poisoning=0: LLVM's headers poison BumpPtrAllocator slabs in the
# code compiled here, and the uninstrumented libMLIR then allocates from
# them without unpoisoning, which ASan reports as use-after-poison (seen
# with the pipeline fuzzer: a StringAttr written into such a slab).
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$build"
ctest --output-on-failure -j "$(nproc)"
