"""A GraphStep's buffer sets: StepSlot, the inputs and the one output buffer
of one microbatch in flight, and SlotRung, a slot at one rung of the
capacity ladder and one CP size (the kernel that fills the buffer, and the
batch and PackedSeqParams that view it)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Tuple

from .. import planner
from .._checks import _capturing, _check_int, _import_torch
from .._kernel import STATUS_BITS
from .._thdc import Gather, describe_status
from ._buffers import (_ALIGNMENT, _HEADER_FIELDS, _LAYOUT_MISMATCH, _RUNG_NOT_RUN,
                       _header_words, _output_layout, _step_differences, _step_words,
                       _tp_shard)
from ._delegate import Delegated, DelegatedValue
from .loader import InputLoader, _refuse_unknown
from .options import _holds
from .packed_seq_params import make_packed_seq_params

if TYPE_CHECKING:
    import torch

    from .packed_seq_params import _FallbackPackedSeqParams as PackedSeqParams
    from .step import GraphStep
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


def slot_count(global_batch_size: int, max_seqlen: int, C: int, cp: int = 1, *, dp: int = 1,
               N: Optional[int] = None, vpp_group: Optional[int] = None,
               num_microbatches: int = 0) -> int:
    """How many buffer sets (graph slots) a global batch can need: the
    planner's bound on its microbatches (thdc.planner.max_microbatches), or
    the runtime count when that is larger (S12)."""
    bound = planner.max_microbatches(global_batch_size, max_seqlen, C, cp, dp,
                                     max_packed_sequences=N, vpp_group=vpp_group)
    return planner.graph_capture_count(num_microbatches, bound)


def _torch_stream(stream, device) -> "torch.cuda.Stream":
    """A stream= argument the kernel took (a torch.cuda.Stream, an object
    with __cuda_stream__, cuda_stream or ptr, or an int handle) as a
    PyTorch stream, for the launches that follow the kernel's on it."""
    if isinstance(stream, torch.cuda.Stream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        handle = stream.__cuda_stream__()[1]
    elif hasattr(stream, "cuda_stream"):
        handle = stream.cuda_stream
    elif hasattr(stream, "ptr"):
        handle = stream.ptr
    else:
        handle = stream
    return torch.cuda.ExternalStream(int(handle), device=device)


class SlotRung:
    """One slot at one rung of the capacity ladder: the rung's kernel on the
    slot's inputs (the first C*cp rows and N+1 entries, C and N the rung's),
    its outputs in the slot's buffer, the batch ([1, C]) and PackedSeqParams
    (N+1 entries, max_seqlen C*cp) that view them. Made by StepSlot;
    `slot.rung(i)`. Without a ladder the slot has one, itself."""

    def __init__(self, slot: StepSlot, index: int, kernel, spec, layout, nbytes: int, *,
                 cp: int):
        step = slot.step
        self.slot, self.step, self.index, self.kernel = slot, step, index, kernel
        C, N = step.config.rungs[index]
        self.C, self.N, self.cp = C, N, cp
        device = step.device
        self.inputs = slot.inputs
        self._input_list = [
            (slot._cp_ranks[cp] if a.name == "cp_rank" else getattr(slot.inputs, a.name))
            [:a.shape[0]] for a in spec if a.direction == "input"]
        # The header and this rung's outputs (the header's _ALIGNMENT bytes
        # first).
        self.buffer = slot.buffer[:_ALIGNMENT + nbytes]
        self._output_bytes = slot.buffer[_ALIGNMENT:_ALIGNMENT + nbytes]
        self._output_list = [
            self._output_bytes[o:o + a.shape[0] * size].view(getattr(torch, a.dtype))
            for a, o, size in layout]
        self.load_inputs = slot._loader.load
        self.outputs = kernel(*self._input_list, out=self._output_list, device=device.index)
        # The header this rung writes with its outputs and expects to read
        # (the run above wrote the buffer: its header too), and, where other
        # TP ranks may send, this rung's outputs for an empty microbatch (the
        # run above, on the zeroed inputs): what a receiver keeps when the
        # header disagrees.
        self._header_words = _header_words(step, C, N, cp, index, layout)
        self._header = torch.tensor(self._header_words, dtype=torch.int32, device=device)
        slot._header.copy_(self._header)
        slot._last_run = self
        self._empty = self._output_bytes.clone() if step.tp > 1 else None
        if step.on_host:
            self.run = self._run_on_host
            self._wrote = self._wrote_on_host
            self.check_async = self._check_on_host

        out, cp = self.outputs, self.cp
        self.status = out.status  # the last run's status bits, on the device (0: valid)
        self.batch = {k: getattr(out, k).view(1, C) for k in step.data_keys}
        # The model takes the rank's whole mask, [1, C] like the data keys,
        # sequence parallelism or not: megatron-core's GPTModel asserts that
        # shape and scatters the mask to the sequence-parallel region itself
        # (docs/megatron.md). The shard it makes is padding_mask_shard.
        self.padding_mask_full = out.padding_mask.view(1, C)
        self.batch["padding_mask"] = self.padding_mask_full
        self.padding_mask_shard = (_tp_shard(self.padding_mask_full, step.tp, step.tp_rank)
                                   if step.sequence_parallel else None)
        self.seq_idx = out.seq_idx.view(1, C * cp) if step.options["seq_idx"] else None
        self.rope_rows = out.rope_rows if step.options["rope"] else None
        self.cp_order_index = out.cp_order_index if step.options["cp_order_index"] else None
        BT = step.config.linear_attention_chunk
        self.linear_chunks = None if BT is None else LinearChunks(
            out.linear_chunk_indices.view(-1, 2), out.linear_chunk_offsets,
            out.linear_chunk_count, BT)
        # Dynamic CP's fields, the process group looked up once.
        self._dynamic = self._dynamic_fields()
        padded, valid = out.cu_seqlens_padded, out.cu_seqlens
        cu = padded if step.convention == "graph" else valid
        self.packed_seq_params = make_packed_seq_params(
            qkv_format="thd",
            cu_seqlens_q=cu,
            cu_seqlens_kv=cu,
            cu_seqlens_q_padded=padded,
            cu_seqlens_kv_padded=padded,
            max_seqlen_q=C * cp,
            max_seqlen_kv=C * cp,
            seq_idx=self.seq_idx,
            pad_between_seqs=step.convention == "compact",
            cp_partition_mode=step.cp_mode,
            **self._dynamic,
        )
        # exact_rows's entry numbers 0..N (int64: times max_seqlen).
        self._entries = torch.arange(N + 1, dtype=torch.int64, device=device)

    def _variant_for(self, cp_size) -> "SlotRung":
        """The slot at this rung and CP size cp_size."""
        return self.slot.variant(cp_size, self.index)

    def _dynamic_fields(self) -> dict:
        """PackedSeqParams's fields of dynamic CP: the sub-group's size and
        process group (none for a step of one fixed CP size)."""
        if not self.step.dynamic_cp:
            return {}
        return dict(local_cp_size=self.cp, cp_group=self.step.config.cp_group(self.cp))

    def _name(self) -> str:
        """This view in messages: the rung, its sizes and, with dynamic CP,
        its CP size."""
        name = f"rung {self.index} (C = {self.C}, N = {self.N})"
        return name + f" at CP size {self.cp}" if self.step.dynamic_cp else name

    def _wrote(self, stream=None, force: bool = False) -> None:
        """Records that this rung (at its CP size) wrote the slot's buffer
        last: its header into the buffer's, on the device after its outputs
        (on `stream` when given), so that a captured run records it too; and
        on the host, slot._last_run, which stays None once a write has been
        captured (the graph's replays write the buffer unseen by the
        host). force: write the header even where the host knows the view
        wrote it last (a broadcast has since put the sender's there)."""
        slot = self.slot
        if stream is None:
            capturing = torch.cuda.is_current_stream_capturing()
            # The host knows the buffer holds this view's header already (it
            # wrote it last, and nothing was captured): no copy, which is
            # most of the call's host time for a step run eagerly.
            if slot._last_run is self and not capturing and not force:
                return
            slot._header.copy_(self._header)
        else:
            with torch.cuda.stream(_torch_stream(stream, self.step.device)):
                capturing = torch.cuda.is_current_stream_capturing()
                if slot._last_run is self and not capturing and not force:
                    return
                slot._header.copy_(self._header)
        if slot._last_run is not None:
            slot._last_run = None if capturing else self

    def _wrote_on_host(self, stream=None, force: bool = False) -> None:
        """_wrote for a step on the CPU, which has no graphs: the host always
        knows."""
        self.slot._header.copy_(self._header)
        self.slot._last_run = self

    def run(self, stream=None) -> Tuple[dict, "PackedSeqParams"]:
        """Launches the step on the static inputs (capturable: no allocation,
        no synchronisation) and returns the static batch and parameters. On
        the CPU it runs the host code and returns when done; a stream there
        raises ValueError. The slot's buffer then holds this rung's outputs,
        and its header says so, until another rung of the slot runs."""
        self.kernel(*self._input_list, out=self._output_list, stream=stream,
                    device=self.step.device.index)
        self._wrote(stream)
        return self.batch, self.packed_seq_params

    def _run_on_host(self, stream=None) -> Tuple[dict, "PackedSeqParams"]:
        """run for a step on the CPU: the host code, done when it returns."""
        if stream is not None:
            raise ValueError(
                f"run(stream=...): the step runs on the CPU, which has no streams; got "
                f"stream={stream!r} (a stream needs GraphStep(..., device='cuda:N'))")
        self.kernel(*self._input_list, out=self._output_list)
        self._wrote_on_host()
        return self.batch, self.packed_seq_params

    def __call__(self, tokens=None, labels=None, loss_mask=None, position_ids=None,
                 cu_seqlens=None, cu_seqlens_padded=None, num_seqs=None, stream=None,
                 max_seqlen=None, local_cp_size=None, **unknown):
        """load_inputs, then run: `step(**megatron_batch)` takes the batch
        dict of the reference framework's loader. (StepSlot's too: it reads
        only load_inputs and run, which a slot binds to its top rung's.)"""
        if unknown:
            _refuse_unknown("step", unknown, extra=("stream",))
        target = self
        if local_cp_size is not None and self.step.dynamic_cp:
            # Dynamic CP: the slot at this rung and the microbatch's CP size,
            # a host int from the plan (a device tensor is refused: reading
            # it would synchronise).
            target, local_cp_size = self._variant_for(local_cp_size), None
        target.load_inputs(tokens, labels, loss_mask, position_ids, cu_seqlens,
                           cu_seqlens_padded, num_seqs, max_seqlen, local_cp_size)
        return target.run(stream)

    def ran_last(self, what: str = "ran_last") -> "SlotRung":
        """This view, where the host does not know of another view of the
        slot that wrote its buffer since (ValueError naming both): the rungs
        and CP sizes share the buffer, each laying it out for its own sizes,
        so another's outputs read through this view are wrong numbers. Once
        a run of the slot has been captured in a CUDA graph the host cannot
        know, and the caller's word is taken. `what` names the caller in the
        message."""
        last = self.slot._last_run
        if last is not None and last is not self:
            raise ValueError(
                f"{what}: {self._name()} of slot {self.slot.index} did not run last; "
                f"{last._name()} did. The rungs share the slot's buffer, each laying it out "
                f"for its own sizes: read the rung that ran, or run this one")
        return self

    def accumulate_status(self, flag: torch.Tensor) -> torch.Tensor:
        """flag |= status, on the device (capturable); returns flag."""
        return flag.bitwise_or_(self.outputs.status)

    def accumulate_dropped(self, counts: torch.Tensor) -> torch.Tensor:
        """counts[0] += the sequences, counts[1] += the valid tokens the last
        microbatch claimed when it was invalid and emptied (0 and 0 when it
        was valid), on the device (capturable); counts: int64 [2] on the
        step's device. Returns counts."""
        if (not isinstance(counts, torch.Tensor) or counts.dtype != torch.int64
                or counts.shape != (2,) or counts.device != self.step.device):
            raise ValueError(f"counts must be an int64 tensor of shape (2,) on {self.step.device}")
        counts[0:1].add_(self.outputs.dropped_seqs)
        counts[1:2].add_(self.outputs.dropped_tokens)
        return counts

    def describe_status(self) -> str:
        """The last run's status bits by name ("ok" when valid); reads the
        status back, so it synchronises: for logging after a failure."""
        return describe_status(int(self.outputs.status[0].item()))

    def check_async(self) -> None:
        """A device-side assert that the last microbatch was valid; it does not
        synchronise, but a failure ends the process's CUDA context. On the
        CPU a failure raises RuntimeError naming the status bits."""
        torch._assert_async(self.outputs.status[0] == 0,
                            "thdc: invalid THD microbatch metadata (see status bits)")

    def _check_on_host(self) -> None:
        """check_async for a step on the CPU: RuntimeError at once."""
        status = int(self.outputs.status[0])
        if status:
                raise RuntimeError(f"thdc: invalid THD microbatch metadata: status {status} "
                               f"({describe_status(status)})")

    def restore_cp_order(self, gathered: torch.Tensor) -> torch.Tensor:
        """Rows of every CP rank, gathered rank-major ([cp*C, ...]: rank r's C
        rows at r*C, as all_gather_into_tensor leaves them), in sequence order
        ([C*cp, ...]); capturable (one index_select on the device). Needs
        cp_order_index=True."""
        if self.cp_order_index is None:
            raise ValueError("restore_cp_order needs GraphStep(..., cp_order_index=True)")
        if not isinstance(gathered, torch.Tensor):
            raise TypeError(f"gathered must be a torch.Tensor; got {type(gathered).__name__}")
        rows = self.C * self.cp
        if gathered.dim() < 1 or gathered.shape[0] != rows or gathered.device != self.step.device:
            raise ValueError(f"gathered must have C*cp = {rows} rows on {self.step.device}; got "
                             f"shape {tuple(gathered.shape)} on {gathered.device}")
        return gathered.index_select(0, self.cp_order_index)

    def exact_rows(self, num_rows: int, num_seqs: int, max_seqlen: Optional[int] = None):
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
        hold: they would merge into one) or a sequence longer than
        max_seqlen set figures_disagree. An empty microbatch (T = 0) gets
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
        step = self.step
        cp, C, N = self.cp, self.C, self.N
        slot = self.ran_last("exact_rows").slot
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
        out = self.outputs
        entries = max(num_seqs, 1) + 1
        # Another rung's (or CP size's) header: the outputs are laid out for
        # other sizes (rung_not_run), nothing of them is read as this view's.
        stale = (slot._header != self._header).any()
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
        disagree = ok & ((end < num_rows) | (longest > max_seqlen))
        flags = (lost.to(torch.int32) * STATUS_BITS["rows_not_given"]
                 + disagree.to(torch.int32) * STATUS_BITS["figures_disagree"])
        out.status.copy_(torch.where(stale, _RUNG_NOT_RUN, out.status | flags))
        ok = ok & ~lost & ~disagree
        spread = (self._entries[:entries] * max_seqlen).clamp_(max=total).to(torch.int32)
        padded = torch.where(ok, out.cu_seqlens_padded[:entries].clamp(max=total), spread)
        padded[entries - 1:].fill_(total)
        if step.convention == "graph":
            cu = padded
        else:
            cu = torch.where(ok, torch.minimum(out.cu_seqlens[:entries], padded), padded)
        batch = {k: v[:, :local] for k, v in self.batch.items()}
        if "loss_mask" in batch:  # an emptied view trains nothing
            batch["loss_mask"].mul_(ok)
        # A stale view wrote its status and loss mask over the outputs of the
        # rung that ran: the buffer is no rung's (a header of zeros) until one
        # runs.
        slot._header.mul_(~stale)
        params = make_packed_seq_params(
            qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=padded,
            cu_seqlens_kv_padded=padded, max_seqlen_q=max_seqlen, max_seqlen_kv=max_seqlen,
            seq_idx=None if self.seq_idx is None else self.seq_idx[:, :total],
            pad_between_seqs=step.convention == "compact", cp_partition_mode=step.cp_mode,
            **self._dynamic)
        return batch, params

    def broadcast(self, group=None, src: int = 0) -> None:
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
        if self._empty is None:
            raise ValueError("broadcast: the step was made for one TP rank (tp=1); the "
                             "broadcast recipe needs GraphStep(..., tp=, tp_rank=)")
        if (group, src) not in self.step._agreed:
            self._agree(dist, group, src)
        slot = self.slot
        sending = dist.get_rank() == src
        dist.broadcast(slot.buffer, src=src, group=group)
        # The header of the rung that wrote the buffer, the sender's: not the
        # view's, its outputs are another layout. The view keeps an empty
        # microbatch of its own, which the header then names.
        bad = (slot._header != self._header).any()
        self._output_bytes.copy_(torch.where(bad, self._empty, self._output_bytes))
        self.outputs.status.bitwise_or_(
            bad.to(torch.int32) * (_RUNG_NOT_RUN if sending else _LAYOUT_MISMATCH))
        self._wrote(force=True)  # the buffer now holds the sender's header

    def _agree(self, dist, group, src: int) -> None:
        """The step's first broadcast on `group` from `src`: every rank's
        _STEP_FIELDS gathered (one all_gather of a few int64, read back on
        the host), ValueError on every rank when one differs from src's,
        else recorded in step._agreed. Every rank calls it at the same
        broadcast, its first of the step on that group, so the collectives
        stay in step whichever rung or CP size each picks."""
        step = self.step
        if not step.on_host and _capturing():
            raise RuntimeError(
                "broadcast: the step's first broadcast on a group checks that every rank built "
                "the same step, a collective read back on the host, which a CUDA graph cannot "
                "capture: broadcast once before capturing (a warm-up)")
        ranks = (list(range(dist.get_world_size())) if group is None
                 else list(dist.get_process_group_ranks(group)))
        if src not in ranks:
            raise ValueError(f"broadcast: src = {src} is not a rank of the group (ranks {ranks})")
        words = _step_words(step, self.slot.buffer.numel())
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
        step._agreed.add((group, src))


