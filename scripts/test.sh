#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test through ctest: the lit
# suites, the unit, differential and Python tests (with PyTorch on the CPU,
# on the build's Python); then the same suites and a short run of each fuzz
# target on a build with ASan and UBSan (scripts/sanitize.sh;
# THDC_SKIP_SANITIZE=1 leaves that out); then the package as a user installs
# it, on Python 3.12 (megatron-core's floor): the wheel built, installed into
# a fresh virtual environment with PyTorch and megatron-core, checked there
# and every file of test/python run on it (scripts/test-wheel.sh;
# THDC_SKIP_WHEEL=1 leaves that out; THDC_WHEEL_PYTHON names another
# interpreter).
# Each phase ends with a line "test.sh: PHASE took N s", and the script with
# the whole time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
started=$SECONDS
phase() { # NAME COMMAND...: runs a phase and says how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s"
}
phase setup "$root/scripts/setup.sh"
phase build "$root/scripts/build.sh"
build=${THDC_BUILD_DIR:-$root/build}
phase ctest bash -c 'cd "$1" && ctest --output-on-failure -j "$(nproc)"' _ "$build"
if [ "${THDC_SKIP_SANITIZE:-0}" != 1 ]; then
  phase sanitize "$root/scripts/sanitize.sh"
fi
if [ "${THDC_SKIP_WHEEL:-0}" != 1 ]; then
  python=${THDC_WHEEL_PYTHON:-$("$root/scripts/find-python.sh" 3.12)}
  phase wheel env THDC_WHEEL_PYTHON="$python" THDC_WHEEL_PYTEST=1 "$root/scripts/test-wheel.sh"
fi
echo "test.sh: all phases took $((SECONDS - started)) s"
