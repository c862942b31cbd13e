#!/usr/bin/env bash
# Makes, on a build machine with network, what scripts/gpu-pytest.sh installs
# on a GPU host without it, in two folders small enough to send one at a time:
#   OUT/kit/gpu-kit      TransformerEngine's kit (its cuDNN frontend moved out)
#   OUT/stack/           thdc's wheel (unpacked, xz), megatron-core, the
#                        optional wheels of the GPU tests, COMMIT
# On the GPU host: install-te.sh from the kit into a folder, then
#   THDC_GPU_TE=that-folder scripts/gpu-pytest.sh OUT/stack RESULTS
# (or move kit/gpu-kit into stack/ where both fit in one transfer).
# scripts/gpu-pytest.sh says what each file of the stack is for.
#
#   scripts/make-gpu-stack.sh OUT
# THDC_WHEEL: thdc's wheel (default: build one, `pip wheel .`, minutes);
# THDC_GPU_KIT: TransformerEngine's kit (default ../shared/gpu-kit);
# THDC_MEGATRON_ARCHIVE: an archive (tar.xz) of a megatron-core checkout
#   with megatron/ and pretrain_gpt.py (none: the megatron-core dev tests skip);
# THDC_GPU_WHEELS: names pip downloads for the GPU host's Python 3.12
#   (default the fla packages the linear-attention tests use).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: make-gpu-stack.sh OUT}
kit=${THDC_GPU_KIT:-$root/../shared/gpu-kit}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out/kit" "$out/stack"
mkdir -p "$out/kit" "$out/stack/wheels"

wheel=${THDC_WHEEL:-}
if [ -z "$wheel" ]; then
  echo "building thdc's wheel (minutes)"
  python3 -m pip wheel --no-deps -q -w "$work/wheel" "$root"
  wheel=$(ls "$work"/wheel/thdc-*.whl)
fi
mkdir -p "$work/site"
python3 -m zipfile -e "$wheel" "$work/site"
tar -cf - -C "$work/site" . | xz -9 -T0 > "$out/stack/thdc-wheel.tar.xz"
git -C "$root" rev-parse --short HEAD > "$out/stack/COMMIT" 2>/dev/null || echo unknown > "$out/stack/COMMIT"

# The kit, its cuDNN frontend (a wheel of 12 MB) moved to the stack as xz.
cp -r "$kit" "$out/kit/gpu-kit"
chmod -R u+w "$out/kit/gpu-kit"
rm -f "$out/kit/gpu-kit"/te-*/transformer_engine_torch-*.tar.gz  # the sdist: only to rebuild
for frontend in "$out/kit/gpu-kit"/te-*/deps/nvidia_cudnn_frontend-*.whl; do
  [ -f "$frontend" ] || continue
  mkdir -p "$work/frontend"
  python3 -m zipfile -e "$frontend" "$work/frontend"
  tar -cf - -C "$work/frontend" . | xz -9 -T0 > "$out/stack/wheels/$(basename "$frontend" .whl).tar.xz"
  rm "$frontend"
done

if [ -n "${THDC_MEGATRON_ARCHIVE:-}" ]; then
  cp "$THDC_MEGATRON_ARCHIVE" "$out/stack/megatron-core-$(basename "$THDC_MEGATRON_ARCHIVE" | sed 's/^megatron-core-//')"
fi
read -r -a names <<< "${THDC_GPU_WHEELS:-flash-linear-attention==0.6.0 fla-core==0.6.0}"
if [ ${#names[@]} -gt 0 ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$out/stack/wheels" "${names[@]}"
fi
du -sh "$out/kit" "$out/stack"
