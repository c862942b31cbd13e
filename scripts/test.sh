#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test through ctest: the lit
# suites, the unit, differential and Python tests; then the same suites and
# a short run of each fuzz target on a build with ASan and UBSan
# (scripts/sanitize.sh; THDC_SKIP_SANITIZE=1 leaves that out); then the
# package as a user installs it: the wheel built, installed into a fresh
# virtual environment and checked there (scripts/test-wheel.sh;
# THDC_SKIP_WHEEL=1 leaves that out).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${THDC_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "$(nproc)"
if [ "${THDC_SKIP_SANITIZE:-0}" != 1 ]; then
  "$root/scripts/sanitize.sh"
fi
if [ "${THDC_SKIP_WHEEL:-0}" != 1 ]; then
  "$root/scripts/test-wheel.sh"
fi
