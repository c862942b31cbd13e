#!/usr/bin/env bash
# Runs one fuzz target for SECONDS from its seed corpus (read only; new
# inputs go to a temporary folder) and prints libFuzzer's final stats.
#   test/fuzz/run-fuzzer.sh FUZZER SEED_DIR SECONDS [libFuzzer options...]
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$work/" "$@" "$work" "$seeds" 2>&1 |
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY|Test unit written|Done [0-9]+ runs" || true
# A crash leaves an artifact (crash-, leak-, timeout-, oom-) in $work.
if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* >/dev/null 2>&1; then
  echo "the fuzzer found a failing input"
  exit 1
fi
