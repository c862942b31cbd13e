#!/usr/bin/env bash
# Installs everything thdc needs to build and test on a fresh Debian 12 machine.
# Before each step that installs something it says what it does, and after
# it how long that took, on lines starting "setup: " (apt-get and pip run
# quietly for minutes, their output shown only when they fail; PyTorch is
# about 5 GB).
#   scripts/setup.sh           installs what is missing
#   scripts/setup.sh --check   installs nothing: one line saying how much is
#                              missing (the install's own lines name it)
set -euo pipefail
check_only=0
if [ "${1:-}" = --check ]; then
  check_only=1
fi

# zlib1g-dev, libzstd-dev: their static archives, which the wheel's module
# links (cmake/thdcManylinux.cmake).
packages=(cmake ninja-build g++ python3 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools libfmt-dev libgtest-dev
          clang-14 libclang-rt-14-dev zlib1g-dev libzstd-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The Python package: nanobind to build it, NumPy and pytest to test it,
# matplotlib for the training example's plots (and their test), and PyTorch
# for the tests that need it but no GPU (PyPI's build, which runs on the
# CPU; about 5 GB). THDC_SKIP_TORCH=1 leaves PyTorch out.
python_modules=(nanobind numpy pytest matplotlib)
python_packages=(nanobind==3.1.0 numpy pytest matplotlib) # what pip installs for each
want_torch=1
if [ "${THDC_SKIP_TORCH:-0}" = 1 ]; then
  want_torch=0
fi

missing_modules() { # MODULE...: those python3 lacks, found without importing
  # them (PyTorch takes seconds); all of them without a python3
  if command -v python3 > /dev/null 2>&1; then
    python3 -c 'import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))' "$@" && return
  fi
  echo "$*"
}

seconds() { # a duration in seconds, as "42 s" or "3 min 12 s"
  if [ "$1" -ge 60 ]; then
    echo "$(($1 / 60)) min $(($1 % 60)) s"
  else
    echo "$1 s"
  fi
}
timed() { # WHAT COMMAND...: says what it does, runs it with its output in a
  # log (shown only if it fails), says how long it took
  local what=$1 start=$SECONDS log
  shift
  echo "setup: $what ..."
  log=$(mktemp)
  if ! "$@" > "$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup: $what: failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "setup: done in $(seconds $((SECONDS - start)))"
}

if [ "$check_only" = 1 ]; then
  # Counts only, for apt and pip alike: the lines of the install that
  # follows name what it installs, once.
  modules=("${python_modules[@]}")
  if [ "$want_torch" = 1 ]; then
    modules+=(torch)
  fi
  read -r -a pip_missing <<< "$(missing_modules "${modules[@]}")"
  if [ ${#missing[@]} -gt 0 ]; then
    apt_summary="apt: ${#missing[@]} of ${#packages[@]} packages missing"
  else
    apt_summary="apt: all ${#packages[@]} packages installed"
  fi
  if [ ${#pip_missing[@]} -gt 0 ]; then
    pip_summary="pip: ${#pip_missing[@]} of ${#modules[@]} modules missing"
  else
    pip_summary="pip: all ${#modules[@]} modules installed"
  fi
  echo "$apt_summary, $pip_summary"
  exit 0
fi

if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  timed "apt-get update" $sudo_cmd apt-get update -qq
  timed "apt-get install ${missing[*]} (and what they depend on)" \
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
read -r -a absent <<< "$(missing_modules "${python_modules[@]}")"
to_install=()
for i in "${!python_modules[@]}"; do
  for module in "${absent[@]}"; do
    if [ "$module" = "${python_modules[$i]}" ]; then
      to_install+=("${python_packages[$i]}")
    fi
  done
done
if [ ${#to_install[@]} -gt 0 ]; then
  timed "pip install ${to_install[*]}" \
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${to_install[@]}"
fi
if [ "$want_torch" = 1 ] && ! python3 -c "import torch" 2>/dev/null; then
  timed "pip install torch>=2.10 for $(python3 --version) (PyPI's build, about 5 GB; the tests that need it but no GPU)" \
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "torch>=2.10"
  echo "setup: PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
fi
echo "thdc dependencies are installed."
