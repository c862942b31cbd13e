"""The step's outputs as the arguments of each THD attention kernel.

A GraphStep run leaves the microbatch's metadata on the device: the padded
offsets `cu_seqlens_padded` and the valid offsets `cu_seqlens` of every CP
rank's rows (N+1 entries each, the dummy sequence covering the tail, the
spare entries repeating the total C*cp), in the step's static buffers.
Attention kernels read the same facts in different forms; this module gives
each its arguments, computed on the device from those buffers with no host
synchronisation (plain tensor arithmetic, capturable in the same CUDA graph
as the step), except FlashInfer, whose plan runs on the host:

    consumer           convention  arguments
    torch_varlen       graph       cu_seq_q = cu_seq_k = padded offsets, max_q = max_k = C*cp
    flash_attn_4       graph       cu_seqlens_q = cu_seqlens_k = padded offsets
    flash_attn_4       seqused     the same, and seqused_q = seqused_k = valid lengths
    cudnn              graph       ragged offsets = padded offsets * heads * head_dim,
                                   seq_len_q = seq_len_kv = padded lengths ([N, 1, 1, 1])
    cudnn              compact     the same ragged offsets, seq_len = valid lengths
                                   (TransformerEngine's pad_between_seqs=True)
    flashinfer         graph       qo_indptr = kv_indptr = padded offsets, planned on the
                                   host from the loader's host offsets (host_padded_offsets)
    fla_gdn            graph       cu_seqlens = padded offsets, chunk_indices = the step's
                                   linear_chunks (S15), chunk_size = their BT
    fla_kda            graph       cu_seqlens = padded offsets, use_graph, max_num_seqs = N,
                                   chunk_size = BT (fla derives its chunks on the device)

Each function takes a GraphStep, StepSlot or SlotRung (the "source") and
reads the view that ran last: a step or slot with a capacity ladder (or
dynamic CP) stands for the rung that wrote its buffer last, as the host
knows it; where it cannot know (a run captured in a CUDA graph) ValueError
asks for the view itself, `slot.rung(r)`, and a view that is known not to
have run last is refused by name (the rungs share the buffer, each laying
it out for its own sizes).

"graph" attends every padding row as a token of its sequence (harmless for
the real tokens: attention is causal and the padding follows them);
"seqused"/"compact" skip the padding rows, which the kernel then leaves
unwritten, in the output and in the gradients. Rows a kernel leaves
unwritten hold whatever the allocator gave, NaN included, and a gradient
row of garbage reaches the weights through the projection's backward:
`computed_rows` says which rows a convention computes and `KeepRows`
zeroes the others in the output and in the gradient; the calls below do so.

Rows are in sequence order over all CP ranks (the step's offsets are
global): gather the ranks' rows and put them in order with
`slot.restore_cp_order` (ranks in one process), or give the kernel a CP
implementation of its own. docs/megatron.md ("Attention kernels") has the
measured table.

The calls (`varlen_attn`, `flash_attn_4`, `CudnnAttention`,
`FlashInferAttention`) import their kernel's package when first used; the
argument functions need only PyTorch."""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np

from . import _thdc
from ._checks import _check_int, _import_torch
from .stages import CP_MODES

torch = _import_torch("thdc.attention")

# The consumers and the conventions each can take, its default first.
CONVENTIONS = {
    "torch_varlen": ("graph",),
    "flash_attn_4": ("seqused", "graph"),
    "cudnn": ("compact", "graph"),
    "flashinfer": ("graph",),
    "fla_gdn": ("graph",),
    "fla_kda": ("graph",),
}

# The chunk sizes flash-linear-attention 0.6.0's chunked kernels take:
# chunk_gated_delta_rule (fla/ops/gated_delta_rule/chunk.py:538-540) and
# chunk_kda (fla/ops/kda/chunk.py:474-476).
FLA_CHUNK_SIZES = {"fla_gdn": (16, 32, 64), "fla_kda": (32, 64)}


