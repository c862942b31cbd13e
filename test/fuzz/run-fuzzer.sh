#!/usr/bin/env bash
# Runs one fuzz target for SECONDS from its seed corpora (read only; new
# inputs go to a temporary folder, or to $THDC_FUZZ_CORPUS, which then
# keeps them for the next run) and prints libFuzzer's final stats. An input
# that crashes, leaks, hangs or runs out of memory is kept in
# $THDC_FUZZ_ARTIFACTS (default: ./fuzz-artifacts) and fails the run.
#   test/fuzz/run-fuzzer.sh FUZZER SEED_DIR SECONDS [SEED_DIR | -option]...
# Arguments after SECONDS that start with `-` go to libFuzzer (e.g.
# -dict=FILE, -timeout=5; a later one overrides the defaults below), the
# others are more seed folders.
set -uo pipefail
fuzzer=$1 seeds=$2 seconds=$3
shift 3
options=()
dirs=("$seeds")
for arg in "$@"; do
  case $arg in
    -*) options+=("$arg") ;;
    *) dirs+=("$arg") ;;
  esac
done
artifacts=${THDC_FUZZ_ARTIFACTS:-$PWD/fuzz-artifacts}
# As scripts/sanitize.sh sets them (why: there).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=${THDC_FUZZ_CORPUS:-$work/corpus}
mkdir -p "$corpus"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$artifacts/$(basename "$fuzzer")-" "${options[@]}" \
  "$corpus" "${dirs[@]}" > "$work/log" 2>&1
rc=$?
grep -E "INFO: Seed|Dictionary:|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|ERROR|SUMMARY|Test unit written|Done [0-9]+ runs" "$work/log"
if [ $rc -ne 0 ]; then
  echo "the fuzzer found a failing input (exit code $rc); the log's end:"
  tail -n 40 "$work/log"
  exit 1
fi
