"""A drop-in for the reference framework's per-microbatch THD step in CUDA-graph
mode (Megatron-LM with TransformerEngine), on static buffers.

    step = thdc.megatron.GraphStep(C=32768, N=64, cp=2, cp_rank=rank)
    batch, params = step(tokens, labels, loss_mask, position_ids,
                         cu_seqlens, cu_seqlens_padded)
    # batch: tokens, labels, loss_mask, position_ids, padding_mask, [1, C]
    # params: megatron-core's PackedSeqParams (thdc's own class without it)

One fused kernel does the padding mask, sanitises padded slots, slices the
rank's CP rows, pads the rank's rows to C with a dummy sequence, pads the cu
arrays to N+1 entries and computes the model-side metadata (`seq_idx`, and
on request RoPE table rows and the index that undoes the CP partition);
nothing waits for the host, so `step.run()` (the kernel on the static
buffers) can be captured in a CUDA graph and replayed after new data is
copied into the step's inputs. docs/megatron.md is the guide: tensor,
pipeline and context parallelism, microbatches in flight, every output.

Pipeline stages. `stage=` picks what one pipeline-parallel stage reads:
"first" (tokens, position_ids), "last" (labels, loss_mask), "middle" (no
data key) or "first_last" (all four; the default). Every stage gets the
padding mask and the same metadata for the same microbatch.

Microbatches in flight. With pipeline parallelism several microbatches are
alive at once, and a captured graph reads static addresses, so each needs
its own buffers: `GraphStep(..., slots=K)` owns K buffer sets sharing one
kernel, `step.slot(i)` is microbatch i's (slot i mod K), with the same
methods as the step; capture one graph per slot. `slot_count()` gives K
from the planner's bound.

A capacity ladder. `GraphStep(..., capacities=[B_1, ..., C],
sequence_capacities=[N_1, ..., N])` compiles the step once per rung; each
slot's `rung(r)` runs rung r on the slot's inputs, its batch [1, B_r] and
PackedSeqParams of N_r + 1 entries: capture one graph per rung and replay
the one the plan gives each microbatch (thdc.planner.ladder_plan), so the
model computes B_r rows instead of C. `rung.exact_rows(rows, seqs,
longest)` gives an eager model the microbatch's own rows and offsets.
docs/capacity-ladder.md is the guide.

Where Megatron calls it. `get_batch_on_this_rank_for_sequence_packing(
data_iterator, vpp_size, mtp_on_this_rank, vp_stage, dynamic_cp,
pg_collection, config)` is the reference framework's function of that name,
arguments and 7-tuple, on GraphStep (sequence_packing.py):
the step's options from the config fields it reads, TP rank 0 reading the
iterator and broadcasting, a ring of slots across calls.

Whole iterations in one graph. `IterationGraphs(forward_backward_func,
step)` captures megatron-core's schedule (every microbatch's forward and
backward) once per iteration shape, the microbatch count and rungs, with
each microbatch loaded into its own slot before the replay; an iteration
may run a larger shape that holds its own, and `thdc.planner.choose_shapes`
picks the shapes to capture from the coming iterations' plans (iteration.py).

Linear attention. `GraphStep(..., linear_attention_chunk=BT)` also computes
the chunk metadata of flash-linear-attention's Gated DeltaNet and KDA
kernels (`slot.linear_chunks`; thdc.attention.fla_gdn_args and
fla_kda_args), and `use_step_chunks(model, step)` hands it to
megatron-core's GatedDeltaNet layers (linear_attention.py).

Tensor parallelism. One rank runs the step and `slot.broadcast(group, src)`
sends the outputs, one buffer, to the others (a capturable NCCL broadcast;
the recipe of Megatron's loader, where only TP rank 0 has data), or every
TP rank runs it on identical inputs (no collective). The batch's `padding_mask` is the rank's whole `[1, C]`, as the
model takes it with sequence parallelism too (megatron-core's GPTModel
checks its shape against the tokens' and scatters it to the sequence-parallel
region itself); with `sequence_parallel=True` `padding_mask_shard` is the
TP rank's piece `[1, C/tp]`.

The outputs map onto TransformerEngine's attention arguments as follows:

    argument                                 "graph" (default)   "compact"
    cu_seqlens_q, cu_seqlens_kv              padded offsets      valid offsets
    cu_seqlens_q_padded, cu_seqlens_kv_padded  padded offsets    padded offsets
    max_seqlen_q, max_seqlen_kv              C*cp                C*cp
    pad_between_seqs                         False               True
    qkv_format                               "thd"               "thd"
    seq_idx                                  [1, C*cp], every rank's rows

"graph" is the reference framework's convention in graph mode: every padding
row is attended as a token of its sequence, which leaves real tokens
unaffected because attention is causal and the padding follows them.
"compact" gives attention the valid lengths and needs a backend that supports
`pad_between_seqs` (cuDNN, FlashAttention 3). thdc.attention gives other
kernels (FlashAttention 4, cuDNN's frontend, FlashInfer, PyTorch's varlen)
their arguments from the step's buffers. PackedSeqParams is built with
the fields the installed class declares (megatron-core's fields vary by
release); a class without `pad_between_seqs` cannot express "compact".

Offsets are global (all CP ranks); every array has N+1 entries, the last ones
repeating the total; the dummy sequence covers the rows after the real ones.

A microbatch whose metadata is invalid (see `thd.validate`: too many
sequences, over capacity, lengths not divisible by 2*cp, decreasing offsets,
valid longer than padded, a bad rank, offsets that claim more rows or entries
than were given) sets bits in `step.outputs.status`, and
its outputs are those of an empty microbatch: a loss mask of zeros and one
dummy sequence, so it contributes nothing to the loss or the gradients; the
sequences and valid tokens it claimed are in `dropped_seqs` and
`dropped_tokens`. Reading them on the host would synchronise; instead fold
them into device counters with `step.accumulate_status(flag)` and
`step.accumulate_dropped(counts)` and look at those where the training loop
synchronises anyway (e.g. with the loss, at the end of the step), skipping
or logging the batch there. `step.check_async()` is the strict alternative:
a device-side assert, which ends the process on a bad microbatch.

On the CPU. `GraphStep(..., device="cpu")` runs the same pipeline's host
code (compiled by the JIT for the host, or a bundle's host code) on CPU
tensors, with the same outputs: for trying the step out and for tests on a
machine without a GPU. Every call is done when it returns; there are no
streams (run(stream=...) is refused) and no graphs, and check_async raises
RuntimeError at once.
"""
from __future__ import annotations

