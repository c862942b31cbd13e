#!/usr/bin/env bash
# Installs, on a GPU host with no network, the stack a user of thdc.megatron
# has (thdc's wheel, TransformerEngine, megatron-core dev, the optional
# packages given) into THDC_GPU_WORK (default /tmp/thdc-gpu) and points this
# shell at it: sourced, not run.
#
#   source scripts/gpu-stack.sh STACK OUT
# STACK: see scripts/gpu-pytest.sh. OUT: the install logs and summary.txt.
# Sets PYTHONPATH, PATH, THDC_CACHE_DIR, THDC_MEGATRON_DEV (the megatron-core
# checkout, when STACK has one) and the NCCL switches of a one-host run;
# `say` appends a line to OUT/summary.txt; `describe_stack` prints the card,
# its driver and the version of every package of the stack. Returns 2 when thdc's wheel is
# missing or does not install.
stack=$(cd "$1" && pwd) || return 2
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=${THDC_GPU_WORK:-/tmp/thdc-gpu}
site=$work/site
rm -rf "$work" && mkdir -p "$site"
say() { echo "$*" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"

if ls "$stack"/thdc-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$stack"/thdc-*.whl ||
    { say "cannot install thdc's wheel"; return 2; }
elif [ -f "$stack/thdc-wheel.tar.xz" ]; then
  tar -xJf "$stack/thdc-wheel.tar.xz" -C "$site" || { say "cannot unpack thdc-wheel.tar.xz"; return 2; }
else
  say "no thdc wheel in $stack"; return 2
fi
te=
if [ -d "$stack/gpu-kit" ]; then
  te=$work/te
  bash "$stack/gpu-kit/install-te.sh" "$stack/gpu-kit" "$te" > "$out/install-te.txt" 2>&1 ||
    { say "TransformerEngine did not install (install-te.txt)"; tail -n 5 "$out/install-te.txt"; }
elif [ -n "${THDC_GPU_TE:-}" ] && [ -d "$THDC_GPU_TE" ]; then
  te=$THDC_GPU_TE  # installed by an earlier install-te.sh (a stack too large to send at once)
fi
for archive in "$stack"/megatron-core-*.tar.xz; do
  [ -f "$archive" ] || continue
  mkdir -p "$work/megatron" && tar -xJf "$archive" -C "$work/megatron" &&
    export THDC_MEGATRON_DEV=$work/megatron
done
for archive in "$stack"/wheels/*.tar.xz; do  # a wheel unpacked, packed with xz
  [ -f "$archive" ] && { tar -xJf "$archive" -C "$site" || say "cannot unpack $archive"; }
done
if ls "$stack"/wheels/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$stack"/wheels/*.whl \
    > "$out/install-wheels.txt" 2>&1 || { say "some wheels did not install (install-wheels.txt)"; }
fi
path=$site
[ -n "$te" ] && path=$path:$te
[ -n "${THDC_MEGATRON_DEV:-}" ] && path=$path:$THDC_MEGATRON_DEV
export PYTHONPATH=$path${PYTHONPATH:+:$PYTHONPATH} PATH=$site/bin:$PATH
export THDC_CACHE_DIR=$work/cache PYTHONUNBUFFERED=1
# THDC_GPU_CUDNN=torch: every process runs the cuDNN PyTorch was built with.
# TransformerEngine loads the system's libcudnn first (its
# _load_cuda_library("cudnn")), and where the system's release differs from
# PyTorch's wheel a process holds two: TE's import then fails once PyTorch has
# loaded its own ("undefined symbol ... libcudnn_heuristic"), or cuDNN runs
# the system's engines (docs/megatron.md, "cuDNN").
if [ "${THDC_GPU_CUDNN:-}" = torch ]; then
  cudnn_lib=$(python3 -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
  if [ -n "$cudnn_lib" ] && [ -d "$cudnn_lib" ]; then
    export CUDNN_PATH=${cudnn_lib%/lib} LD_LIBRARY_PATH=$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    say "THDC_GPU_CUDNN=torch: PyTorch has no cuDNN wheel here; the system's cuDNN stays"
  fi
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1


describe_stack() {
  echo "commit: $(cat "$stack/COMMIT" 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 - <<'PY' 2>&1 | grep -v -i warn
import importlib
def version(name, attr="__version__"):
    try:
        module = importlib.import_module(name)
    except Exception as error:  # not installed, or fails to import
        return f"none ({type(error).__name__}: {str(error)[:120]})"
    value = getattr(module, attr, "?")
    return value() if callable(value) else value
import torch
print("torch", torch.__version__, "| cuDNN (torch)", torch.backends.cudnn.version(),
      "| thdc", version("thdc"), "JIT", version("thdc", "has_jit"),
      "| TE", version("transformer_engine"), "| megatron-core", version("megatron.core"),
      "| cudnn frontend", version("cudnn"), "| fla", version("fla"),
      "| flashinfer", version("flashinfer"), "| flash_attn.cute", version("flash_attn.cute"),
      "| triton", version("triton"))
PY
}
