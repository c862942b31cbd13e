"""The commands `thdc`, `thd-opt` and `thd-run` of an installed package.

Each is the same program as the executable a CMake build writes to build/bin,
run inside the package's module (which carries the compiler), so that
`pip install` gives the commands with nothing else installed.
"""
import signal
import sys

from . import _thdc


def _run(name: str) -> None:
    if not hasattr(_thdc, "tool_main"):
        sys.stderr.write(
            f"{name}: this build of thdc has no compiler (it was built with "
            "THDC_RUNTIME_ONLY=ON); install thdc built with the compiler, or use "
            "the executables of a CMake build\n")
        sys.exit(2)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE; the tools are C++ programs that expect the
    # default, which ends them quietly when a reader such as `head` closes
    # the pipe (LLVM would otherwise report the failed write as a fatal
    # "IO failure on output stream").
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(_thdc.tool_main(name, [name] + sys.argv[1:]))


def thdc() -> None:
    _run("thdc")


def thd_opt() -> None:
    _run("thd-opt")


def thd_run() -> None:
    _run("thd-run")
