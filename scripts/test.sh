#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test through ctest: the lit
# suites, the unit, differential and Python tests (with PyTorch on the CPU,
# on the build's Python; the Python files that the wheel phase runs are
# left to it); then the same suites and a short run of each fuzz
# target on a build with ASan and UBSan (scripts/sanitize.sh;
# THDC_SKIP_SANITIZE=1 leaves that out); then the package as a user installs
# it, on Python 3.12 (megatron-core's floor): the wheel built, installed into
# a fresh virtual environment with PyTorch and megatron-core, checked there
# and every file of test/python run on it (scripts/test-wheel.sh;
# THDC_SKIP_WHEEL=1 leaves that out; THDC_WHEEL_PYTHON names another
# interpreter).
# Each phase writes its output to build/logs/test-PHASE.log (THDC_LOG_DIR
# names another folder) and prints one line: its counts (ctest's and
# pytest's summary lines) and how long it took; a phase that fails prints
# its failures (ctest's failed tests and their output, pytest's FAILED
# lines, the first error) and the end of its log, and stops the script.
# THDC_TEST_VERBOSE=1 prints every phase's whole output as it runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
started=$SECONDS
logs=${THDC_LOG_DIR:-${THDC_BUILD_DIR:-$root/build}/logs}
mkdir -p "$logs"
counts() { # LOG: the summary lines of ctest and pytest in it, on one line
  grep -E "^[0-9]+% tests passed|^=*\s*[0-9]+ (passed|failed)|^[0-9]+ (passed|failed)" "$1" |
    sed -E 's/^=+ | =+$//g' | paste -sd ';' - | sed 's/;/; /g' || true
}
failures() { # LOG: what failed, then the end of the log
  grep -n -E "\*\*\*Failed|\*\*\*Exception|\(Failed\)|^FAILED |^ERROR |error:|Error:" "$1" |
    head -n 40 || true
  echo "-- the last 60 lines of $1:"
  tail -n 60 "$1"
}
phase() { # NAME COMMAND...: runs a phase into its log, prints its one line
  local name=$1 start=$SECONDS log="$logs/test-$1.log" status=0
  shift
  if [ "${THDC_TEST_VERBOSE:-0}" = 1 ]; then
    "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  else
    "$@" > "$log" 2>&1 || status=$?
  fi
  if [ "$status" != 0 ]; then
    echo "test.sh: $name FAILED (exit $status) after $((SECONDS - start)) s:"
    failures "$log"
    exit "$status"
  fi
  local line
  line=$(counts "$log")
  echo "test.sh: $name took $((SECONDS - start)) s${line:+: $line} (log: $log)"
}
phase setup "$root/scripts/setup.sh"
phase build "$root/scripts/build.sh"
build=${THDC_BUILD_DIR:-$root/build}
# The files of test/python labelled python run in the wheel phase, on the
# package as users install it (Python 3.12, megatron-core), and not here
# too: here, without the wheel phase, or under plain ctest.
select=()
if [ "${THDC_SKIP_WHEEL:-0}" != 1 ]; then
  select=(-LE '^python$')
fi
phase ctest bash -c 'cd "$1" && shift && ctest --output-on-failure -j "$(nproc)" "$@"' _ "$build" "${select[@]}"
if [ "${THDC_SKIP_SANITIZE:-0}" != 1 ]; then
  phase sanitize "$root/scripts/sanitize.sh"
fi
if [ "${THDC_SKIP_WHEEL:-0}" != 1 ]; then
  python=${THDC_WHEEL_PYTHON:-$("$root/scripts/find-python.sh" 3.12)}
  phase wheel env THDC_WHEEL_PYTHON="$python" THDC_WHEEL_PYTEST=1 "$root/scripts/test-wheel.sh"
fi
echo "test.sh: all phases took $((SECONDS - started)) s"
