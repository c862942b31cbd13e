#!/usr/bin/env bash
# The main job: installs what is missing, builds thdc, compiles the bundled
# pipeline examples/megatron_graph_step.mlir and runs it: on the GPU if there
# is one, else on the CPU path. 100 random microbatches go through one
# captured launch and each is checked against the reference semantics; then
# the same from Python (examples/python/quickstart.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >/dev/null
"$root/scripts/build.sh" >/dev/null
bin=${THDC_BUILD_DIR:-$root/build}/bin
example="$root/examples/megatron_graph_step.mlir"
params=(--param C=4096 --param cp=2 --param N=64)

echo "== the pipeline, with static shapes and fused into one kernel =="
"$bin/thd-opt" "$example" "${params[@]}" --thd-force-static-shapes --thd-fuse |
  grep -E "func.func|thd.fused|thd.yield" | cut -c1-160
echo
echo "== thdc: the bundle (PTX of one kernel, host code, manifest) =="
bundle=$(mktemp -d)
trap 'rm -rf "$bundle"' EXIT
"$bin/thdc" "$example" "${params[@]}" -o "$bundle"
ls -l "$bundle" | tail -n +2
grep -c "^.visible .entry" "$bundle/megatron_graph_step.ptx" | sed 's/^/kernels in the PTX: /'
echo
echo "== one microbatch of the running example of docs/semantics.md, through the reference =="
"$bin/thd-golden-step" | tail -1
echo
echo "== compiled in-process, captured once, replayed for 100 microbatches =="
"$bin/thdc-embed" "$example" "${params[@]}"
echo
echo "== the same from Python (thdc package; PyTorch and a GPU when present) =="
PYTHONPATH="${THDC_BUILD_DIR:-$root/build}/python${PYTHONPATH:+:$PYTHONPATH}" \
  python3 "$root/examples/python/quickstart.py"
