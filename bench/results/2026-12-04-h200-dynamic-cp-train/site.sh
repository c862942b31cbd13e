# Sourced by this folder's run scripts, from the repository root: thdc's
# Python sources from the repository and, in .carry/thdc-ext.tar.xz, its
# extension for CPython 3.12 built from the same commit with LLVM and MLIR
# linked in, unpacked into one site folder on PYTHONPATH.
site=/tmp/dcp/site
rm -rf /tmp/dcp && mkdir -p "$site/thdc"
cp -r python/thdc/* "$site/thdc/"
tar -xJf .carry/thdc-ext.tar.xz -C "$site/thdc" || exit 4
export PYTHONPATH=$site THDC_CACHE_DIR=/tmp/dcp/cache