def _check_convention(consumer: str, convention: str) -> str:
    allowed = CONVENTIONS[consumer]
    if convention not in allowed:
        raise ValueError(f"{consumer} takes the conventions {allowed}; got {convention!r}")
    return convention


def _view(source, consumer: str):
    """The view (SlotRung) of a GraphStep, StepSlot or SlotRung whose outputs
    its buffer holds: a step or slot resolves to the rung (and CP size) that
    ran last, a view is checked to be it (`ran_last`); where the host cannot
    know (a ladder's run captured in a CUDA graph) ValueError names the
    view to pass. A step's top rung read after a lower one ran would give
    the lower rung's bytes in the top rung's layout."""
    ran_last = getattr(source, "ran_last", None)
    if not callable(ran_last):
        raise TypeError("expected a thdc.megatron GraphStep, StepSlot or SlotRung; got "
                        f"{type(source).__name__}")
    return ran_last(consumer)


def _metadata(source, consumer: str):
    """(padded offsets, valid offsets, rows C*cp) of the view that ran last
    (_view): the buffers of its run and the rows it describes."""
    view = _view(source, consumer)
    outputs = view.outputs
    return outputs.cu_seqlens_padded, outputs.cu_seqlens, int(view.packed_seq_params.max_seqlen_q)


def _check_any_convention(convention: str) -> str:
    if convention not in ("graph", "seqused", "compact"):
        raise ValueError(f"convention must be 'graph', 'seqused' or 'compact'; got {convention!r}")
    return convention


def _check_causal(convention: str, causal: bool) -> None:
    """"graph" is right only for causal attention: without it the real
    tokens would attend the padding rows after them."""
    if convention == "graph" and not causal:
        raise ValueError("the 'graph' convention attends padding rows as tokens, which is "
                         "harmless only with causal=True; use 'seqused'/'compact' otherwise")


def lengths(source, convention: str = "graph") -> torch.Tensor:
    """Each entry's rows as the convention counts them, int32 [N] on the
    step's device: padded lengths for "graph", valid lengths for
    "seqused"/"compact" (the dummy counts its tail; spare entries are 0)."""
    padded, valid, _ = _metadata(source, "lengths")
    offsets = padded if _check_any_convention(convention) == "graph" else valid
    return offsets[1:] - offsets[:-1]


def computed_rows(source, convention: str = "graph") -> torch.Tensor:
    """bool [C*cp] in sequence order: the rows a kernel computes under the
    convention. Every row for "graph"; for "seqused"/"compact" row r of entry
    i (padded[i] <= r < padded[i+1]) when r - padded[i] < its valid length."""
    padded, valid, rows = _metadata(source, "computed_rows")
    if _check_any_convention(convention) == "graph":
        return torch.ones(rows, dtype=torch.bool, device=padded.device)
    row = torch.arange(rows, dtype=torch.int32, device=padded.device)
    entry = torch.searchsorted(padded[1:].contiguous(), row, right=True).clamp_(max=padded.numel() - 2)
    return (row - padded[entry]) < lengths(source, convention)[entry]


def _zero_rows(x, keep):
    """x with the rows outside keep (bool [rows]) set to zero."""
    return torch.where(keep.view(-1, *([1] * (x.dim() - 1))), x, x.new_zeros(()))


class KeepRows(torch.autograd.Function):
    """x with the rows outside `keep` (bool [rows]) set to zero, in the forward
    and in the gradient: for a kernel that leaves rows unwritten."""

    @staticmethod
    def forward(ctx, x, keep):
        ctx.save_for_backward(keep)
        return _zero_rows(x, keep)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return _zero_rows(grad, keep), None


def varlen_attn_args(source) -> dict:
    """torch.nn.attention.varlen.varlen_attn's metadata: the padded offsets
    for both sides and C*cp as the longest sequence ("graph"; the function
    has no valid lengths)."""
    padded, _, rows = _metadata(source, "varlen_attn_args")
    return dict(cu_seq_q=padded, cu_seq_k=padded, max_q=rows, max_k=rows)


