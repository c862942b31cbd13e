"""SlotRung.broadcast: one rank's outputs sent to every rank of a
tensor-parallel group in one collective, and the agreement on the step
that its first call on a group makes."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from .._checks import _capturing, _check_int, _import_torch
from ._buffers import _LAYOUT_MISMATCH, _RUNG_NOT_RUN, _step_differences, _step_words

if TYPE_CHECKING:
    import torch

    from .slot import SlotRung
else:
    torch = _import_torch("thdc.megatron")

# The (group, src) pairs of broadcasts whose ranks agreed on a step, by step.
_AGREED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def broadcast(rung: "SlotRung", group=None, src: int = 0) -> None:
    """Sends the outputs of `src` (a global rank, which ran the step) to
    every rank of `group`: one collective over the slot's whole buffer,
    the tensor-parallel recipe where one rank prepares the microbatch.
    With NCCL it can be captured in the same graph; a step on the CPU
    needs a group of a CPU backend (gloo).

    The buffer starts with a header naming the layout of the rung (and
    CP size) that wrote it last, on the sender the rung that ran (C, N,
    CP size and rank, stage, rung, a fingerprint of the output layout).
    Each receiver compares it with its own on the device: on a mismatch
    it keeps an empty microbatch (its own layout, no rows to train, loss
    mask 0) and sets the status bit `layout_mismatch`, rather than read
    rows laid out for another step. A sender whose view is not the rung
    that ran sends that rung's header all the same (receivers expecting
    the view refuse the bytes) and keeps an empty microbatch of the
    view's flagged `rung_not_run`. The whole buffer is sent whichever
    rung or CP size ran, so the counts agree between TP ranks of the
    same step that picked different ones.

    What no microbatch changes is agreed once: the step's first
    broadcast on a group from src gathers every rank's step (C, N, cp,
    cp_rank, stage, rungs, options, the buffer's size) in one
    small collective and raises ValueError on every rank, naming what
    differs, when a rank built another step than the sender: a buffer
    of another size would make the broadcast itself fail (gloo aborts
    the receiver; with NCCL it is undefined). That first call reads the
    result back, so it cannot be captured: run one before capturing
    (the warm-up does); later calls, captured or not, skip it."""
    import torch.distributed as dist

    src = _check_int(src, "src")
    if rung.empty is None:
        raise ValueError("broadcast: the step was made for one TP rank (tp=1); the "
                         "broadcast recipe needs GraphStep(..., tp=, tp_rank=)")
    if (group, src) not in _AGREED.setdefault(rung.step, set()):
        _agree(rung, dist, group, src)
    slot = rung.slot
    sending = dist.get_rank() == src
    dist.broadcast(slot.buffer, src=src, group=group)
    # The header of the rung that wrote the buffer, the sender's: not the
    # view's, its outputs are another layout. The view keeps an empty
    # microbatch of its own, which the header then names.
    bad = (slot.header != rung.header).any()
    rung.output_bytes.copy_(torch.where(bad, rung.empty, rung.output_bytes))
    rung.outputs.status.bitwise_or_(
        bad.to(torch.int32) * (_RUNG_NOT_RUN if sending else _LAYOUT_MISMATCH))
    rung.wrote(force=True)  # the buffer now holds the sender's header


def _agree(rung: "SlotRung", dist, group, src: int) -> None:
    """The step's first broadcast on `group` from `src`: every rank's
    _STEP_FIELDS gathered (one all_gather of a few int64, read back on
    the host), ValueError on every rank when one differs from src's,
    else recorded in _AGREED. Every rank calls it at the same
    broadcast, its first of the step on that group, so the collectives
    stay in step whichever rung or CP size each picks."""
    step = rung.step
    if not step.on_host and _capturing():
        raise RuntimeError(
            "broadcast: the step's first broadcast on a group checks that every rank built "
            "the same step, a collective read back on the host, which a CUDA graph cannot "
            "capture: broadcast once before capturing (a warm-up)")
    ranks = (list(range(dist.get_world_size())) if group is None
             else list(dist.get_process_group_ranks(group)))
    if src not in ranks:
        raise ValueError(f"broadcast: src = {src} is not a rank of the group (ranks {ranks})")
    words = _step_words(step, rung.slot.buffer.numel())
    mine = torch.tensor(words, dtype=torch.int64, device=step.device)
    everyone = [torch.empty_like(mine) for _ in ranks]
    dist.all_gather(everyone, mine, group=group)
    rows = [t.tolist() for t in everyone]
    sender = rows[ranks.index(src)]
    said = [f"rank {rank} built another step than the sender, rank {src}: "
            + ", ".join(_step_differences(row, sender, src))
            for rank, row in zip(ranks, rows) if row != sender]
    if said:
        raise ValueError(
            f"broadcast: {'; '.join(said)}. The slot's buffer is broadcast whole, so every "
            f"rank of the group must build the same GraphStep (C, N, cp, cp_rank, stage, "
            f"capacities, sequence_capacities, cp_sizes, options): a buffer of another "
            f"size would make the collective fail (gloo aborts the receiver)")
    _AGREED.setdefault(step, set()).add((group, src))
