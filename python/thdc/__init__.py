"""thdc from Python: THD data preparation as one fused, CUDA-graph-capturable
kernel, called on DLPack arrays (PyTorch, CuPy, NumPy, JAX).

    import thdc
    step = thdc.load("step.bundle")              # a bundle written by `thdc`
    step = thdc.compile("pipeline.mlir", {"C": 32768, "cp": 2, "N": 64})  # JIT
    out = step(tokens, labels, ..., out=static_outputs)   # no alloc, no sync

A call checks every argument against the signature (dtype, shape,
contiguity, device) and raises TypeError or ValueError naming the argument.
It launches on `stream=` when given, else on the current stream of the
arrays' framework (PyTorch's, CuPy's), on `device=` when given, else on the
current device (what torch.cuda.set_device selects). Without a GPU the same
calls run the bundle's host code on NumPy arrays.

thdc.planner packs a global batch's sequences into microbatches on the host
and gives examples/pack_microbatch.mlir its per-microbatch inputs;
thdc.reference is the reference semantics (NumPy in, NumPy out), for tests.
"""
from __future__ import annotations

import collections
import collections.abc
import errno
import keyword
import logging
import numbers
import os
import re
import sys
from typing import Mapping, NamedTuple, Optional, Union

from . import _thdc
from . import planner
from ._thdc import Kernel, cuda_available, current_device, describe_status, has_jit

__all__ = [
    "Arg",
    "Kernel",
    "STATUS_BITS",
    "compile",
    "cuda_available",
    "current_device",
    "describe_status",
    "has_jit",
    "load",
    "planner",
    "reference",
    "signature",
]
__version__ = "0.1.0"

#: The package's log ("thdc"; its modules log under it): what was compiled,
#: loaded or built, at DEBUG and INFO. Silent unless the application
#: configures logging (the C++ side's compile lines: THDC_LOG=1).
log = logging.getLogger("thdc")

reference = _thdc.reference
# Each status bit of thd.validate by name (reference/StatusBits.h).
STATUS_BITS = dict(_thdc.STATUS_BITS)


class Arg(NamedTuple):
    """One buffer of a kernel's signature."""

    name: str
    dtype: str  # "bool", "int32", "int64", "float32", ...
    shape: tuple
    direction: str  # "input" or "output"


