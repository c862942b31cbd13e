set -uo pipefail
out=$1; mkdir -p "$out"
site=/tmp/dcp/site
rm -rf /tmp/dcp && mkdir -p "$site/thdc"
cp -r python/thdc/* "$site/thdc/"
tar -xJf .carry/thdc-ext.tar.xz -C "$site/thdc" || exit 4
export PYTHONPATH=$site THDC_CACHE_DIR=/tmp/dcp/cache
for W in 4 8; do
  timeout 120 python3 bench/get_batch.py --C 8192 --N 64 --dynamic-cp $W --calls 1000 \
    --json "$out/get-batch-dynamic-$W.json" > "$out/get-batch-dynamic-$W.txt" 2>&1
  echo "rc $?"; cat "$out/get-batch-dynamic-$W.txt"
done
timeout 120 python3 bench/get_batch.py --C 8192 --cp 2 --N 64 --calls 1000 \
  --json "$out/get-batch-fixed-cp2.json" > "$out/get-batch-fixed-cp2.txt" 2>&1
echo "rc $?"; grep -v -i "warn" "$out/get-batch-fixed-cp2.txt"
