"""thdc kernels as PyTorch custom ops, so that torch.compile traces through a
call without a graph break.

    import thdc, thdc.torch
    kernel = thdc.load("step.bundle")
    op = thdc.torch.op(kernel)          # op(*inputs) -> list of outputs
    op_out = thdc.torch.op(kernel, out=True)   # op_out(inputs, outputs)

Both ops are registered once (`thdc::run`, functional, outputs allocated;
`thdc::run_out`, writes into given outputs); a kernel is named by a string key,
and the fake implementations give the output shapes from its signature.
"""
from __future__ import annotations

import atexit
from typing import Callable, Dict, List

from ._checks import _import_torch
from ._kernel import signature
from ._thdc import Kernel

torch = _import_torch("thdc.torch")

_KERNELS: Dict[str, Kernel] = {}


@atexit.register
def _release_kernels() -> None:
    """Drops the registered kernels before the interpreter finalises: the
    custom ops' functions below stay referenced by PyTorch's operator
    registry until the process ends, and with them this module's globals,
    which the interpreter's finalisation then never clears: the kernels
    would outlive it (nanobind reports them as leaked)."""
    _KERNELS.clear()


def register(kernel: Kernel, name: str = "") -> str:
    """Makes `kernel` callable through the custom ops under a key."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a thdc.Kernel; got {type(kernel).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"name must be a str; got {type(name).__name__}")
    key = name or f"{kernel.entry}:{id(kernel):x}"
    existing = _KERNELS.get(key)
    if existing is not None and existing is not kernel:
        raise ValueError(f"a different kernel is registered as {key!r}")
    _KERNELS[key] = kernel
    return key


def _kernel(key: str) -> Kernel:
    try:
        return _KERNELS[key]
    except KeyError:
        raise KeyError(f"no thdc kernel is registered as {key!r}") from None


def _output_specs(key: str):
    return [a for a in signature(_kernel(key)) if a.direction == "output"]


@torch.library.custom_op("thdc::run", mutates_args=())
def run(key: str, inputs: List[torch.Tensor]) -> List[torch.Tensor]:
    """Runs kernel `key` on `inputs`; outputs are allocated on their device."""
    return list(_kernel(key)(*inputs))


@run.register_fake
def _run_fake(key: str, inputs: List[torch.Tensor]) -> List[torch.Tensor]:
    device = inputs[0].device if inputs else torch.device("cpu")
    return [
        torch.empty(a.shape, dtype=getattr(torch, a.dtype), device=device)
        for a in _output_specs(key)
    ]


@torch.library.custom_op("thdc::run_out", mutates_args=("outputs",))
def run_out(key: str, inputs: List[torch.Tensor], outputs: List[torch.Tensor]) -> None:
    """Runs kernel `key`, writing into `outputs` (no allocation)."""
    _kernel(key)(*inputs, out=outputs)


@run_out.register_fake
def _run_out_fake(key: str, inputs: List[torch.Tensor], outputs: List[torch.Tensor]) -> None:
    return None


def op(kernel: Kernel, *, out: bool = False, name: str = "") -> Callable:
    """A callable over the custom op for `kernel`: `f(*inputs)` returning the
    outputs, or with out=True `f(inputs, outputs)` writing into them."""
    if not isinstance(out, bool):
        raise TypeError(f"out must be a bool; got {type(out).__name__}")
    key = register(kernel, name)
    if out:
        def call_out(inputs, outputs):
            torch.ops.thdc.run_out(key, list(inputs), list(outputs))

        return call_out

    def call(*inputs):
        return torch.ops.thdc.run(key, list(inputs))

    return call
