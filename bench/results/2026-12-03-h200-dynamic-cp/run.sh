#!/usr/bin/env bash
# The H200 run of dynamic CP (test/python/test_dynamic_cp_gpu.py), from the
# repository root: bench/results/2026-12-03-h200-dynamic-cp/run.sh OUT
# .carry3/ holds thdc's wheel unpacked and xz'd and, built from this
# commit, its Python extension for CPython 3.12 (thdc-ext.tar.xz), which
# replaces the wheel's; the Python sources of thdc are the repository's.
set -uo pipefail
out=$1
mkdir -p "$out"
site=/tmp/dcp/site
rm -rf /tmp/dcp && mkdir -p "$site"
tar -xJf .carry3/thdc-wheel.tar.xz -C "$site" || exit 4
rm -f "$site"/thdc/_thdc*.so
tar -xJf .carry3/thdc-ext.tar.xz -C "$site/thdc" || exit 4
cp python/thdc/*.py "$site/thdc/"
export PYTHONPATH=$site
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/machine.txt"
python3 -c "import torch, thdc, thdc.planner as p; print('torch', torch.__version__, 'thdc jit', thdc.has_jit, 'dynamic_cp_plan', hasattr(p, 'dynamic_cp_plan'))" >> "$out/machine.txt" 2>&1
cat "$out/machine.txt"
export THDC_ATTENTION_REPORT=$out/report.jsonl
rm -f "$THDC_ATTENTION_REPORT"
timeout 500 python3 -m pytest -v -rs -p no:cacheprovider test/python/test_dynamic_cp_gpu.py \
  test/python/test_dynamic_cp_cpu.py > "$out/pytest.txt" 2>&1
echo "   rc $?"
grep -E "passed|failed|SKIPPED|FAILED|Error" "$out/pytest.txt" | tail -n 30
cat "$THDC_ATTENTION_REPORT" 2>/dev/null
