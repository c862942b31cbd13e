#!/usr/bin/env bash
# Installs everything thdc needs to build and test on a fresh Debian 12 machine.
set -euo pipefail

packages=(cmake ninja-build g++ python3 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools libfmt-dev libgtest-dev
          clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
# The Python package: nanobind to build it, NumPy and pytest to test it, and
# PyTorch for the tests that need it but no GPU (PyPI's build, which runs on
# the CPU; about 5 GB). THDC_SKIP_TORCH=1 leaves PyTorch out.
python_packages=(nanobind==3.1.0 numpy pytest)
if ! python3 -c "import nanobind, numpy, pytest" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${python_packages[@]}"
fi
if [ "${THDC_SKIP_TORCH:-0}" != 1 ] && ! python3 -c "import torch" 2>/dev/null; then
  echo "Installing PyTorch for $(python3 --version) (the tests that need it but no GPU)..."
  start=$(date +%s)
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "torch>=2.10"
  echo "PyTorch $(python3 -c 'import torch; print(torch.__version__)') installed in $(($(date +%s) - start)) s"
fi
echo "thdc dependencies are installed."
