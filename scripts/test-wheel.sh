#!/usr/bin/env bash
# Installs thdc as a user does and checks what they get: builds the wheel
# (`pip wheel .`, pyproject.toml: the compiler and the JIT with LLVM/MLIR
# linked in), installs it into a fresh virtual environment, and runs
# test/wheel/check_installed.py there, from outside the source tree, with no
# PYTHONPATH: the quickstart's CPU path, a JIT compile and the commands thdc,
# thd-opt and thd-run. Prints the wheel's size and build time.
#
#   scripts/test-wheel.sh [DIST_DIR]
# DIST_DIR keeps the wheel (default: a temporary folder, removed after).
# THDC_WHEEL_PYTHON: the interpreter to build and test for (default python3).
# THDC_WHEEL_PYTEST=1: then also installs PyTorch and megatron-core
# (THDC_MEGATRON_CORE, default megatron-core==0.19.2; needs Python >= 3.12)
# into the environment and runs every file of test/python against the
# installed package, with no build tree on its path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${THDC_WHEEL_PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dist=${1:-$work/dist}
mkdir -p "$dist"

"$python" -m venv "$work/venv"
venv=$work/venv/bin
"$venv/python" -m pip install --quiet --disable-pip-version-check --upgrade pip

start=$(date +%s)
rm -f "$dist"/thdc-*.whl
"$venv/python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
  --wheel-dir "$dist" "$root"
built=$(date +%s)
wheel=$(ls "$dist"/thdc-*.whl)
echo "wheel: $(basename "$wheel"), $(du -m "$wheel" | cut -f1) MiB, built in $((built - start)) s"

"$venv/python" -m pip install --quiet --disable-pip-version-check "$wheel"
cd "$work"
env -u PYTHONPATH "$venv/python" "$root/test/wheel/check_installed.py" "$root"

if [ "${THDC_WHEEL_PYTEST:-0}" = 1 ]; then
  echo "test/python on the installed wheel, with PyTorch and ${THDC_MEGATRON_CORE:-megatron-core==0.19.2}"
  start=$(date +%s)
  "$venv/python" -m pip install --quiet --disable-pip-version-check pytest "torch>=2.10" \
    "${THDC_MEGATRON_CORE:-megatron-core==0.19.2}"
  echo "installed in $(($(date +%s) - start)) s: $("$venv/python" -c 'import torch, megatron.core as m; print("torch", torch.__version__, "megatron-core", m.__version__)')"
  # No build tree: the tests that run the commands find the installed ones,
  # on the environment's PATH.
  env -u PYTHONPATH THDC_BIN_DIR="$work/no-build-tree" PATH="$venv:$PATH" \
    "$venv/python" -m pytest -q -p no:cacheprovider -rs "$root/test/python"
fi