def flash_attn_4_args(source, convention: str = "seqused") -> dict:
    """flash_attn.cute.flash_attn_varlen_func's metadata: cu_seqlens_q/k the
    padded offsets, max_seqlen_q/k C*cp, and for "seqused" seqused_q/k the
    valid lengths (int32 [N]), so the kernel skips the padding rows."""
    _check_convention("flash_attn_4", convention)
    padded, _, rows = _metadata(source, "flash_attn_4_args")
    args = dict(cu_seqlens_q=padded, cu_seqlens_k=padded, max_seqlen_q=rows, max_seqlen_k=rows)
    if convention == "seqused":
        used = lengths(source, "seqused")
        args.update(seqused_q=used, seqused_k=used)
    return args


def cudnn_args(source, heads: int, head_dim: int, kv_heads: Optional[int] = None,
               convention: str = "compact") -> dict:
    """cuDNN SDPA's ragged THD metadata, as TransformerEngine builds its
    cuDNN graph: batch N (one entry per cu entry pair: the dummy and spare
    zero-length entries included), max_seqlen C*cp, ragged offsets in
    elements (int64 [N+1, 1, 1, 1]: padded offsets times heads*head_dim, for
    q/o and for k/v with kv_heads), seq_len_q/kv (int32 [N, 1, 1, 1]: padded
    lengths for "graph", valid lengths for "compact")."""
    _check_convention("cudnn", convention)
    heads, head_dim = _check_int(heads, "heads"), _check_int(head_dim, "head_dim")
    kv_heads = heads if kv_heads is None else _check_int(kv_heads, "kv_heads")
    if heads < 1 or head_dim < 1 or kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a positive multiple of kv_heads ({kv_heads}), "
                         f"head_dim ({head_dim}) positive")
    padded, _, rows = _metadata(source, "cudnn_args")
    entries = padded.numel()
    start = padded.to(torch.int64).view(entries, 1, 1, 1)
    seq_len = lengths(source, convention).view(entries - 1, 1, 1, 1)
    return dict(batch=entries - 1, max_seqlen=rows, seq_len_q=seq_len, seq_len_kv=seq_len,
                ragged_offset_q=start * (heads * head_dim),
                ragged_offset_kv=start * (kv_heads * head_dim))


def _linear_chunks(view, consumer: str):
    """The linear-attention chunks of a view (_view's), checked for
    `consumer`."""
    chunks = view.linear_chunks
    if chunks is None:
        raise ValueError(f"{consumer} reads the step's chunk metadata: make the step with "
                         f"GraphStep(..., linear_attention_chunk=BT), BT in "
                         f"{FLA_CHUNK_SIZES[consumer]}")
    if chunks.chunk_size not in FLA_CHUNK_SIZES[consumer]:
        raise ValueError(f"{consumer} takes chunks of {FLA_CHUNK_SIZES[consumer]} rows; the "
                         f"step's linear_attention_chunk is {chunks.chunk_size}")
    return chunks


def _fla_tensor_cache_on() -> bool:
    """Whether flash-linear-attention (where imported) caches its metadata by
    the identity of cu_seqlens (fla/utils/decorators.py:33-80): with the
    step's static offsets, one tensor for every microbatch, it would keep
    the first microbatch's chunk offsets."""
    import sys
    utils = sys.modules.get("fla.utils")
    return utils is not None and not getattr(utils, "FLA_DISABLE_TENSOR_CACHE", True)


