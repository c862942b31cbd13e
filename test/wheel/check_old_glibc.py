#!/usr/bin/env python3
"""Imports the installed thdc and JIT-compiles with it under an older glibc
than the one it was built on: run by scripts/test-old-glibc.sh, whose
interpreter runs on that glibc's dynamic loader and libraries.

    check_old_glibc.py GLIBC        (the version the process must run on)
"""
import os
import sys

import jit_check


def fail(what: str) -> None:
    raise SystemExit(f"check_old_glibc: {what}")


def main() -> None:
    running = os.confstr("CS_GNU_LIBC_VERSION")
    if running != f"glibc {sys.argv[1]}":
        fail(f"runs on {running}, not glibc {sys.argv[1]}")
    import thdc

    if not thdc.has_jit:
        fail("the installed package has no JIT")
    entry = jit_check.compile_and_check(fail)
    print(f"{running}: thdc {thdc.__version__} from {os.path.dirname(thdc.__file__)} "
          f"imported; JIT: {entry} compiled for the host, equal to the reference")


if __name__ == "__main__":
    main()
