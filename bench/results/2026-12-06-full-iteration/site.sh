# Sourced by run.sh from the repository root. Puts on PYTHONPATH: thdc (its
# wheel's contents, .carry/thdc-wheel.tar.xz: the wheel of this tree from
# scripts/test-wheel.sh, unpacked and packed again with xz, which halves it;
# this tree's Python files over the wheel's),
# megatron-core dev d48bd6be0a (.carry/, an archive of the public repository
# at that commit) and TransformerEngine 2.20.2 for Hopper (.kit/gpu-kit's
# pieces; .carry/te-deps.tar.xz: its requirements' wheels unpacked).
root=/tmp/mg
rm -rf $root && mkdir -p $root/site $root/mdev $root/te
tar -xJf .carry/thdc-wheel.tar.xz -C $root/site || exit 4   # thdc/, thdc.libs/
cp -r python/thdc/* $root/site/thdc/
tar -xJf .carry/megatron-core-dev-d48bd6be0a.tar.xz -C $root/mdev || exit 4
kit=.kit/gpu-kit/te-2.20.2
tar -xJf $kit/te_cu13_sm90.tar.xz -C $root/te || exit 4
tar -xJf .carry/te-deps.tar.xz -C $root/te || exit 4
python3 -m pip install -q --no-index --no-deps --no-compile --target $root/te \
  $kit/transformer_engine-2.20.2-py3-none-any.whl > $root/te-install.log 2>&1 || { cat $root/te-install.log; exit 4; }
(cd $root/te && xz -dc $OLDPWD/$kit/te_torch_built.tar.xz | tar xf -) || exit 4
export PYTHONPATH=$root/site:$root/mdev:$root/te THDC_MEGATRON_DEV=$root/mdev \
  THDC_CACHE_DIR=$root/cache PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
