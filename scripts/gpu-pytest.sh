#!/usr/bin/env bash
# Every GPU test file of test/python on a GPU host with no network, on the
# stack a user of thdc.megatron has: thdc's wheel (built elsewhere by
# scripts/test-wheel.sh: the compiler and its JIT, so no MLIR is needed
# here), TransformerEngine, megatron-core dev and every optional package the
# tests use that was given. Prints one line per file (counts, and why each
# skip or failure), then the totals.
#
#   scripts/gpu-pytest.sh STACK OUT [FILE...]
# STACK, a folder of what to install (each piece optional but the wheel):
#   thdc-*.whl, or thdc-wheel.tar.xz (the wheel unpacked, packed with xz)
#   gpu-kit/                  TransformerEngine's kit (its install-te.sh); or
#                             THDC_GPU_TE, a folder it was installed into before
#   megatron-core-*.tar.xz    an archive of a megatron-core checkout
#                             (megatron/, pretrain_gpt.py, ...): THDC_MEGATRON_DEV
#   wheels/*.whl              other packages (flash-linear-attention, flashinfer,
#                             flash-attn-4 and what they need), --no-deps;
#                             wheels/*.tar.xz, a wheel's files packed with xz
#   COMMIT                    the commit the wheel and the tree were made at
# OUT: one log and one JUnit file per test file, summary.txt.
# FILE: test files to run (default: every test/python/test_*_gpu.py).
# THDC_GPU_PYTEST_TIMEOUT: seconds per file (default 900).
# THDC_GPU_PYTEST_JOBS: how many files run at once (default 1).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# -- the stack ---------------------------------------------------------------
source "$root/scripts/gpu-stack.sh" "$1" "$2" || exit 2
shift 2

# -- what runs ---------------------------------------------------------------
describe_stack | tee -a "$out/summary.txt"

summarise() { # NAME JUNIT LOG RC: one line of counts and reasons
  python3 - "$@" <<'PY'
import collections, os, sys, xml.etree.ElementTree as ET
name, junit, log, rc = sys.argv[1:5]
if not os.path.exists(junit):
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    # pytest -q's progress before it was stopped: one character a test.
    progress = "".join(line.split(" ")[0] for line in text.splitlines()
                       if line and set(line.split(" ")[0]) <= set(".FEsxX"))
    if rc == "124":
        print(f"{name}: did not finish within the time limit; before it: "
              f"{progress.count('.')} passed, {progress.count('F') + progress.count('E')} "
              f"failed, {progress.count('s')} skipped")
    else:
        tail = text.strip().splitlines()[-1:]
        print(f"{name}: did not run (exit {rc}): {' '.join(tail)[:300]}")
    sys.exit(0)
counts, reasons = collections.Counter(), collections.Counter()
for case in ET.parse(junit).getroot().iter("testcase"):
    kinds = [c.tag for c in case]
    if "failure" in kinds or "error" in kinds:
        counts["failed"] += 1
        node = case.find("failure") if case.find("failure") is not None else case.find("error")
        reasons["FAILED " + (node.get("message") or "").splitlines()[0][:160]] += 1
    elif "skipped" in kinds:
        counts["skipped"] += 1
        reasons["skipped: " + (case.find("skipped").get("message") or "")[:160]] += 1
    else:
        counts["passed"] += 1
line = f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
if rc not in ("0", "1", "5"):
    line += f" (pytest exit {rc})"
print(line)
for reason, n in reasons.most_common(6):
    print(f"    {n} x {reason}")
PY
}

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=("$root"/test/python/test_*_gpu.py)
fi
limit=${THDC_GPU_PYTEST_TIMEOUT:-900}
run_file() { # NAME FILE [pytest args]: runs one file, prints its line
  local name=$1 file=$2
  shift 2
  (cd "$root/test/python" && timeout "$limit" python3 -m pytest -q -rs -p no:cacheprovider \
    --junitxml "$out/$name.xml" "$file" "$@" > "$out/$name.txt" 2>&1)
  summarise "$name" "$out/$name.xml" "$out/$name.txt" $? | tee -a "$out/summary.txt"
}
# THDC_GPU_PYTEST_JOBS files at a time (default 1): the files share the GPU
# and the stack; each takes the next file as one ends, so the longest should
# come first (test_linear_attention_gpu, whose first Triton compile of
# flash-linear-attention's kernels takes minutes).
jobs=${THDC_GPU_PYTEST_JOBS:-1}
for file in "${files[@]}"; do
  while [ "$(jobs -r -p | wc -l)" -ge "$jobs" ]; do
    wait -n
  done
  run_file "$(basename "$file" .py)" "$(basename "$file")" &
done
wait
python3 - "$out" <<'PY' | tee -a "$out/summary.txt"
import glob, sys, xml.etree.ElementTree as ET
total = dict(passed=0, failed=0, skipped=0)
for junit in glob.glob(sys.argv[1] + "/*.xml"):
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {c.tag for c in case}
        total["failed" if kinds & {"failure", "error"} else
              "skipped" if "skipped" in kinds else "passed"] += 1
print(f"GPU files: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
PY
