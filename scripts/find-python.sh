#!/usr/bin/env bash
# Prints the path of a Python interpreter of version X.Y (the argument):
# pythonX.Y on PATH, else pyenv's newest X.Y.*; fails naming what to install.
#   scripts/find-python.sh 3.12
set -euo pipefail
want=${1:?usage: find-python.sh X.Y}
candidates=("python$want")
if command -v pyenv > /dev/null 2>&1; then
  root=$(pyenv root)
  while IFS= read -r version; do
    candidates+=("$root/versions/$version/bin/python$want")
  done < <(pyenv versions --bare 2>/dev/null | grep -E "^$want(\.[0-9]+)?$" | sort -t. -k3 -n -r)
fi
for candidate in "${candidates[@]}"; do
  if "$candidate" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$want'.split('.')))" 2>/dev/null; then
    command -v "$candidate"
    exit 0
  fi
done
echo "find-python.sh: no Python $want (install it, e.g. pyenv install $want, or name one in THDC_WHEEL_PYTHON)" >&2
exit 1