def fla_gdn_args(source) -> dict:
    """flash-linear-attention's chunk_gated_delta_rule (Gated DeltaNet) in
    varlen mode, at static shape: cu_seqlens the padded offsets (megatron-core
    dev's GDN layer passes the same, gdn.py:180-193 on d48bd6be), chunk_indices
    the step's [NT, 2] chunks (NT = ceil(C*cp/BT) + N, sentinel rows of no
    rows after the real ones, S15) and chunk_size their BT. q, k, v, g, beta
    are [1, C*cp, ...] in sequence order; every row is computed (the dummy's
    chunks cover the tail). fla derives the chunk offsets from cu_seqlens
    on the device, behind a cache keyed by the tensor's identity: run with
    FLA_DISABLE_TENSOR_CACHE=1 (or fla.utils.FLA_DISABLE_TENSOR_CACHE =
    True); RuntimeError while the cache is on."""
    view = _view(source, "fla_gdn_args")
    padded = view.outputs.cu_seqlens_padded
    chunks = _linear_chunks(view, "fla_gdn")
    if _fla_tensor_cache_on():
        raise RuntimeError(
            "flash-linear-attention caches chunk offsets by the identity of cu_seqlens, "
            "and the step's offsets are one tensor for every microbatch: set "
            "FLA_DISABLE_TENSOR_CACHE=1 before importing fla, or "
            "fla.utils.FLA_DISABLE_TENSOR_CACHE = True")
    return dict(cu_seqlens=padded, chunk_indices=chunks.indices, chunk_size=chunks.chunk_size)


def fla_kda_args(source) -> dict:
    """flash-linear-attention's chunk_kda (Kimi Delta Attention) in varlen
    mode, at static shape: chunk_kda takes no precomputed chunks, but with
    use_graph=True and max_num_seqs=N it derives them on the device from
    cu_seqlens of N+1 entries (fla/ops/kda/chunk.py:65-86, the same chunks as
    S15 with fla's sentinel (-1, 0)): cu_seqlens the padded offsets, N the
    step's, chunk_size the step's BT."""
    view = _view(source, "fla_kda_args")
    padded = view.outputs.cu_seqlens_padded
    chunks = _linear_chunks(view, "fla_kda")
    return dict(cu_seqlens=padded, use_graph=True, max_num_seqs=padded.numel() - 1,
                chunk_size=chunks.chunk_size)


def host_padded_offsets(cu_seqlens, cu_seqlens_padded, num_seqs: int, C: int, cp: int,
                        N: int, *, rows_given: Optional[int] = None,
                        dummy_length: Optional[int] = None,
                        cp_mode: str = "zigzag") -> np.ndarray:
    """The padded offsets the step computes for these inputs (int32 [N+1]),
    on the host from the loader's host offsets, with nothing read from the
    device: for a kernel that plans on the host (FlashInfer). The step's own
    semantics (thdc.reference): an invalid microbatch gives one dummy
    sequence over the C*cp rows, as on the device. rows_given: the data rows
    given to load_inputs (a step with data keys checks them); dummy_length:
    the step's split-dummy length, if any; cp_mode: the step's CP layout
    ("zigzag" or "contiguous", whose checks differ: contiguous CP takes
    offsets that are not multiples of 2*cp). All must be the step's, or the
    plan disagrees with the device. O(N) host work, whatever C*cp: the
    reference's offsets alone (graph_step_offsets), no data rows."""
    C, cp, N = (_check_int(v, n) for v, n in ((C, "C"), (cp, "cp"), (N, "N")))
    if cp_mode not in CP_MODES:
        raise ValueError(f"cp_mode must be one of {CP_MODES}; got {cp_mode!r}")
    if C < 1 or cp < 1 or N < 1 or C * cp > _INT32_MAX or N >= _INT32_MAX:
        # Checked before any host buffer is made: the step's own bounds.
        raise ValueError(f"C, cp and N must be >= 1 with C*cp and N+1 within int32; got "
                         f"C={C}, cp={cp}, N={N}")
    cu, cup = (_entries(a, N + 1, name) for a, name in
               ((cu_seqlens, "cu_seqlens"), (cu_seqlens_padded, "cu_seqlens_padded")))
    out = _thdc.reference.graph_step_offsets(cu, cup, _check_int(num_seqs, "num_seqs"), 0,
                                             C, cp, N, rows_given=rows_given,
                                             dummy_length=dummy_length, cp_mode=cp_mode)
    return np.asarray(out["cu_seqlens_padded"], dtype=np.int32)


_INT32_MAX = 2**31 - 1


