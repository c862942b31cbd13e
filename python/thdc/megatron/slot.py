"""A GraphStep's buffer sets: StepSlot, the inputs and the one output buffer
of one microbatch in flight, and SlotRung, a slot at one rung of the
capacity ladder and one CP size (the kernel that fills the buffer, and the
batch and PackedSeqParams that view it)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from .. import planner
from .._checks import _check_int, _import_torch
from .._thdc import Gather, describe_status
from . import _broadcast, _exact, _views
from ._buffers import _ALIGNMENT, _HEADER_FIELDS, _header_words, _output_layout
from ._delegate import Delegated, DelegatedValue
from ._views import LinearChunks
from .loader import InputLoader, _refuse_unknown

if TYPE_CHECKING:
    import torch

    from .packed_seq_params import _FallbackPackedSeqParams as PackedSeqParams
    from .step import GraphStep
else:
    torch = _import_torch("thdc.megatron")


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
        self.output_bytes = slot.buffer[_ALIGNMENT:_ALIGNMENT + nbytes]
        self._output_list = [
            self.output_bytes[o:o + a.shape[0] * size].view(getattr(torch, a.dtype))
            for a, o, size in layout]
        self.load_inputs = slot._loader.load
        self.outputs = kernel(*self._input_list, out=self._output_list, device=device.index)
        # The header this rung writes with its outputs and expects to read
        # (the run above wrote the buffer: its header too), and, where other
        # TP ranks may send, this rung's outputs for an empty microbatch (the
        # run above, on the zeroed inputs): what a receiver keeps when the
        # header disagrees.
        self.header = torch.tensor(_header_words(step, C, N, cp, index, layout),
                                   dtype=torch.int32, device=device)
        slot.header.copy_(self.header)
        slot.last_run = self
        self.empty = self.output_bytes.clone() if step.tp > 1 else None
        if step.on_host:
            self.run = self._run_on_host
            self.wrote = self._wrote_on_host
            self.check_async = self._check_on_host

        # What the model gets (_views): the batch, each attribute view of
        # thdc.stages.ATTRIBUTE_VIEWS (None where the options leave it out),
        # and the PackedSeqParams, with dynamic CP's fields (the process
        # group looked up once).
        out = self.outputs
        self.batch = _views.batch_views(self, out)
        self.padding_mask_full = self.batch["padding_mask"]
        self.padding_mask_shard = _views.padding_mask_shard(self)
        for name, view in _views.attribute_views(self, out).items():
            setattr(self, name, view)
        self.dynamic = _views.dynamic_fields(self)
        self.packed_seq_params = _views.packed_seq_params(self, out, self.seq_idx, self.dynamic)
        # exact_rows's entry numbers 0..N (int64: times max_seqlen).
        self.entries = torch.arange(N + 1, dtype=torch.int64, device=device)

    def _variant_for(self, cp_size) -> "SlotRung":
        """The slot at this rung and CP size cp_size."""
        return self.slot.variant(cp_size, self.index)

    def _name(self) -> str:
        """This view in messages: the rung, its sizes and, with dynamic CP,
        its CP size."""
        name = f"rung {self.index} (C = {self.C}, N = {self.N})"
        return name + f" at CP size {self.cp}" if self.step.dynamic_cp else name

    def wrote(self, stream=None, force: bool = False) -> None:
        """Records that this rung (at its CP size) wrote the slot's buffer
        last: its header into the buffer's, on the device after its outputs
        (on `stream` when given), so that a captured run records it too; and
        on the host, slot.last_run, which stays None once a write has been
        captured (the graph's replays write the buffer unseen by the
        host). force: write the header even where the host knows the view
        wrote it last (a broadcast has since put the sender's there)."""
        slot = self.slot
        if stream is None:
            capturing = torch.cuda.is_current_stream_capturing()
            # The host knows the buffer holds this view's header already (it
            # wrote it last, and nothing was captured): no copy, which is
            # most of the call's host time for a step run eagerly.
            if slot.last_run is self and not capturing and not force:
                return
            slot.header.copy_(self.header)
        else:
            with torch.cuda.stream(_torch_stream(stream, self.step.device)):
                capturing = torch.cuda.is_current_stream_capturing()
                if slot.last_run is self and not capturing and not force:
                    return
                slot.header.copy_(self.header)
        if slot.last_run is not None:
            slot.last_run = None if capturing else self

    def _wrote_on_host(self, stream=None, force: bool = False) -> None:
        """_wrote for a step on the CPU, which has no graphs: the host always
        knows."""
        self.slot.header.copy_(self.header)
        self.slot.last_run = self

    def run(self, stream=None) -> Tuple[dict, "PackedSeqParams"]:
        """Launches the step on the static inputs (capturable: no allocation,
        no synchronisation) and returns the static batch and parameters. On
        the CPU it runs the host code and returns when done; a stream there
        raises ValueError. The slot's buffer then holds this rung's outputs,
        and its header says so, until another rung of the slot runs."""
        self.kernel(*self._input_list, out=self._output_list, stream=stream,
                    device=self.step.device.index)
        self.wrote(stream)
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
        last = self.slot.last_run
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

    # What the model gets, and the recipes that read a run (their modules
    # say how): functions of the rung, its methods.
    restore_cp_order = _views.restore_cp_order
    exact_rows = _exact.exact_rows
    broadcast = _broadcast.broadcast


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
        device, spec = step.device, step.spec
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
        layouts = {key: _output_layout(s) for key, s in step.variant_specs.items()}
        largest = max(size for _, size in layouts.values())
        self.buffer = torch.zeros(_ALIGNMENT + largest, dtype=torch.uint8, device=device)
        self.header = self.buffer[:4 * len(_HEADER_FIELDS)].view(torch.int32)
        # The view (SlotRung) whose outputs the buffer holds, as the host
        # knows it: set by each run (SlotRung.wrote), None for good once a
        # run has been captured in a CUDA graph.
        self.last_run = None
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
                                                  step.variant_specs[size, r],
                                                  *layouts[size, r], cp=size)
        self.rungs = tuple(SlotRung(self, i, step.kernels[i], step.specs[i],
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
        if self.last_run is None:
            views = ("slot.rung(r)" if not self.step.dynamic_cp
                     else "slot.variant(cp_size, r)")
            raise ValueError(
                f"{what}: slot {self.index} has {len(self.variants)} views (rungs"
                f"{' and CP sizes' if self.step.dynamic_cp else ''}) sharing its buffer, and a run "
                f"captured in a CUDA graph hides which one wrote it last: pass the view that "
                f"ran, {views}")
        return self.last_run

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
        size = self.step.check_cp_size(cp_size)
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