class StepSlot:
    """One buffer set of a GraphStep: the inputs of one microbatch, the
    outputs in one device buffer, the batch and PackedSeqParams that view
    them. Made by GraphStep; `step.slot(i)`.

    With a capacity ladder the slot has one view per rung (`slot.rung(i)`,
    a SlotRung): the rung's kernel reads the first rows of the slot's inputs
    and writes its outputs into the slot's buffer, laid out for its own
    sizes. The rungs share the buffer, so a rung's outputs hold until
    another rung of the slot runs. The slot's own outputs, batch, run, ...
    are its top rung's (the step at C, N)."""

    # The slot's own outputs and methods are its top rung's (Delegated).
    outputs = DelegatedValue[Any]("_top", doc="The last run's outputs (a named tuple of views "
                                              "of the slot's buffer), its top rung's.")
    batch = DelegatedValue[Dict[str, "torch.Tensor"]](
        "_top", doc="The batch dict the model takes ([1, C] views), its top rung's.")
    packed_seq_params = DelegatedValue["PackedSeqParams"](
        "_top", doc="The PackedSeqParams of the batch, its top rung's.")
    status = DelegatedValue["torch.Tensor"](
        "_top", doc="The last run's status bits on the device (0: valid).")
    seq_idx = DelegatedValue[Optional["torch.Tensor"]](
        "_top", doc="Each row's sequence index ([1, C*cp]), or None.")
    rope_rows = DelegatedValue[Optional["torch.Tensor"]](
        "_top", doc="Each local row's RoPE table row ([C]), or None.")
    cp_order_index = DelegatedValue[Optional["torch.Tensor"]](
        "_top", doc="The index that puts gathered rows back in sequence order, or None.")
    linear_chunks = DelegatedValue[Optional[LinearChunks]](
        "_top", doc="Linear attention's chunk metadata (LinearChunks), or None.")
    padding_mask_full = DelegatedValue["torch.Tensor"](
        "_top", doc="The rank's whole padding mask, [1, C].")
    padding_mask_shard = DelegatedValue[Optional["torch.Tensor"]](
        "_top", doc="The TP rank's piece of the padding mask, [1, C/tp], under sequence "
                    "parallelism.")
    run = Delegated("_top", SlotRung.run)
    exact_rows = Delegated("_top", SlotRung.exact_rows)
    accumulate_status = Delegated("_top", SlotRung.accumulate_status)
    accumulate_dropped = Delegated("_top", SlotRung.accumulate_dropped)
    describe_status = Delegated("_top", SlotRung.describe_status)
    check_async = Delegated("_top", SlotRung.check_async)
    restore_cp_order = Delegated("_top", SlotRung.restore_cp_order)
    broadcast = Delegated("_top", SlotRung.broadcast)
    # load_inputs, then run (the top rung's): SlotRung's own method, which
    # reads only what a slot has too.
    __call__ = SlotRung.__call__

    def __init__(self, step: GraphStep, index: int):
        self.step, self.index = step, index
        device, spec = step.device, step._spec
        make = lambda a: torch.zeros(a.shape, dtype=getattr(torch, a.dtype), device=device)
        self.inputs = SimpleNamespace(**{a.name: make(a) for a in spec if a.direction == "input"})
        self.inputs.cp_rank.fill_(step.cp_rank)
        if hasattr(self.inputs, "rows"):  # the row numbers thd.cp_unslice permutes
            self.inputs.rows.copy_(torch.arange(self.inputs.rows.numel(), dtype=torch.int32))
        gather = Gather(None if step.on_host else device.index,
                                   like=self.inputs.cp_rank)
        self._loader = InputLoader(self.inputs, step.data_keys, step.stage, gather)
        # Every input by its own Tensor.copy_: the tests' and the benchmark's
        # comparison.
        self._per_tensor_loader = InputLoader(self.inputs, step.data_keys, step.stage, gather,
                                              per_tensor=True)
        # The loader's method itself (StepSlot.load_inputs documents it):
        # one Python frame less per microbatch.
        self.load_inputs = self._loader.load
        # Every output in one buffer, so one collective can send them all:
        # the broadcast header (_HEADER_FIELDS), then the outputs, sized for
        # the largest layout of every CP size and rung.
        layouts = {key: _output_layout(s) for key, s in step._variant_specs.items()}
        largest = max(size for _, size in layouts.values())
        self.buffer = torch.zeros(_ALIGNMENT + largest, dtype=torch.uint8, device=device)
        self._header = self.buffer[:4 * len(_HEADER_FIELDS)].view(torch.int32)
        # The view (SlotRung) whose outputs the buffer holds, as the host
        # knows it: set by each run (SlotRung._wrote), None for good once a
        # run has been captured in a CUDA graph.
        self._last_run = None
        # Each CP size's kernels read the rank's CP rank in its sub-group of
        # that size.
        self._cp_ranks = {}
        for size in step.cp_sizes:
            rank = self.inputs.cp_rank if size == step.cp else self.inputs.cp_rank.clone()
            self._cp_ranks[size] = rank.fill_(step.config.local_cp_rank(size))
        # Each variant's first run on the zeroed inputs (an empty
        # microbatch), the top size's top rung's last, names the outputs and
        # leaves them valid.
        self.variants = {}
        for size in step.cp_sizes:
            if size == step.cp:
                continue
            for r in range(len(step.kernels)):
                self.variants[size, r] = SlotRung(self, r, step.variant_kernels[size, r],
                                                  step._variant_specs[size, r],
                                                  *layouts[size, r], cp=size)
        self.rungs = tuple(SlotRung(self, i, step.kernels[i], step._specs[i],
                                    *layouts[step.cp, i], cp=step.cp)
                           for i in range(len(step.kernels)))
        for i, rung in enumerate(self.rungs):
            self.variants[step.cp, i] = rung
        # variant()'s lookup of a valid (size, rung) pair, negative rungs
        # included: the launch path's one dict lookup.
        count = len(self.rungs)
        self._variant_index = {(size, r): self.variants[size, r % count]
                               for size in step.cp_sizes for r in range(-count, count)}
        self._top = self.rungs[-1]
        Delegated.bind(self)

    def ran_last(self, what: str = "ran_last") -> "SlotRung":
        """The view (SlotRung) whose outputs the slot's buffer holds: the slot's
        only one, or the rung (and CP size) that ran last as the host knows
        it. Where the slot has several views and a run was captured in a
        CUDA graph, the host cannot know which one a replay wrote:
        ValueError, which names the views to pass instead. `what` names the
        caller in the message."""
        if len(self.variants) == 1:
            return self._top
        if self._last_run is None:
            views = ("slot.rung(r)" if not self.step.dynamic_cp
                     else "slot.variant(cp_size, r)")
            raise ValueError(
                f"{what}: slot {self.index} has {len(self.variants)} views (rungs"
                f"{' and CP sizes' if self.step.dynamic_cp else ''}) sharing its buffer, and a run "
                f"captured in a CUDA graph hides which one wrote it last: pass the view that "
                f"ran, {views}")
        return self._last_run

    def rung(self, index: int) -> "SlotRung":
        """The slot's view at rung `index` of the ladder (0: the smallest;
        -1 or len - 1: the top one, the slot itself)."""
        index = _check_int(index, "rung")
        count = len(self.rungs)
        if not -count <= index < count:
            raise IndexError(f"rung {index}: the ladder has {count} rung"
                             + "s" * (count > 1) + f" (capacities {list(self.step.capacities)})")
        return self.rungs[index]

    def variant(self, cp_size: int, rung: int = -1) -> "SlotRung":
        """The slot's view at one CP size of dynamic CP and one rung (default
        the top): its kernel slices the sub-group's microbatch for the
        rank's CP rank in it, its PackedSeqParams carry local_cp_size and
        cp_group. `variant(cp)` is `rung(rung)`."""
        if type(cp_size) is int and type(rung) is int:
            found = self._variant_index.get((cp_size, rung))
            if found is not None:
                return found
        size = self.step._check_size(cp_size)
        index = self.rung(rung).index
        return self.variants[size, index]

    def _variant_for(self, cp_size) -> "SlotRung":
        """The slot at its top rung and CP size cp_size (its __call__'s)."""
        return self.variant(cp_size)

    def load_inputs(self, tokens=None, labels=None, loss_mask=None, position_ids=None,
                    cu_seqlens=None, cu_seqlens_padded=None, num_seqs=None, max_seqlen=None,
                    local_cp_size=None) -> None:
        """Copies one packed microbatch into the slot's inputs, on the current
        stream. Data tensors hold up to C*cp rows ([T] or [1, T], the same T
        for each; the kernel is told T, and empties a microbatch whose
        offsets claim more rows, status rows_not_given); the stage reads its
        own keys (they must be given) and ignores the others, so one data
        path can feed every stage. cu arrays hold up to N+1 entries.
        num_seqs (int or a device tensor) defaults to len(cu_seqlens) - 1
        and is required for cu arrays of N+1 entries that end in unused
        slots. `load_inputs(**batch)` takes the batch dict the reference
        framework's sequence-packing loader yields: its max_seqlen is taken
        and not read (the step's is the static C*cp, a bound for every
        microbatch it holds), a local_cp_size other than None (dynamic CP)
        raises ValueError. Only shapes are read on the host; runtime/InputLoad.h states the
        whole contract. Every rung of the slot reads these inputs; a rung
        empties a microbatch it cannot hold (status total_exceeds_capacity
        or num_seqs_out_of_range), as the step at C does one past C.

        Tensors that are contiguous, on the slot's device and of the input's
        dtype are copied, with num_seqs, by one launch of the runtime's
        gather kernel; any other is converted by its own Tensor.copy_. Nothing
        waits: the copies are queued on the current stream, which keeps the
        given tensors' memory from reuse until they have run (PyTorch's
        caching allocator reuses freed blocks in stream order). On the CPU
        the same copies (the gather's host form) are done when it returns."""
        self._loader.load(tokens, labels, loss_mask, position_ids, cu_seqlens,
                          cu_seqlens_padded, num_seqs, max_seqlen, local_cp_size)
