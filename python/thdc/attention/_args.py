"""The argument functions of thdc.attention: the step's outputs in each
kernel's form, computed on the device (the package's docstring has the
table)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _thdc
from .._checks import _check_int, _import_torch
from ..stages import CP_MODES

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