def _entries(offsets, entries: int, name: str) -> np.ndarray:
    """Host offsets as load_inputs puts them on the device: integers, int64
    saturated into int32 (an offset past 2^31 stays one, never wraps to a
    small valid one), and after the given entries -1 (a num_seqs claiming
    more sequences than were given reads a decreasing offset: the device
    empties such a microbatch, and so does the plan). A float array is
    refused, as the load refuses it."""
    offsets = np.asarray(offsets).reshape(-1)
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers; got dtype {offsets.dtype}")
    if offsets.size > entries:
        raise ValueError(f"{name} has {offsets.size} entries; the step holds N+1 = {entries}")
    offsets = np.clip(offsets.astype(np.int64), -_INT32_MAX - 1, _INT32_MAX).astype(np.int32)
    if offsets.size < entries:
        offsets = np.concatenate([offsets, np.full(entries - offsets.size, -1, np.int32)])
    return offsets


# --- the calls --------------------------------------------------------------


def _check_thd(q, k, v, rows: int):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[0] != rows:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name} must be a [C*cp = {rows}, heads, head_dim] tensor in "
                             f"sequence order; got {shape}")


def varlen_attn(q, k, v, source, causal: bool = True):
    """PyTorch's variable-length attention on the step's rows ("graph")."""
    args = varlen_attn_args(source)
    _check_causal("graph", causal)
    _check_thd(q, k, v, args["max_q"])
    from torch.nn.attention.varlen import varlen_attn as kernel

    mask = (dict(window_size=(-1, 0) if causal else (-1, -1)) if _takes_window(kernel)
            else dict(is_causal=causal))
    return kernel(q, k, v, args["cu_seq_q"], args["cu_seq_k"], args["max_q"], args["max_k"],
                  **mask)


@functools.lru_cache(maxsize=None)
def _takes_window(kernel) -> bool:
    """Whether this release's varlen_attn spells causal as window_size."""
    import inspect

    return "window_size" in inspect.signature(kernel).parameters


def flash_attn_4(q, k, v, source, convention: str = "seqused", causal: bool = True):
    """FlashAttention 4 (flash-attn-4's flash_attn.cute) on the step's rows;
    with "seqused" the rows it leaves unwritten are zero in the output and
    in the gradients."""
    args = flash_attn_4_args(source, convention)
    _check_causal(convention, causal)
    _check_thd(q, k, v, args["max_seqlen_q"])
    from flash_attn.cute import flash_attn_varlen_func

    if convention == "graph":
        return _first(flash_attn_varlen_func(q, k, v, causal=causal, **args))
    keep = computed_rows(source, convention)
    q, k, v = (KeepRows.apply(x, keep) for x in (q, k, v))
    out = _first(flash_attn_varlen_func(q, k, v, causal=causal, **args))
    return KeepRows.apply(out, keep)


def _first(out):
    """The output of a kernel that may also return its softmax statistics."""
    return out[0] if isinstance(out, tuple) else out


# cuDNN's SDPA backward on ragged THD rows (the graph CudnnAttention builds)
# at head_dim > 128, as measured against fp64 on an H100: cuDNN 9.14.0 gave
# dq, dk, dv off by 40%, 34% and 13% of their scale at head_dim 256 (the
# forward right), 9.19.0 right on the same inputs; head_dim 64 and 128 were
# right on both (bench/cudnn_ragged_sdpa.py). The releases between were not
# checked, so below this one head_dim > 128 is refused.
CUDNN_LARGE_HEAD_DIM_RELEASE = (9, 19, 0)


def _loaded_cudnn() -> list:
    """The folders of the libcudnn files mapped into this process (Linux),
    where two copies of cuDNN can hide."""
    import os
    import re

    try:
        with open("/proc/self/maps") as f:
            paths = set(re.findall(r"\S*/libcudnn\S*\.so\S*", f.read()))
    except OSError:
        return []
    return sorted({os.path.dirname(os.path.realpath(p)) for p in paths})


