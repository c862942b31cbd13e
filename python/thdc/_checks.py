"""Argument checks of the package's functions and the PyTorch gate: each
raises TypeError or ValueError naming the argument, ImportError or
ModuleNotFoundError saying what to install. Every module of thdc takes them
from here (thdc/__init__.py re-exports them)."""
from __future__ import annotations

import collections.abc
import numbers
import os
import re
import sys

def _check_str(value, what: str) -> str:
    """`value` if it is a str; TypeError naming `what` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str; got {type(value).__name__}")
    return value


def _check_int(value, what: str) -> int:
    """`value` as an int: a Python or NumPy integer, never a bool, a float
    (which int() would truncate) or a string; TypeError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int; got {type(value).__name__}")
    return int(value)


def _check_path(value, what: str) -> str:
    """A str or os.PathLike path as a str; TypeError naming `what` otherwise
    (bytes paths included)."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str or an os.PathLike path; got "
                        f"{type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError(f"{what} must be a str path; got {type(path).__name__}")
    return path


def _check_params(params) -> dict:
    """compile()'s parameters: a mapping of str names to ints (None: none)."""
    if params is None:
        return {}
    if not isinstance(params, collections.abc.Mapping):
        raise TypeError("params must be a mapping of parameter names to ints; got "
                        f"{type(params).__name__}")
    values = {}
    for name, value in params.items():
        if not isinstance(name, str):
            raise TypeError(f"params keys must be parameter names (str); got {name!r}")
        values[name] = _check_int(value, f"params[{name!r}]")
    return values


#: The oldest PyTorch thdc.torch and thdc.megatron work with. From 2.10 a
#: torch.Tensor carries DLPack's exchange table, through which a call reads
#: PyTorch's current stream; an older torch's tensors would be launched on
#: the CUDA default stream instead, unordered with the work on the current one.
TORCH_MIN_VERSION = (2, 10)


def _import_torch(what: str):
    """PyTorch, for the module `what` that needs it: ModuleNotFoundError
    saying what to install when there is none, ImportError when it is older
    than TORCH_MIN_VERSION."""
    try:
        import torch
    except ModuleNotFoundError as error:
        if error.name != "torch":
            raise
        required = ".".join(map(str, TORCH_MIN_VERSION))
        raise ModuleNotFoundError(
            f"{what} needs PyTorch >= {required}, which is not installed: "
            f"pip install 'thdc[torch]' (or pip install 'torch>={required}'); the rest "
            "of thdc (thdc.compile, thdc.load, NumPy arrays) works without it",
            name="torch") from None
    _require_torch(torch, what)
    return torch


def _require_torch(torch, what: str) -> None:
    """ImportError naming the installed and the required versions when
    `torch` (the imported module) is older than TORCH_MIN_VERSION."""
    version = getattr(torch, "__version__", None)
    match = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    required = ".".join(map(str, TORCH_MIN_VERSION))
    if match is None:
        raise ImportError(f"{what} needs PyTorch >= {required}; cannot read the "
                          f"installed torch's version ({version!r})")
    if (int(match.group(1)), int(match.group(2))) < TORCH_MIN_VERSION:
        raise ImportError(
            f"{what} needs PyTorch >= {required} (its tensors' DLPack exchange "
            f"table gives thdc PyTorch's current stream); torch {version} is "
            f"installed: pip install 'torch>={required}'")


def _capturing() -> bool:
    """Whether PyTorch's current stream is capturing a CUDA graph (only if
    PyTorch is already imported: thdc does not import it)."""
    torch = sys.modules.get("torch")
    return (torch is not None and torch.cuda.is_available()
            and torch.cuda.is_current_stream_capturing())


def _refuse_during_capture(what: str) -> None:
    """RuntimeError inside a capture: a module load cannot be captured."""
    if _capturing():
        raise RuntimeError(
            f"{what} inside a CUDA graph capture: the driver's module load "
            "cannot be captured and would make the capture fail; load the "
            "kernel before capturing and call it inside"
        )
