"""thdc's runtime (and JIT, where built with MLIR) for Python"""
# The native module's interface for type checkers and IDEs: written by
# nanobind.stubgen (`python -m nanobind.stubgen -m thdc._thdc -r`: this
# folder, one stub per submodule), then Kernel.__call__'s parameters spelled
# out (the binding takes them as *args/**kwargs). A folder of stubs beside
# the module: type checkers read it, and Python imports the module (a
# folder without __init__.py gives way to the module of the same name).
# test/python/test_stubs.py fails when a name of a module is missing here
# or a name here is not in its module.

from collections.abc import Mapping, Sequence
from typing import Any

from . import planner as planner, reference as reference


class Kernel:
    @property
    def entry(self) -> str: ...

    @property
    def params(self) -> dict[str, int]: ...

    @property
    def signature(self) -> list:
        """(name, dtype, shape, direction) per buffer, inputs then outputs"""

    @property
    def backend(self) -> str: ...

    @property
    def device_name(self) -> str: ...

    @property
    def launch_geometry(self) -> tuple: ...

    @property
    def compile_info(self) -> dict: ...

    def __call__(self, *inputs: object, out: Sequence[object] | Mapping[str, object] | None = None,
                 stream: object | None = None, device: int | None = None,
                 **named_inputs: object) -> Any:
        """
        Runs the pipeline: inputs by position or name, outputs in out= (a sequence or a dict by name; allocated when omitted), on stream= (default: the framework's current stream) and device= (default: the current device).
        """

    def prepare(self, device: int = -1) -> None:
        """Loads the module on a device now (else on its first launch)."""

    def launch_pointers(self, pointers: Sequence[int], stream: int = 0, device: int = -1) -> None:
        """
        Launches on raw addresses, one per buffer in signature order; nothing is checked.
        """

class RuntimeGraph:
    def replay(self, stream: int) -> None: ...

def capture_pointers(kernel: Kernel, pointers: Sequence[int], stream: int, device: int = -1) -> RuntimeGraph:
    """
    Captures one launch on raw addresses with the runtime's own CUDA graph (the C++ path); nothing is checked.
    """

def load(bundle: str, backend: str = 'auto', cache_dir: str = '', device: int = -1) -> Kernel: ...

def cuda_available() -> bool: ...

def current_device() -> int: ...

class Gather:
    def __init__(self, device: object | None, like: object | None = None) -> None:
        """
        The runtime's one-launch gather on CUDA device `device` (loaded now), or its host form for device=None. `like`: an array of the framework whose current stream a call without stream= uses.
        """

    def __call__(self, segments: object, stream: object | None = None) -> None:
        """
        Copies and stores: segments is a flat list of ints, four per segment: source address (0 for a store), destination address, bytes, value (a store writes its low `bytes` <= 8 bytes). One launch per 16 segments, on `stream` or the framework's current stream; no synchronisation.
        """

    @property
    def follows_current_stream(self) -> bool: ...

    @property
    def device(self) -> int: ...

class InputGather:
    ARGUMENTS: tuple[str, ...]
    """The load's arguments by name, in order (runtime/InputLoad.h)."""

    def __init__(self, gather: object, targets: object, num_seqs: object, num_rows: object | None, unset: object, *, stage: str = '', per_tensor: bool = False) -> None:
        """
        The microbatch load contract over static buffers, and the load in one gather: targets is a tuple of (argument index, buffer, is_data) in the order the segments are laid out (argument indices: tokens, labels, loss_mask, position_ids, cu_seqlens, cu_seqlens_padded); num_seqs the count's buffer; num_rows the buffer that receives the data tensors' rows (None without data targets); unset a buffer of -1s (the cu arrays' dtype, at least their entries) copied after the given entries; stage names the stage in messages; per_tensor leaves every tensor to the caller's copy. Each buffer's own length bounds what is copied into it.
        """

    def __call__(self, tokens: object | None, labels: object | None, loss_mask: object | None, position_ids: object | None, cu_seqlens: object | None, cu_seqlens_padded: object | None, num_seqs: object | None) -> object:
        """
        Checks the microbatch (TypeError or ValueError, before anything is copied), gathers every tensor that needs no conversion and the stores on the framework's current stream, and returns the argument indices left to a converting copy, or None.
        """

    def segments(self, tokens: object | None, labels: object | None, loss_mask: object | None, position_ids: object | None, cu_seqlens: object | None, cu_seqlens_padded: object | None, num_seqs: object | None) -> tuple:
        """
        (flat segments, indices left to copy) of a call, checked as a call is; launches nothing.
        """

def compile(text: str, params: Mapping[str, int], backend: str = 'auto', cache_dir: str = '', source_name: str = 'pipeline.mlir', gpu_options: object | None = None) -> object:
    """
    Compiles pipeline text with parameter values through the JIT; gpu_options: a dict of GPU_OPTIONS by name.
    """

def compile_cached(text: str, params: Mapping[str, int], backend: str = 'auto', cache_dir: str = '', gpu_options: object | None = None) -> object:
    """
    compile()'s memory-cache hit, or None where compile() would compile or load a module.
    """

def read_source(path: str) -> str:
    """
    The text of the pipeline file `path`: a regular file (or a pipe) of at most 16 MiB; a device, a folder or anything larger raises ValueError naming it (compiler/InputFile.h).
    """

has_jit: bool = True

GPU_OPTIONS: dict = ...

def tool_main(name: str, argv: Sequence[str]) -> int:
    """
    Runs the command `name` (thdc, thd-opt or thd-run) on argv (argv[0] first) and returns its exit code. Once per process.
    """

def describe_status(status: int) -> str:
    """
    The names of a thd.validate status word's bits, joined by '|' ("ok" for 0), as reference/StatusBits.h defines them.
    """

STATUS_BITS: dict = ...