def _cudnn_wheel_folder() -> Optional[str]:
    """The nvidia-cudnn wheel's folder (PyTorch's cuDNN), if installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia.cudnn")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return locations[0] if locations else None


def cudnn_refusal(head_dim: int) -> Optional[str]:
    """Why CudnnAttention refuses head_dim with the cuDNN this process runs
    (the one cuDNN's frontend reports), or None: head_dim > 128 below
    CUDNN_LARGE_HEAD_DIM_RELEASE, whose backward gave wrong gradients. An
    older cuDNN is often not PyTorch's own but one another library loaded
    first: TransformerEngine loads the system's libcudnn (transformer_engine/
    common/__init__.py, _load_cuda_library), and the nvidia-cudnn wheel's
    libcudnn then runs with the older one's engines (measured: CUDNN_PATH
    naming the wheel's folder does not stop it). Imports cudnn."""
    head_dim = _check_int(head_dim, "head_dim")
    import cudnn

    version = int(cudnn.backend_version())
    release = (version // 10000, version // 100 % 100, version % 100)
    if head_dim <= 128 or release >= CUDNN_LARGE_HEAD_DIM_RELEASE:
        return None
    wanted = ".".join(map(str, CUDNN_LARGE_HEAD_DIM_RELEASE))
    folders = _loaded_cudnn()
    wheel = _cudnn_wheel_folder()
    others = [f for f in folders if not (wheel and f.startswith(wheel))]
    where = (f"; besides PyTorch's ({wheel}) another copy is loaded from "
             f"{', '.join(others)}, which TransformerEngine loads ahead of it"
             if wheel and others and len(folders) > 1 else
             f" (libcudnn loaded from {', '.join(folders) or 'unknown folders'})")
    return (f"cuDNN attention at head_dim {head_dim} needs cuDNN >= {wanted}: this process "
            f"runs cuDNN {cudnn.backend_version_string()}{where}. Its SDPA backward on ragged "
            f"rows gave wrong gradients at head_dim 256 (9.14.0: dq off by 40% of its scale; "
            f"bench/cudnn_ragged_sdpa.py checks a cuDNN). Make cuDNN >= {wanted} the only "
            f"one the process can load (upgrade or remove the older one), or use head_dim "
            f"<= 128 or another attention consumer")


class CudnnAttention:
    """cuDNN's SDPA (nvidia-cudnn-frontend) on the step's rows, forward and
    backward, the graph TransformerEngine builds for THD: ragged q/k/v/o,
    padding mask with seq_len_q/kv, causal. RuntimeError where
    cudnn_refusal(head_dim) names a reason (a cuDNN release whose backward
    gave wrong gradients at that head_dim). Built for one (heads, head_dim,
    N, C*cp) on the first call; capturable after that (the workspace is
    static; call once outside a capture first). Output and
    gradients are allocated zeroed, so rows cuDNN does not write are 0."""

    def __init__(self, heads: int, head_dim: int, N: int, rows: int, *,
                 kv_heads: Optional[int] = None, convention: str = "compact",
                 causal: bool = True, dtype=None, device=None):
        import cudnn

        refusal = cudnn_refusal(head_dim)
        if refusal:
            raise RuntimeError(refusal)
        self.cudnn = cudnn
        self.heads, self.head_dim, self.N, self.rows = heads, head_dim, N, rows
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.convention = _check_convention("cudnn", convention)
        _check_causal(convention, causal)
        self.causal, self.dtype = causal, dtype or torch.bfloat16
        self.device = torch.device(device or torch.cuda.current_device())
        self.scale = 1.0 / math.sqrt(head_dim)
        self.handle = cudnn.create_handle()
        self._fwd = self._bwd = None

    def _types(self):
        cudnn = self.cudnn
        io = {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}
        if self.dtype not in io:
            raise ValueError(f"cuDNN's SDPA takes bfloat16 or float16; got {self.dtype}")
        return io[self.dtype]

    def _graph(self):
        cudnn = self.cudnn
        return cudnn.pygraph(io_data_type=self._types(),
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)

    def _layout(self, heads: int) -> dict:
        """[N, heads, C*cp, head_dim] over THD rows: a row holds every head."""
        N, S, d = self.N, self.rows, self.head_dim
        return dict(dim=[N, heads, S, d], stride=[S * heads * d, d, heads * d, 1])

    def _tensors(self, g, names):
        cudnn = self.cudnn
        N = self.N
        t = {}
        for name in names:
            h = self.kv_heads if name in ("k", "v", "dk", "dv") else self.heads
            t[name] = g.tensor(name=name, **self._layout(h), data_type=self._types())
        for name in ("off_q", "off_kv"):
            t[name] = g.tensor(name=name, dim=[N + 1, 1, 1, 1], stride=[1, 1, 1, 1],
                               data_type=cudnn.data_type.INT64)
        t["seq_len"] = g.tensor(name="seq_len", dim=[N, 1, 1, 1], stride=[1, 1, 1, 1],
                                data_type=cudnn.data_type.INT32)
        return t

    def _finish(self, g):
        """The build steps of every cuDNN graph."""
        heuristics = self.cudnn.heur_mode
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([heuristics.A, heuristics.FALLBACK])
        g.check_support()
        g.build_plans()

    def _build(self):
        cudnn = self.cudnn
        N, S = self.N, self.rows
        g = self._graph()
        t = self._tensors(g, ("q", "k", "v"))
        for name, off in (("q", "off_q"), ("k", "off_kv"), ("v", "off_kv")):
            t[name].set_ragged_offset(t[off])
        o, stats = g.sdpa(name="sdpa", q=t["q"], k=t["k"], v=t["v"], generate_stats=True,
                          attn_scale=self.scale, use_padding_mask=True,
                          seq_len_q=t["seq_len"], seq_len_kv=t["seq_len"],
                          use_causal_mask=self.causal)
        h = self.heads
        layout = self._layout(h)
        o.set_output(True).set_dim(layout["dim"]).set_stride(layout["stride"])
        o.set_ragged_offset(t["off_q"])
        stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
        self._finish(g)
        self._fwd = (g, t, o, stats)

        g = self._graph()
        b = self._tensors(g, ("q", "k", "v", "o", "do"))
        stats_in = g.tensor(name="stats", dim=[N, h, S, 1], stride=[h * S, S, 1, 1],
                            data_type=cudnn.data_type.FLOAT)
        for name, off in (("q", "off_q"), ("k", "off_kv"), ("v", "off_kv"), ("o", "off_q"),
                          ("do", "off_q")):
            b[name].set_ragged_offset(b[off])
        dq, dk, dv = g.sdpa_backward(name="sdpa_backward", q=b["q"], k=b["k"], v=b["v"],
                                     o=b["o"], dO=b["do"], stats=stats_in,
                                     attn_scale=self.scale, use_padding_mask=True,
                                     seq_len_q=b["seq_len"], seq_len_kv=b["seq_len"],
                                     max_total_seq_len_q=S, max_total_seq_len_kv=S,
                                     use_causal_mask=self.causal)
        for grad, name, heads in ((dq, "off_q", h), (dk, "off_kv", self.kv_heads),
                                  (dv, "off_kv", self.kv_heads)):
            layout = self._layout(heads)
            grad.set_output(True).set_dim(layout["dim"]).set_stride(layout["stride"])
            grad.set_ragged_offset(b[name])
        self._finish(g)
        self._bwd = (g, b, stats_in, dq, dk, dv)
        size = max(self._fwd[0].get_workspace_size(), g.get_workspace_size(), 1)
        self.workspace = torch.empty(size, dtype=torch.uint8, device=self.device)

    def _execute(self, g, pack):
        self.cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream().cuda_stream)
        g.execute(pack, self.workspace, handle=self.handle)

    def __call__(self, q, k, v, source):
        args = cudnn_args(source, self.heads, self.head_dim, self.kv_heads, self.convention)
        if args["batch"] != self.N or args["max_seqlen"] != self.rows:
            raise ValueError(f"this CudnnAttention was built for N = {self.N}, C*cp = {self.rows}; "
                             f"the step has N = {args['batch']}, C*cp = {args['max_seqlen']}")
        _check_thd(q, k, v, self.rows)
        if self._fwd is None:
            self._build()
        return _CudnnFunction.apply(q, k, v, args["ragged_offset_q"], args["ragged_offset_kv"],
                                    args["seq_len_q"], self)


