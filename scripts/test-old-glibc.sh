#!/usr/bin/env bash
# Runs an installed thdc under an older glibc than this machine's: imports it
# and JIT-compiles with it (test/wheel/check_old_glibc.py) in a process whose
# dynamic loader, libc, libpthread, libdl, libm, libstdc++ and libgcc_s are
# Debian 11's (glibc 2.31: before 2.34 moved dlopen and pthread_* into libc,
# the change that breaks modules built on a newer glibc). Called by
# scripts/test-wheel.sh on the manylinux_2_28 wheel. Glibc 2.28 itself (the
# tag's) is checked by symbol versions only: no Debian release with it is
# still in the archive.
#
#   scripts/test-old-glibc.sh VENV ZIG
# VENV: the virtual environment with thdc installed (its site-packages, and
# its base interpreter's standard library); ZIG: zig (PyPI's ziglang).
#
# The interpreter: the base CPython's own python.o and static libpython,
# relinked against glibc 2.31's stubs (zig cc, as cmake/thdcManylinux.cmake
# uses them); its close_range (glibc 2.34) is test/wheel/close_range.c. The
# standard library's extension modules that need glibc 2.34 (subprocess's,
# ctypes') do not load there, and neither thdc's import nor its JIT needs them.
# Debian 11's packages come through apt, from this machine's Debian mirror,
# signature and hashes checked, into a temporary folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$(cd "${1:?usage: test-old-glibc.sh VENV ZIG}" && pwd)
zig=${2:?usage: test-old-glibc.sh VENV ZIG}
glibc=2.31
suite=bullseye
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Debian 11's libc6, libgcc-s1 and libstdc++6, unpacked.
mirror=$(apt-get indextargets --format '$(URI)' 'Created-By: Packages' |
  sed -n -E 's#^(.*)/dists/[^/]+/main/binary-amd64/Packages$#\1#p' | head -n 1)
if [ -z "$mirror" ]; then
  echo "test-old-glibc.sh: apt names no Debian mirror (apt-get update first)" >&2
  exit 1
fi
apt_dir=$work/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
  > "$apt_dir/sources.list"
: > "$apt_dir/status"
apt_options=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status="$apt_dir/status"
             -o Dir::Cache="$apt_dir/cache" -o APT::Sandbox::User=root -qq)
apt-get "${apt_options[@]}" update
(cd "$work" && apt-get "${apt_options[@]}" download libc6 libgcc-s1 libstdc++6)
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
done
libs=$work/root/lib/x86_64-linux-gnu:$work/root/usr/lib/x86_64-linux-gnu
loader=$work/root/lib64/ld-linux-x86-64.so.2
[ -e "$loader" ] || loader=$work/root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2

# The interpreter, for glibc 2.31.
python=$venv/bin/python
read -r libpl library home < <("$python" -c 'import sys, sysconfig as s
print(s.get_config_var("LIBPL"), s.get_config_var("LIBRARY"), sys.base_prefix)')
if [ ! -f "$libpl/$library" ] || [ ! -f "$libpl/python.o" ]; then
  echo "test-old-glibc.sh: $("$python" --version) has no static libpython ($libpl/$library) to relink" >&2
  exit 1
fi
ZIG_GLOBAL_CACHE_DIR=$work/zig-cache ZIG_LOCAL_CACHE_DIR=$work/zig-cache \
  "$zig" cc -target "x86_64-linux-gnu.$glibc" -O2 -fno-sanitize=all -o "$work/python" \
  "$root/test/wheel/close_range.c" "$libpl/python.o" "$libpl/$library" \
  -ldl -lm -lpthread -lutil -Wl,--export-dynamic

site=$("$python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
cd "$work"
env -i PATH=/usr/bin:/bin PYTHONHOME="$home" PYTHONNOUSERSITE=1 \
  PYTHONPATH="$site:$root/test/wheel" \
  "$loader" --library-path "$libs" "$work/python" "$root/test/wheel/check_old_glibc.py" "$glibc"
