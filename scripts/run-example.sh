#!/usr/bin/env bash
# The main job: builds thdc, then parses, verifies and prints the bundled
# pipeline and runs one microbatch of it through the reference semantics on
# the specification's golden input, checking the outputs of both CP ranks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >/dev/null
"$root/scripts/build.sh" >/dev/null
bin=${THDC_BUILD_DIR:-$root/build}/bin
example="$root/examples/megatron_graph_step.mlir"

echo "== thd-opt: parse, verify and print $(basename "$example") =="
"$bin/thd-opt" "$example"
echo
echo "== the same pipeline specialised with its parameters bound =="
"$bin/thd-opt" "$example" --thd-bind-params | grep -E "thd.params|thd.pad_tail_metadata"
echo
echo "== one microbatch through the reference =="
"$bin/thd-golden-step"