class _CudnnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, off_q, off_kv, seq_len, attention):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        g, t, o_t, stats_t = attention._fwd
        out = torch.zeros_like(q)
        stats = torch.empty(attention.N, attention.heads, attention.rows, 1,
                            dtype=torch.float32, device=q.device)
        attention._execute(g, {t["q"]: q, t["k"]: k, t["v"]: v, t["off_q"]: off_q,
                               t["off_kv"]: off_kv, t["seq_len"]: seq_len, o_t: out,
                               stats_t: stats})
        ctx.save_for_backward(q, k, v, out, stats, off_q, off_kv, seq_len)
        ctx.attention = attention
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, stats, off_q, off_kv, seq_len = ctx.saved_tensors
        attention = ctx.attention
        g, b, stats_t, dq_t, dk_t, dv_t = attention._bwd
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        attention._execute(g, {b["q"]: q, b["k"]: k, b["v"]: v, b["o"]: out,
                               b["do"]: grad.contiguous(), stats_t: stats, b["off_q"]: off_q,
                               b["off_kv"]: off_kv, b["seq_len"]: seq_len, dq_t: dq, dk_t: dk,
                               dv_t: dv})
        return dq, dk, dv, None, None, None, None


class FlashInferAttention:
    """FlashInfer's ragged prefill (flashinfer-python), forward only (the
    library has no backward), in its CUDA-graph mode: the wrapper reads the
    step's own padded-offset buffer (given as its indptr buffer), so a
    captured graph of step + attention replays with the new offsets; the
    plan, which FlashInfer computes on the host, takes the host offsets
    (`host_padded_offsets`) and must run before each replay, outside the
    capture.

    FlashInfer's plan writes its schedule into a page-locked buffer and
    copies it to the device on the stream; a second plan before that copy
    has run would overwrite the first's schedule. `plan` therefore waits for
    the previous plan's copy (an event, not a stream synchronisation), which
    lets the host run one microbatch ahead of the device."""

    def __init__(self, source, heads: int, head_dim: int, *, kv_heads: Optional[int] = None,
                 causal: bool = True, dtype=None, backend: str = "fa2",
                 workspace_bytes: int = 128 << 20):
        import flashinfer

        _check_causal("graph", causal)
        padded, _, rows = _metadata(source, "FlashInferAttention")
        self.rows, self.N = rows, padded.numel() - 1
        self.heads, self.head_dim = heads, head_dim
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.causal, self.dtype = causal, dtype or torch.bfloat16
        self.workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device=padded.device)
        self.wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(
            self.workspace, "NHD", use_cuda_graph=True, qo_indptr_buf=padded,
            kv_indptr_buf=padded, backend=backend)
        self._indptr = padded
        self._host = torch.empty(self.N + 1, dtype=torch.int32, pin_memory=True)
        self._planned = torch.cuda.Event()

    def plan(self, host_offsets) -> None:
        """Plans the next run on the host from the step's padded offsets as the
        host knows them (host_padded_offsets); nothing is read from the device."""
        host = np.asarray(host_offsets, dtype=np.int32)
        if host.shape != (self.N + 1,):
            raise ValueError(f"host_offsets must have N+1 = {self.N + 1} entries; got {host.shape}")
        self._planned.synchronize()
        self._host.copy_(torch.from_numpy(host))
        self.wrapper.plan(self._indptr, self._indptr, self.heads, self.kv_heads, self.head_dim,
                          causal=self.causal, q_data_type=self.dtype,
                          qo_indptr_cpu=self._host, kv_indptr_cpu=self._host)
        self._planned.record()

    def __call__(self, q, k, v):
        _check_thd(q, k, v, self.rows)
        return self.wrapper.run(q, k, v)