def signature(kernel: Kernel) -> list:
    """The kernel's buffers as `Arg`s: inputs, then outputs."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a thdc.Kernel; got {type(kernel).__name__}")
    return [Arg(*entry) for entry in kernel.signature]


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


def _allocate(like, dtype: str, elements: int, device_type: int, device_id: int):
    """Allocates one output in the framework of the first input `like`."""
    framework = type(like).__module__.split(".")[0]
    on_gpu = device_type == 2
    if framework == "torch":
        import torch

        device = torch.device("cuda", device_id) if on_gpu else torch.device("cpu")
        return torch.empty(elements, dtype=getattr(torch, dtype), device=device)
    if framework == "cupy":
        import cupy

        with cupy.cuda.Device(device_id):
            return cupy.empty(elements, dtype=dtype)
    if not on_gpu:
        import numpy

        return numpy.empty(elements, dtype=dtype)
    raise TypeError(
        f"thdc cannot allocate GPU outputs for {type(like).__module__}."
        f"{type(like).__name__} inputs; pass out= (arrays from torch or CuPy)"
    )


def _finish(kernel: Kernel) -> Kernel:
    outputs = [a.name for a in signature(kernel) if a.direction == "output"]
    valid = all(n.isidentifier() and not keyword.iskeyword(n) for n in outputs)
    if valid and len(set(outputs)) == len(outputs):
        kernel._set_result_type(
            collections.namedtuple(f"{kernel.entry}_outputs", outputs)
        )
    kernel._set_allocator(_allocate)
    return kernel


def load(
    bundle: Union[str, os.PathLike],
    *,
    backend: str = "auto",
    cache_dir: str = "",
    device: int = -1,
) -> Kernel:
    """Loads a bundle written by `thdc` (a folder with manifest.json).

    backend: "auto" (the GPU if there is one, else the host code), "cuda" or
    "host". device: whose module is loaded now (-1: the current device);
    other devices load theirs on their first call. cache_dir: where
    driver-compiled cubins are kept ($THDC_CACHE_DIR by default).

    Load before the training loop and outside graph capture: the driver's
    module load waits for all the work queued on the device, and inside a
    PyTorch graph capture it would make the capture fail when it ends, so
    it is refused there with RuntimeError.
    """
    path = _check_path(bundle, "bundle")
    _check_str(backend, "backend")
    _check_str(cache_dir, "cache_dir")
    device = _check_int(device, "device")
    if backend != "host":
        _refuse_during_capture("thdc.load")
    # A missing bundle as a missing file, as thdc.compile's missing source.
    manifest = os.path.join(path, "manifest.json")
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no bundle here (a folder thdc wrote, with "
                                "manifest.json)", path)
    if os.path.isdir(path) and not os.path.exists(manifest):
        raise FileNotFoundError(errno.ENOENT, "the folder has no manifest.json: not a bundle "
                                "written by thdc", manifest)
    kernel = _finish(_thdc.load(path, backend, cache_dir, device))
    log.debug("loaded %s from %s (backend %s)", kernel.entry, path, backend)
    return kernel


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


def compile(
    pipeline: Union[str, os.PathLike],
    params: Optional[Mapping[str, int]] = None,
    *,
    backend: str = "auto",
    cache_dir: str = "",
    chip: str = "",
    **gpu_options: int,
) -> Kernel:
    """Compiles pipeline text, or a .mlir file, with parameter values.

    Compiled kernels are cached in memory and on disk (cache_dir, else
    $THDC_CACHE_DIR, else ~/.cache/thdc; "-" for no disk cache), keyed by the
    text, the parameters, the chip and the compiler's version.
    `kernel.compile_info` says how the call was served (and, under
    "cache_note", why the disk cache was not used if it was not). chip: the
    GPU architecture ("sm_90"); by default the current device's.
    gpu_options: the GPU back end's other options, as thdc's flags of the
    same names (`thdc._thdc.GPU_OPTIONS` lists them: block_size,
    max_blocks, rows_per_thread, vector_width, sm_count; 0 lets the
    compiler choose), all part of the cache key. Needs a
    build of thdc with MLIR (`thdc.has_jit`); elsewhere load a bundle.
    Processes sharing a cache folder may compile the same key at once: one
    compiles, the others wait for it and load its result. Inside a PyTorch
    graph capture only a memory-cache hit is returned; anything else would
    load a module, and raises RuntimeError.
    """
    if not has_jit:
        raise RuntimeError(
            "this build of thdc has no JIT (it was built without MLIR): "
            "compile a bundle with the `thdc` tool and use thdc.load()"
        )
    source_name = "pipeline.mlir"
    text = _check_path(pipeline, "pipeline")
    values = _check_params(params)
    _check_str(backend, "backend")
    _check_str(cache_dir, "cache_dir")
    _check_str(chip, "chip")
    gpu = dict(gpu_options, chip=chip) if chip else dict(gpu_options)
    if isinstance(pipeline, os.PathLike) or (
        "\n" not in text and text.endswith(".mlir")
    ):
        source_name = text
        text = _thdc.read_source(text)  # a regular file of bounded size
    if backend != "host" and _capturing():
        # Inside a capture only a memory-cache hit, which loads nothing.
        cached = _thdc.compile_cached(text, values, backend, cache_dir, gpu)
        if cached is None:
            _refuse_during_capture("thdc.compile (not in the memory cache)")
        return _finish(cached)
    kernel = _finish(_thdc.compile(text, values, backend, cache_dir, source_name, gpu))
    if log.isEnabledFor(logging.DEBUG):
        info = kernel.compile_info
        log.debug("%s %s (%s) %s: %.1f ms, key %s%s", source_name, values or "", backend,
                  info.get("source"), info.get("micros", 0) / 1000, str(info.get("key"))[:12],
                  f" ({info['cache_note']})" if info.get("cache_note") else "")
    return kernel


def pipeline_path(name: str) -> str:
    """The path of a pipeline shipped with the package (e.g. "megatron_step")."""
    _check_str(name, "name")
    path = os.path.join(os.path.dirname(__file__), "pipelines", name + ".mlir")
    if not os.path.exists(path):
        raise FileNotFoundError(f"thdc ships no pipeline named {name!r}")
    return path
