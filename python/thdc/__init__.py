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

# The face of the package: it only re-exports. Every module of thdc takes
# what it needs from the module that defines it (_checks, _kernel, _thdc),
# never from here (test/layering/check_python_imports.py checks it).
from . import _thdc
from . import planner
from ._checks import (TORCH_MIN_VERSION, _capturing, _check_int, _check_params,  # noqa: F401
                      _check_path, _check_str, _import_torch, _refuse_during_capture,
                      _require_torch)
from ._kernel import (STATUS_BITS, Arg, _allocate, _finish, compile, load,  # noqa: F401
                      log, pipeline_path, signature)
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
from ._version import __version__  # noqa: E402,F401

reference = _thdc.reference
