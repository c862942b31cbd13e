"""What the model gets of a run: the views of a rung's outputs (a named
tuple of views of the slot's buffer), made once per rung of a slot. Which
output goes to which view is thdc.stages.OUTPUTS' `view` column; here is
how each view is shaped."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, NamedTuple, Optional

from .. import stages
from .._checks import _import_torch
from ._buffers import _tp_shard
from .packed_seq_params import make_packed_seq_params

if TYPE_CHECKING:
    import torch

    from .slot import SlotRung
else:
    torch = _import_torch("thdc.megatron")


class LinearChunks(NamedTuple):
    """Linear attention's chunk metadata of a run (docs/semantics.md S15),
    views of the slot's buffer: `indices` int32 [NT, 2] (sequence, chunk
    within it; sentinels after `count`), `offsets` int32 [N+1] (the chunks
    before each sequence), `count` int32 [1], and `chunk_size` BT, the
    chunk size they are for (an int)."""
    indices: "torch.Tensor"
    offsets: "torch.Tensor"
    count: "torch.Tensor"
    chunk_size: int


# Each attribute view of stages.ATTRIBUTE_VIEWS from a rung's outputs.
_ATTRIBUTES: Dict[str, Callable[["SlotRung", object], object]] = {
    "seq_idx": lambda rung, out: out.seq_idx.view(1, rung.C * rung.cp),
    "rope_rows": lambda rung, out: out.rope_rows,
    "cp_order_index": lambda rung, out: out.cp_order_index,
    "linear_chunks": lambda rung, out: LinearChunks(
        out.linear_chunk_indices.view(-1, 2), out.linear_chunk_offsets, out.linear_chunk_count,
        rung.step.config.linear_attention_chunk),
    "status": lambda rung, out: out.status,
}


def attribute_views(rung: "SlotRung", out) -> Dict[str, Optional[object]]:
    """Every attribute view of stages.ATTRIBUTE_VIEWS for a rung: the view of
    its outputs, or None where the step's options leave them out."""
    present = {f.view for f in stages.output_fields(rung.step.stage, **rung.step.options)}
    return {view: _ATTRIBUTES[view](rung, out) if view in present else None
            for view in stages.ATTRIBUTE_VIEWS}


def batch_views(rung: "SlotRung", out) -> Dict[str, "torch.Tensor"]:
    """The batch dict the model takes: each output of view "batch" as
    [1, C]. The padding mask is the rank's whole mask, sequence parallelism
    or not: megatron-core's GPTModel asserts that shape and scatters the
    mask to the sequence-parallel region itself (docs/megatron.md); the
    shard it makes is padding_mask_shard."""
    return {f.name: getattr(out, f.name).view(1, rung.C)
            for f in stages.output_fields(rung.step.stage, **rung.step.options)
            if f.view == "batch"}


def padding_mask_shard(rung: "SlotRung") -> Optional["torch.Tensor"]:
    """The TP rank's piece of the rank's padding mask under sequence
    parallelism ([1, C/tp]), else None."""
    step = rung.step
    if not step.sequence_parallel:
        return None
    return _tp_shard(rung.batch["padding_mask"], step.tp, step.tp_rank)


def dynamic_fields(rung: "SlotRung") -> dict:
    """PackedSeqParams's fields of dynamic CP: the sub-group's size and
    process group (none for a step of one fixed CP size)."""
    step = rung.step
    if not step.dynamic_cp:
        return {}
    return dict(local_cp_size=rung.cp, cp_group=step.config.cp_group(rung.cp))


def packed_seq_params(rung: "SlotRung", out, seq_idx, dynamic: dict):
    """The PackedSeqParams of the batch: the outputs of view
    "packed_seq_params" (the padded offsets, the valid ones under the
    compact convention), max_seqlen the rung's static C*cp, a bound for
    every microbatch it holds."""
    step = rung.step
    padded, valid = out.cu_seqlens_padded, out.cu_seqlens
    cu = padded if step.convention == "graph" else valid
    rows = rung.C * rung.cp
    return make_packed_seq_params(
        qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=padded,
        cu_seqlens_kv_padded=padded, max_seqlen_q=rows, max_seqlen_kv=rows, seq_idx=seq_idx,
        pad_between_seqs=step.convention == "compact", cp_partition_mode=step.cp_mode,
        **dynamic)


def restore_cp_order(rung: "SlotRung", gathered: "torch.Tensor") -> "torch.Tensor":
    """Rows of every CP rank, gathered rank-major ([cp*C, ...]: rank r's C
    rows at r*C, as all_gather_into_tensor leaves them), in sequence order
    ([C*cp, ...]); capturable (one index_select on the device). Needs
    cp_order_index=True."""
    if rung.cp_order_index is None:
        raise ValueError("restore_cp_order needs GraphStep(..., cp_order_index=True)")
    if not isinstance(gathered, torch.Tensor):
        raise TypeError(f"gathered must be a torch.Tensor; got {type(gathered).__name__}")
    rows = rung.C * rung.cp
    device = rung.step.device
    if gathered.dim() < 1 or gathered.shape[0] != rows or gathered.device != device:
        raise ValueError(f"gathered must have C*cp = {rows} rows on {device}; got shape "
                         f"{tuple(gathered.shape)} on {gathered.device}")
    return gathered.index_select(0, rung.cp_order_index)


def megatron_batch(batch: Dict[str, "torch.Tensor"], params) -> tuple:
    """(tokens, labels, loss_mask, None, position_ids, packed_seq_params,
    padding_mask): what the reference framework's
    get_batch_on_this_rank_for_sequence_packing returns, from a run's batch
    and PackedSeqParams (the keys a stage does not read None; the attention
    mask is None under THD)."""
    return (batch.get("tokens"), batch.get("labels"), batch.get("loss_mask"), None,
            batch.get("position_ids"), params, batch["padding_mask"])


class IterationViews:
    """The data iterator IterationGraphs hands megatron-core's schedule: the
    views (SlotRung) of an iteration's microbatches, each loaded into its
    slot already, in load order. get_batch_on_this_rank_for_sequence_packing
    takes it as it takes the reference loader's iterator, and runs the next
    view instead of loading a batch: the user's forward_step stays as it is,
    as megatron-core's FullCudaGraphWrapper leaves it (it swaps the
    iterator's items for static copies, full_cuda_graph.py:203-204 on dev)."""

    def __init__(self, views):
        self._views = iter(views)

    def __iter__(self) -> "IterationViews":
        return self

    def __next__(self) -> "SlotRung":
        return next(self._views)

    def run_next(self) -> tuple:
        """Runs the next view's step and returns megatron_batch of it: views
        of the slot's static outputs."""
        return megatron_batch(*next(self._views).run())
