# Sourced by this folder's run scripts, from the repository root. Puts on
# PYTHONPATH: thdc (the repository's Python sources and, from
# .carry/thdc-ext.tar.xz, its extension for CPython 3.12 built from the same
# commit with the JIT), megatron-core dev d48bd6be0a (.carry/, an archive of
# the public repository at that commit) and TransformerEngine 2.20.2 for
# Hopper (.kit/gpu-kit, installed in seconds).
root=/tmp/mg
rm -rf $root && mkdir -p $root/site/thdc $root/mdev
if [ -f .carry/thdc-py.tar.xz ]; then  # the sources of the commit the extension is built from
  tar -xJf .carry/thdc-py.tar.xz -C $root && cp -r $root/python/thdc/* $root/site/thdc/
else
  cp -r python/thdc/* $root/site/thdc/
fi
tar -xJf .carry/thdc-ext.tar.xz -C $root/site/thdc || exit 4
tar -xJf .carry/megatron-core-dev-d48bd6be0a.tar.xz -C $root/mdev || exit 4
# The kit's install-te.sh, its requirements' wheels unpacked beforehand
# (.carry/te-deps.tar.xz: xz packs them in 7.8 MB where the wheels take 14).
kit=.kit/gpu-kit/te-2.20.2
mkdir -p $root/te
tar -xJf $kit/te_cu13_sm90.tar.xz -C $root/te || exit 4
tar -xJf .carry/te-deps.tar.xz -C $root/te || exit 4
python3 -m pip install -q --no-index --no-deps --no-compile --target $root/te \
  $kit/transformer_engine-2.20.2-py3-none-any.whl > $root/te-install.log 2>&1 || { cat $root/te-install.log; exit 4; }
(cd $root/te && xz -dc $OLDPWD/$kit/te_torch_built.tar.xz | tar xf -) || exit 4
export PYTHONPATH=$root/site:$root/mdev:$root/te THDC_MEGATRON_DEV=$root/mdev \
  THDC_CACHE_DIR=$root/cache PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
