#!/usr/bin/env python3
"""Checks that a Python extension module loads on glibc GLIBC and later.

    scripts/check-glibc-versions.py MODULE.so GLIBC        (GLIBC: e.g. 2.28)

The dynamic loader refuses a module that needs a symbol version its glibc
lacks, and one whose symbol no loaded library defines fails at its first
call; auditwheel reads only the first. So, from `readelf --dyn-syms -d`:
- every GLIBC_x.y version that the module needs is at most GLIBC;
- every undefined symbol (but weak ones) is versioned, or is Python's C API
  (Py*, _Py*: the interpreter defines them);
- it needs no shared library but glibc's and libgcc_s (libstdc++ linked in).
Prints the highest version it needs of each library, and exits 1 naming
what breaks a rule. (cmake/thdcManylinux.cmake links the module this way.)
"""
import re
import subprocess
import sys

ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
                  "librt.so.1", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}


def version_key(text):
    return tuple(int(part) for part in text.split("."))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    module, target = sys.argv[1], sys.argv[2]
    out = subprocess.run(["readelf", "-W", "--dyn-syms", "-d", module],
                         check=True, capture_output=True, text=True).stdout
    problems = []
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    for lib in needed:
        if lib not in ALLOWED_NEEDED:
            problems.append(f"needs {lib}")
    highest = {}  # library prefix (GLIBC, GCC, ...) -> highest version
    python_symbols = 0
    for line in out.splitlines():
        fields = line.split()
        # Num: Value Size Type Bind Vis Ndx Name [(version index)]
        if len(fields) < 8 or not fields[0].endswith(":") or fields[6] != "UND":
            continue
        name, bind = fields[7], fields[4]
        if not name or name == "UND":
            continue
        symbol, _, version = name.partition("@")
        if version:
            match = re.fullmatch(r"@?([A-Z]+)_([0-9.]+)", version)
            if not match:
                continue
            prefix, number = match.groups()
            if prefix not in highest or version_key(number) > version_key(highest[prefix][0]):
                highest[prefix] = (number, symbol)
            if prefix == "GLIBC" and version_key(number) > version_key(target):
                problems.append(f"{symbol}@GLIBC_{number} is newer than glibc {target}")
        elif re.match(r"_?Py", symbol):
            python_symbols += 1
        elif bind != "WEAK":
            problems.append(f"{symbol} is undefined and no library is named for it")
    print(f"{module}: needs {', '.join(needed)}")
    print("highest versions: " + ", ".join(
        f"{prefix}_{number} ({symbol})" for prefix, (number, symbol) in sorted(highest.items()))
        + f"; {python_symbols} symbols of Python's C API")
    if problems:
        for problem in problems:
            print(f"check-glibc-versions.py: {problem}", file=sys.stderr)
        print(f"check-glibc-versions.py: {module} does not load on glibc {target}", file=sys.stderr)
        sys.exit(1)
    print(f"loads on glibc {target} and later")


if __name__ == "__main__":
    main()
