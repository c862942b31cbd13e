#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test through ctest: the lit
# suites, the unit, differential and Python tests; then the same suites and
# a short run of each fuzz target on a build with ASan and UBSan
# (scripts/sanitize.sh; THDC_SKIP_SANITIZE=1 leaves that out).
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
