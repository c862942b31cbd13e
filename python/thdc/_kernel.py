"""Kernels from Python: load a bundle, compile pipeline text through the JIT,
read a kernel's signature. thdc/__init__.py re-exports these as thdc.load,
thdc.compile, thdc.signature and thdc.Arg."""
from __future__ import annotations

import collections
import errno
import keyword
import logging
import os
from typing import Mapping, NamedTuple, Optional, Union

from . import _thdc
from ._checks import (_capturing, _check_int, _check_params, _check_path, _check_str,
                      _refuse_during_capture)
from ._thdc import Kernel, has_jit

#: The package's log ("thdc"; its modules log under it): what was compiled,
#: loaded or built, at DEBUG and INFO. Silent unless the application
#: configures logging (the C++ side's compile lines: THDC_LOG=1).
log = logging.getLogger("thdc")

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
