"""SlotRung.exact_rows: a run's outputs cut to the microbatch's own rows,
for a model run eagerly on exactly what it holds."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .._checks import _check_int, _import_torch
from .._kernel import STATUS_BITS
from ._buffers import _RUNG_NOT_RUN
from .options import _holds
from .packed_seq_params import make_packed_seq_params

if TYPE_CHECKING:
    import torch

    from .slot import SlotRung
else:
    torch = _import_torch("thdc.megatron")


def exact_rows(rung: "SlotRung", num_rows: int, num_seqs: int, max_seqlen: Optional[int] = None):
    """The last run's outputs cut to the microbatch's own rows, for a
    model run eagerly on exactly what it holds: (batch, PackedSeqParams)
    as run() returns them, with the data keys and the padding mask
    [1, T/cp] (this rank's rows, the whole mask with sequence
    parallelism too), cu arrays of num_seqs + 1 entries and max_seqlen the
    given bound. num_rows T: the packed rows of all CP ranks, the rows
    given to load_inputs (cu_seqlens_padded[num_seqs]); num_seqs: the
    real sequences; max_seqlen: a bound on their padded lengths (the
    plan's longest, thdc.planner's pack_max_lengths; default T). All
    three are host figures from the plan: nothing is read back.

    Views of the step's buffers (valid until the slot runs again), but
    the offsets, which are computed on the device in a few launches: the
    step's, clamped to T, the last set to T, so attention never reads
    past the T rows. A microbatch the step emptied (status != 0) gets
    offsets of at most max_seqlen rows each over the T rows, all
    masked out of the loss. The figures are checked against the step's
    offsets on the device, and a view they disagree with is emptied the
    same way (its loss mask zeroed in the slot's buffer) and flagged in
    the status: offsets that end past T (rows the view would leave out)
    set rows_not_given; ending before T (fewer sequences than the rows
    hold: they would merge into one), a sequence longer than max_seqlen or
    a count of sequences other than the one loaded set figures_disagree. An empty microbatch (T = 0) gets
    one padding row (two per rank with zigzag CP, cp > 1). Zigzag CP
    only (contiguous CP puts a rank's real rows after others' tails).

    The view must be the rung (and CP size) that wrote the slot's buffer
    last: the rungs share it, each laying it out for its own sizes.
    Where the host knows another one ran (no run of the slot captured in
    a CUDA graph) it raises ValueError naming both; else the device
    compares the buffer's header with the view's, and a view of another
    rung is emptied the same way and flagged rung_not_run, the buffer
    then no rung's until one runs (the emptying wrote into the outputs
    of the rung that ran)."""
    step = rung.step
    cp, C, N = rung.cp, rung.C, rung.N
    slot = rung.ran_last("exact_rows").slot
    num_rows = _check_int(num_rows, "num_rows")
    num_seqs = _check_int(num_seqs, "num_seqs")
    if cp > 1 and step.cp_mode != "zigzag":
        raise ValueError("exact_rows needs zigzag CP: with contiguous CP a rank's real rows "
                         "do not lie at the start of its C rows")
    if not 0 <= num_rows <= C * cp:
        raise ValueError(f"num_rows must be in [0, C*cp = {C * cp}]; got {num_rows}")
    if not (num_seqs >= 0 and _holds(num_rows, num_seqs, C * cp, N)):
        raise ValueError(f"num_seqs must be in [0, N-1 = {N - 1}], or N when num_rows = C*cp "
                         f"(no tail, no dummy); got {num_seqs}")
    granule = 2 * cp if cp > 1 else 1
    if num_rows % granule:
        raise ValueError(f"num_rows = {num_rows} is not a multiple of {granule}: each rank "
                         f"holds an equal share of every sequence")
    total = num_rows if num_rows else granule
    local = total // cp
    if max_seqlen is None:
        max_seqlen = total
    max_seqlen = _check_int(max_seqlen, "max_seqlen")
    if not 1 <= max_seqlen <= C * cp:
        raise ValueError(f"max_seqlen must be in [1, C*cp = {C * cp}]; got {max_seqlen}")
    if step.sequence_parallel and local % step.tp:
        raise ValueError(f"sequence parallelism shards the rank's {local} rows over tp = "
                         f"{step.tp} ranks: num_rows/cp must be a multiple of tp")
    out = rung.outputs
    entries = max(num_seqs, 1) + 1
    # Another rung's (or CP size's) header: the outputs are laid out for
    # other sizes (rung_not_run), nothing of them is read as this view's.
    stale = (slot.header != rung.header).any()
    ok = (out.status == 0) & ~stale
    # The host figures against the step's offsets, on the device: offsets
    # past T are rows the view leaves out (rows_not_given); ending before
    # T, the rest would merge into the last sequence, and a sequence
    # longer than max_seqlen would be cut by attention (figures_disagree).
    # Either empties the view: never a merge, never a row left out.
    step_offsets = out.cu_seqlens_padded[:num_seqs + 1]
    end = step_offsets[num_seqs:num_seqs + 1]
    lost = ok & (end > num_rows)
    longest = (step_offsets[1:] - step_offsets[:-1]).max() if num_seqs else end * 0
    # The sequences the figures name against the ones loaded: fewer, where
    # the rows still agree (no sequence and no row of a microbatch that has
    # some), would leave the rest out unseen.
    loaded = slot.inputs.num_seqs[:1]
    disagree = ok & ((end < num_rows) | (longest > max_seqlen) | (loaded != num_seqs))
    flags = (lost.to(torch.int32) * STATUS_BITS["rows_not_given"]
             + disagree.to(torch.int32) * STATUS_BITS["figures_disagree"])
    out.status.copy_(torch.where(stale, _RUNG_NOT_RUN, out.status | flags))
    ok = ok & ~lost & ~disagree
    spread = (rung.entries[:entries] * max_seqlen).clamp_(max=total).to(torch.int32)
    padded = torch.where(ok, out.cu_seqlens_padded[:entries].clamp(max=total), spread)
    padded[entries - 1:].fill_(total)
    if step.convention == "graph":
        cu = padded
    else:
        cu = torch.where(ok, torch.minimum(out.cu_seqlens[:entries], padded), padded)
    batch = {k: v[:, :local] for k, v in rung.batch.items()}
    if "loss_mask" in batch:  # an emptied view trains nothing
        batch["loss_mask"].mul_(ok)
    # A stale view wrote its status and loss mask over the outputs of the
    # rung that ran: the buffer is no rung's (a header of zeros) until one
    # runs.
    slot.header.mul_(~stale)
    params = make_packed_seq_params(
        qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=padded,
        cu_seqlens_kv_padded=padded, max_seqlen_q=max_seqlen, max_seqlen_kv=max_seqlen,
        seq_idx=None if rung.seq_idx is None else rung.seq_idx[:, :total],
        pad_between_seqs=step.convention == "compact", cp_partition_mode=step.cp_mode,
        **rung.dynamic)
    return batch, params