# The face of thdc.megatron: it only re-exports. options.py (StepOptions),
# step.py (GraphStep), slot.py (StepSlot, SlotRung), loader.py (the copies
# into a slot's inputs), packed_seq_params.py and sequence_packing.py (the
# reference framework's function) hold the code; none imports this file.
from ..planner import choose_shapes
from .iteration import IterationGraphs, shapes_of
from .linear_attention import restore_step_chunks, use_step_chunks
from .loader import InputLoader
from .options import CONVENTIONS, CP_MODES, STAGES, StepOptions
from .packed_seq_params import _megatron_core, make_packed_seq_params, packed_seq_params_fields
from .sequence_packing import (SEQUENCE_PACKING, ConfigError, SequencePackingBatches,
                               get_batch_on_this_rank_for_sequence_packing, slots_in_flight,
                               stage_of, step_options)
from .slot import LinearChunks, SlotRung, StepSlot, slot_count
from .step import GraphStep

__all__ = [
    "CONVENTIONS", "CP_MODES", "ConfigError", "GraphStep", "InputLoader", "IterationGraphs",
    "LinearChunks", "choose_shapes",
    "MEGATRON_CORE_IMPORT_ERROR", "PackedSeqParams", "SEQUENCE_PACKING", "STAGES",
    "SequencePackingBatches", "SlotRung", "StepOptions", "StepSlot", "USING_MEGATRON_CORE",
    "get_batch_on_this_rank_for_sequence_packing", "make_packed_seq_params",
    "packed_seq_params_fields", "restore_step_chunks", "slot_count", "slots_in_flight",
    "shapes_of", "stage_of", "step_options", "use_step_chunks",
]

# megatron-core's PackedSeqParams is imported when one of these is first
# read (packed_seq_params.py says why).
_LAZY = ("PackedSeqParams", "USING_MEGATRON_CORE", "MEGATRON_CORE_IMPORT_ERROR")


def __getattr__(name):
    if name in _LAZY:
        return _megatron_core()[_LAZY.index(name)]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
