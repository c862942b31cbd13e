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
arguments and 7-tuple, on GraphStep (python/thdc/_sequence_packing.py):
the step's options from the config fields it reads, TP rank 0 reading the
iterator and broadcasting, a ring of slots across calls.

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

import dataclasses
import inspect
from types import SimpleNamespace
from typing import Optional, Tuple

import thdc
from . import stages
from ._loader import InputLoader, _refuse_unknown  # noqa: F401 (thdc.megatron.InputLoader)

torch = thdc._import_torch("thdc.megatron")

@dataclasses.dataclass
class _FallbackPackedSeqParams:
    """The fields of megatron-core's PackedSeqParams that THD attention reads."""

    qkv_format: Optional[str] = None
    cu_seqlens_q: Optional[torch.Tensor] = None
    cu_seqlens_kv: Optional[torch.Tensor] = None
    cu_seqlens_q_padded: Optional[torch.Tensor] = None
    cu_seqlens_kv_padded: Optional[torch.Tensor] = None
    max_seqlen_q: Optional[int] = None
    max_seqlen_kv: Optional[int] = None
    local_cp_size: Optional[int] = None
    cp_group: Optional[object] = None
    total_tokens: Optional[int] = None
    seq_idx: Optional[torch.Tensor] = None
    tokens_per_sample: Optional[int] = None
    pad_between_seqs: Optional[bool] = None
    cp_partition_mode: str = "zigzag"


_FallbackPackedSeqParams.__name__ = _FallbackPackedSeqParams.__qualname__ = "PackedSeqParams"
# megatron-core is imported where its class is first needed (a step's
# PackedSeqParams, or these names read), not with this module: importing it
# takes seconds and prints warnings on a machine that only plans or loads.
_MEGATRON_CORE = None


def _megatron_core():
    """(PackedSeqParams, USING_MEGATRON_CORE, MEGATRON_CORE_IMPORT_ERROR):
    megatron-core's class when it is installed, else the same fields here;
    the import is tried once."""
    global _MEGATRON_CORE
    if _MEGATRON_CORE is None:
        try:
            from megatron.core.packed_seq_params import PackedSeqParams as found

            _MEGATRON_CORE = (found, True, None)
        except Exception as error:  # ImportError, or a megatron-core that fails to import
            _MEGATRON_CORE = (_FallbackPackedSeqParams, False,
                              f"{type(error).__name__}: {error}")
    return _MEGATRON_CORE


_LAZY = ("PackedSeqParams", "USING_MEGATRON_CORE", "MEGATRON_CORE_IMPORT_ERROR")


def __getattr__(name):
    if name in _LAZY:
        return _megatron_core()[_LAZY.index(name)]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


CONVENTIONS = ("graph", "compact")
STAGES = tuple(stages.STAGES)
CP_MODES = stages.CP_MODES
_DATA_KEYS = ("tokens", "labels", "position_ids", "loss_mask")
# Each output starts on this boundary inside the slot's one output buffer.
_ALIGNMENT = 256
# The broadcast header: the first _ALIGNMENT bytes of a slot's buffer, ahead
# of the outputs, say which layout the sending TP rank ran, one int32 per
# field; each receiver compares them with its own on the device
# (SlotRung.broadcast). "layout" is a fingerprint of the output layout and
# of the options that change what the outputs hold.
_HEADER_FIELDS = ("magic", "C", "N", "cp", "cp_rank", "stage", "rung", "layout")
_HEADER_MAGIC = 0x74686463  # "thdc"
# The status bit a receiver sets when the header is not its own.
_LAYOUT_MISMATCH = thdc.STATUS_BITS["layout_mismatch"]


def packed_seq_params_fields(cls=None) -> Tuple[str, ...]:
    """The fields the PackedSeqParams class (default: the installed one)
    accepts at construction."""
    cls = _megatron_core()[0] if cls is None else cls
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)
    parameters = inspect.signature(cls).parameters.values()
    return tuple(p.name for p in parameters
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


# Fields whose value changes what the params mean, and what a class without
# the field means by default: such a field on a class that lacks it is
# refused with another value (the class cannot say it); every other field
# a class lacks is left out (its release does not read it: a release
# without cp_partition_mode, 0.19.2, reads no CP layout, so a contiguous
# step's params are still right there).
_MEANING_WITHOUT_FIELD = {
    "pad_between_seqs": (None, False, "the 'compact' convention; use convention='graph'"),
}


def make_packed_seq_params(cls=None, **fields):
    """A PackedSeqParams (default: the installed class) with the given fields
    the class declares. A field it lacks is left out, unless its value says
    what the class cannot: `pad_between_seqs=True` (the 'compact'
    convention) on a release without the field raises ValueError."""
    cls = _megatron_core()[0] if cls is None else cls
    known = set(packed_seq_params_fields(cls))
    for name, (*implied, what) in _MEANING_WITHOUT_FIELD.items():
        if name in fields and name not in known and fields[name] not in implied:
            raise ValueError(f"{cls.__module__}.{cls.__name__} has no {name} field, so it "
                             f"cannot describe {what}")
    return cls(**{k: v for k, v in fields.items() if k in known})


def slot_count(global_batch_size: int, max_seqlen: int, C: int, cp: int = 1, *, dp: int = 1,
               N: Optional[int] = None, vpp_group: Optional[int] = None,
               num_microbatches: int = 0) -> int:
    """How many buffer sets (graph slots) a global batch can need: the
    planner's bound on its microbatches (thdc.planner.max_microbatches), or
    the runtime count when that is larger (S12)."""
    from . import planner

    bound = planner.max_microbatches(global_batch_size, max_seqlen, C, cp, dp,
                                     max_packed_sequences=N, vpp_group=vpp_group)
    return planner.graph_capture_count(num_microbatches, bound)


def _holds(rows: int, seqs: int, capacity: int, N: int) -> bool:
    """Whether a step of `capacity` rows (C*cp) and N cu entries past the
    first holds a microbatch of `rows` rows and `seqs` sequences: N-1 and
    the dummy over a tail, or N filling every row (thd.validate's
    tail_slot, docs/semantics.md)."""
    return rows <= capacity and (seqs <= N - 1 or (seqs == N and rows == capacity))


def _check_ladder(capacities, sequence_capacities, C: int, N: int):
    """The ladder's rows per CP rank and sequence capacities as tuples of
    ints, the top rung (C, N): ValueError or TypeError naming what is wrong
    (docs/capacity-ladder.md)."""
    def ints(values, name):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"{name} must be a sequence of ints; got {type(values).__name__}")
        return tuple(thdc._check_int(v, f"{name}[{i}]") for i, v in enumerate(values))

    rows = (C,) if capacities is None else ints(capacities, "capacities")
    if not rows:
        raise ValueError("capacities must name at least one rung (the top one is C)")
    for i in range(1, len(rows)):
        if rows[i] < rows[i - 1]:
            raise ValueError(f"capacities must not decrease; got {list(rows)}")
    if rows[-1] != C:
        raise ValueError(f"the ladder's top rung is the step's C = {C}; capacities ends "
                         f"at {rows[-1]}")
    if sequence_capacities is None:
        seqs = (N,) * len(rows)
    else:
        seqs = ints(sequence_capacities, "sequence_capacities")
        if len(seqs) != len(rows):
            raise ValueError(f"sequence_capacities has {len(seqs)} entries; capacities has "
                             f"{len(rows)} rungs")
        for i in range(1, len(seqs)):
            if seqs[i] < seqs[i - 1]:
                raise ValueError(f"sequence_capacities must not decrease (a rung with more "
                                 f"rows holds at least as many sequences); got {list(seqs)}")
    for i in range(1, len(rows)):
        if rows[i] == rows[i - 1] and seqs[i] <= seqs[i - 1]:
            raise ValueError(f"rungs {i - 1} and {i} have C = {rows[i]} and N = {seqs[i - 1]}, "
                             f"{seqs[i]}: a rung of equal C must hold more sequences")
    if seqs[-1] != N:
        raise ValueError(f"the ladder's top rung is the step's N = {N}; "
                         f"sequence_capacities ends at {seqs[-1]}")
    return rows, seqs


def _check_cp_sizes(cp_sizes, cp: int, cp_rank: int):
    """Dynamic CP's sizes as a tuple of ints, increasing, the largest the
    step's cp, each a sub-group the rank is in (the block of that many ranks
    holding cp_rank lies within the cp ranks); None when not given."""
    if cp_sizes is None:
        return None
    if isinstance(cp_sizes, (str, bytes)) or not hasattr(cp_sizes, "__iter__"):
        raise TypeError(f"cp_sizes must be a sequence of ints; got {type(cp_sizes).__name__}")
    sizes = tuple(thdc._check_int(v, f"cp_sizes[{i}]") for i, v in enumerate(cp_sizes))
    if not sizes or any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < 1:
        raise ValueError(f"cp_sizes must be increasing sizes >= 1; got {list(sizes)}")
    if sizes[-1] != cp:
        raise ValueError(f"the largest CP size is the step's cp = {cp} (the static maximum); "
                         f"cp_sizes ends at {sizes[-1]}")
    for size in sizes:
        start = cp_rank - cp_rank % size
        if start + size > cp:
            raise ValueError(f"cp_sizes has {size}, but rank {cp_rank} of {cp} is in no "
                             f"sub-group of {size} ranks (its block {start}..{start + size - 1} "
                             f"passes the last rank); leave {size} out for this rank "
                             f"(thdc.planner.dynamic_cp_sizes(..., rank={cp_rank}))")
    return sizes


@dataclasses.dataclass(frozen=True)
class StepOptions:
    """GraphStep's options (GraphStep documents each), checked once, when
    made: every value of its type and range (TypeError, ValueError), the
    stage's options together (thdc.stages), and the device resolved to a
    torch.device ("cuda" to the current device, "cpu" for the host code).
    GraphStep(...) makes one of its arguments; `step.config` is it."""

    C: int
    N: int
    cp: int = 1
    cp_rank: int = 0
    stage: str = "first_last"
    cp_mode: str = "zigzag"
    seq_idx: bool = True
    rope_table_rows: Optional[int] = None
    cp_order_index: bool = False
    slots: int = 1
    tp: int = 1
    tp_rank: int = 0
    sequence_parallel: bool = False
    bundle: object = None
    device: object = None
    convention: str = "graph"
    cache_dir: str = ""
    capacities: Optional[Tuple[int, ...]] = None
    sequence_capacities: Optional[Tuple[int, ...]] = None
    dummy_length: Optional[int] = None
    multiple: object = None
    cp_sizes: Optional[Tuple[int, ...]] = None
    cp_groups: object = None

    def __post_init__(self):
        C, N, cp, cp_rank, tp, tp_rank = (self.C, self.N, self.cp, self.cp_rank, self.tp,
                                          self.tp_rank)
        slots, seq_idx, cp_order_index = self.slots, self.seq_idx, self.cp_order_index
        sequence_parallel, rope_table_rows, bundle = (self.sequence_parallel,
                                                      self.rope_table_rows, self.bundle)
        stage, cp_mode, convention, cache_dir = (self.stage, self.cp_mode, self.convention,
                                                 self.cache_dir)
        device = self.device
        C, N = thdc._check_int(C, "C"), thdc._check_int(N, "N")
        cp, cp_rank = thdc._check_int(cp, "cp"), thdc._check_int(cp_rank, "cp_rank")
        tp, tp_rank = thdc._check_int(tp, "tp"), thdc._check_int(tp_rank, "tp_rank")
        slots = thdc._check_int(slots, "slots")
        for name, value in (("seq_idx", seq_idx), ("cp_order_index", cp_order_index),
                            ("sequence_parallel", sequence_parallel)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool; got {type(value).__name__}")
        if rope_table_rows is not None:
            rope_table_rows = thdc._check_int(rope_table_rows, "rope_table_rows")
            if rope_table_rows < 1:
                raise ValueError(f"rope_table_rows must be >= 1; got {rope_table_rows}")
        capacities, sequence_capacities = _check_ladder(
            self.capacities, self.sequence_capacities, C, N)
        if bundle is not None and len(capacities) > 1:
            if isinstance(bundle, (str, bytes)) or not hasattr(bundle, "__len__"):
                raise TypeError(f"a ladder of {len(capacities)} rungs takes one bundle per "
                                f"rung: bundle must be a sequence of {len(capacities)} paths")
            if len(bundle) != len(capacities):
                raise ValueError(f"bundle has {len(bundle)} paths; the ladder has "
                                 f"{len(capacities)} rungs")
            bundle = tuple(thdc._check_path(b, f"bundle[{i}]") for i, b in enumerate(bundle))
        elif bundle is not None:
            bundle = thdc._check_path(bundle, "bundle")
        for name, value in (("stage", stage), ("cp_mode", cp_mode),
                            ("convention", convention), ("cache_dir", cache_dir)):
            thdc._check_str(value, name)
        dummy_length = self.dummy_length
        if dummy_length is not None:
            dummy_length = thdc._check_int(dummy_length, "dummy_length")
        stages.check_options(stage, cp_mode, rope_table_rows is not None, dummy_length)
        if convention not in CONVENTIONS:
            raise ValueError(f"convention must be one of {CONVENTIONS}; got {convention!r}")
        for B, N_rung in zip(capacities, sequence_capacities):
            try:
                stages.check_params(B, cp, N_rung, cp_mode, rope_table_rows, dummy_length)
            except ValueError as error:
                raise ValueError(f"rung (C={B}, N={N_rung}): {error}"
                                 if len(capacities) > 1 else str(error)) from None
        if not 0 <= cp_rank < cp:
            raise ValueError(f"cp_rank must be in [0, {cp}); got {cp_rank}")
        cp_sizes = _check_cp_sizes(self.cp_sizes, cp, cp_rank)
        if cp_sizes is not None and len(cp_sizes) > 1 and bundle is not None:
            raise ValueError(f"cp_sizes={list(cp_sizes)}: a step of several CP sizes compiles "
                             f"one kernel per size and rung through the JIT; bundles for it "
                             f"are not supported, so pass bundle=None")
        for size in (cp_sizes or (cp,))[:-1]:
            for B, N_rung in zip(capacities, sequence_capacities):
                try:
                    stages.check_params(B, size, N_rung, cp_mode, rope_table_rows, dummy_length)
                except ValueError as error:
                    raise ValueError(f"CP size {size}, C={B}, N={N_rung}: {error}") from None
        cp_groups = self.cp_groups
        if cp_groups is not None and not (callable(cp_groups) or isinstance(cp_groups, dict)):
            raise TypeError(f"cp_groups must map a CP size to its process group (a dict, or a "
                            f"callable such as megatron-core's parallel_state."
                            f"get_dynamic_data_context_parallel_groups(group_size=...)); got "
                            f"{type(cp_groups).__name__}")
        if tp < 1 or not 0 <= tp_rank < tp:
            raise ValueError(f"tp must be >= 1 and tp_rank in [0, tp); got tp={tp}, "
                             f"tp_rank={tp_rank}")
        multiple = self.multiple
        if multiple is not None:
            # A low-precision recipe's graph-mode condition on every rung's C
            # (thdc.planner.check_capacity; the reference states it once).
            from . import planner

            if isinstance(multiple, bool) or not isinstance(multiple, (int, str)):
                raise TypeError(f"multiple must be an int, a recipe name of "
                                f"thdc.planner.LOW_PRECISION_MULTIPLES or None; got "
                                f"{type(multiple).__name__}")
            for B in capacities:
                try:
                    planner.check_capacity(B, tp, sequence_parallel, multiple)
                except ValueError as error:
                    message = str(error).replace("check_capacity: ", "", 1)
                    raise ValueError(f"multiple={multiple!r}: " + (
                        f"rung (C={B}): {message}" if len(capacities) > 1 else message)
                    ) from None
        for B in capacities:
            if sequence_parallel and B % tp:
                raise ValueError(f"sequence parallelism shards the C = {B} rows over tp = "
                                 f"{tp} ranks; " + ("C" if B == C else "every rung")
                                 + " must be a multiple of tp")
        if slots < 1:
            raise ValueError(f"slots must be >= 1; got {slots}")
        if not (device is None or isinstance(device, (str, torch.device))):
            try:
                device = thdc._check_int(device, "device")
            except TypeError:
                raise TypeError("device must be a torch.device, a str such as 'cuda:0' or "
                                f"an int ordinal; got {type(device).__name__}") from None
        try:
            resolved = torch.device("cuda" if device is None else device)
        except RuntimeError as error:  # torch's own word on a malformed string
            raise ValueError(f"device must be 'cpu' or a CUDA device; got {device!r}: "
                             f"{error}") from None
        # On the CPU the step is the pipeline's host code on CPU tensors:
        # no streams, no graphs, and no call into torch.cuda.
        on_host = resolved.type == "cpu"
        if on_host:
            resolved = torch.device("cpu")
        elif resolved.type != "cuda":
            raise ValueError(f"device must be 'cpu' or a CUDA device; got {device!r}")
        elif not torch.cuda.is_available():
            raise RuntimeError(
                f"GraphStep(device={device!r}): PyTorch sees no CUDA device here"
                + (" (the default is the current CUDA device)" if device is None else "")
                + "; pass device='cpu' to run the pipeline's host code on CPU tensors")
        elif resolved.index is None:  # "cuda": the current device, as torch has it
            resolved = torch.device("cuda", torch.cuda.current_device())
        for name, value in (("C", C), ("N", N), ("cp", cp), ("cp_rank", cp_rank), ("tp", tp),
                            ("tp_rank", tp_rank), ("slots", slots),
                            ("rope_table_rows", rope_table_rows), ("bundle", bundle),
                            ("device", resolved), ("capacities", capacities),
                            ("sequence_capacities", sequence_capacities),
                            ("dummy_length", dummy_length), ("cp_sizes", cp_sizes)):
            object.__setattr__(self, name, value)

    @property
    def dynamic_cp(self) -> bool:
        """Whether the step has a CP size per microbatch (cp_sizes given)."""
        return self.cp_sizes is not None

    @property
    def sizes(self) -> Tuple[int, ...]:
        """The CP sizes the step runs, smallest first: cp_sizes, or (cp,)."""
        return (self.cp,) if self.cp_sizes is None else self.cp_sizes

    def local_cp_rank(self, size: int) -> int:
        """The rank's CP rank in its sub-group of `size` ranks (the block of
        that many ranks holding cp_rank)."""
        return self.cp_rank % size

    def cp_group(self, size: int):
        """The process group of the rank's sub-group of `size` ranks, from
        cp_groups (None without it). A group with rank() and size() must be
        that sub-group: `size` ranks, this rank at local_cp_rank(size), the
        rank the kernel slices for."""
        groups = self.cp_groups
        if groups is None:
            return None
        if isinstance(groups, dict):
            if size not in groups:
                raise ValueError(f"cp_groups has no group for CP size {size}; it has "
                                 f"{sorted(groups)}")
            group = groups[size]
        else:
            try:
                group = groups(group_size=size)
            except (KeyError, AssertionError) as error:
                # megatron-core's parallel_state has groups only for the
                # sizes initialize_model_parallel made (parallel_state.py:
                # 421-441, 921-947 on dev).
                raise ValueError(
                    f"cp_groups gives no process group for CP size {size} "
                    f"({type(error).__name__}: {error}); megatron-core makes them in "
                    f"initialize_model_parallel(dynamic_context_parallel=True, "
                    f"min_dynamic_context_parallel_size=...), for the powers of two below "
                    f"the largest one <= the DP x CP size, and that size") from None
        size_of, rank_of = getattr(group, "size", None), getattr(group, "rank", None)
        if callable(size_of) and callable(rank_of):
            local = self.local_cp_rank(size)
            if (size_of(), rank_of()) != (size, local):
                raise ValueError(
                    f"cp_groups' group for CP size {size} has {size_of()} ranks with this "
                    f"rank at {rank_of()}; the step slices for rank {local} of {size} "
                    f"(cp_rank {self.cp_rank} mod {size})")
        return group

    @property
    def rungs(self) -> Tuple[Tuple[int, int], ...]:
        """(C, N) of every rung of the ladder, smallest first; (C, N) alone
        without one."""
        return tuple(zip(self.capacities, self.sequence_capacities))

    @property
    def pipeline_options(self) -> dict:
        """The options of thdc.stages.pipeline(stage, ...) they ask for."""
        options = dict(cp_mode=self.cp_mode, seq_idx=self.seq_idx,
                       rope=self.rope_table_rows is not None,
                       cp_order_index=self.cp_order_index)
        if self.dummy_length is not None:
            options["dummy_length"] = self.dummy_length
        return options


class GraphStep:
    """The THD step of one microbatch for one CP rank, on static buffers.

    C: rows per CP rank (the graph's static sequence length); N: sequence
    capacity including the dummy (cu arrays have N+1 entries: at most N-1
    real sequences and the dummy over the tail, or N that fill all C*cp
    rows); cp, cp_rank: the context-parallel size and this rank.
    stage: "first", "middle", "last" or "first_last" (the module's
    documentation). cp_mode: "zigzag" (TransformerEngine's load-balanced
    layout) or "contiguous". seq_idx: compute `seq_idx` ([C*cp], every
    rank's rows). rope_table_rows: the rows of the model's RoPE frequency
    table, to compute each local row's table row (`rope_rows`, [C]).
    cp_order_index: compute the index that puts every rank's gathered rows
    back into sequence order (`restore_cp_order`). slots: buffer sets for
    microbatches in flight. tp, tp_rank, sequence_parallel: the tensor
    parallel group (only the padding mask's shard depends on them).
    bundle: a bundle of the pipeline `thdc.stages.pipeline(...)` writes for
    these options, compiled for these parameters (needed where thdc has no
    JIT); else the pipeline is compiled through the JIT. device: the CUDA
    device (default: the current one), or "cpu" for the pipeline's host code
    on CPU tensors (the bundle's, or the JIT's for the host), which gives the
    same outputs but has no streams or graphs. convention: "graph" or
    "compact". capacities, sequence_capacities: a capacity ladder
    (docs/capacity-ladder.md), rows per CP rank B_1 <= ... <= C and their
    N_1 <= ... <= N (default N for every rung; rungs of equal rows hold
    more sequences): one kernel per rung (`step.kernels`; `bundle` then one
    path per rung), and `slot.rung(r)` the slot at rung r, padded to its B
    rows with N_r + 1 offsets; `step.rung_index(rows, seqs)` the smallest
    rung that holds a microbatch. dummy_length: cover the tail with dummy
    sequences of that many rows over the spare cu entries instead of one
    (a multiple of 2*cp under zigzag CP): attention over a tail of d rows
    costs about d*dummy_length instead of d^2 (docs/capacity-ladder.md).
    multiple: a low-precision recipe's token multiple m (an int, or a name
    of thdc.planner.LOW_PRECISION_MULTIPLES: "fp8", "mxfp8", "hybridep",
    ...): every rank feeds its GEMMs exactly C rows (C/tp under sequence
    parallelism), so C and every rung must be a multiple of m (m*tp with
    sequence parallelism); ValueError otherwise. Nothing else changes:
    sequences are not rounded to m (docs/megatron.md).
    cp_sizes, cp_groups: dynamic CP (docs/megatron.md, "Dynamic context
    parallelism"): the CP sizes a microbatch can have, increasing, the last
    cp (cp is then the DP x CP rank count and cp_rank the rank's index in
    it); one kernel per size and rung, `slot.variant(size, rung)` the slot
    at one, and `step(**batch, local_cp_size=size)` picks it. cp_groups maps
    a size to the sub-group's process group for PackedSeqParams.cp_group (a
    dict, or a callable taking group_size=).

    The step's own inputs, outputs, batch, packed_seq_params, run(),
    load_inputs(), ... are those of its first slot (StepSlot documents them).
    """

    def __init__(
        self,
        C: int,
        N: int,
        cp: int = 1,
        cp_rank: int = 0,
        *,
        stage: str = "first_last",
        cp_mode: str = "zigzag",
        seq_idx: bool = True,
        rope_table_rows: Optional[int] = None,
        cp_order_index: bool = False,
        slots: int = 1,
        tp: int = 1,
        tp_rank: int = 0,
        sequence_parallel: bool = False,
        bundle=None,
        device=None,
        convention: str = "graph",
        cache_dir: str = "",
        capacities=None,
        sequence_capacities=None,
        dummy_length: Optional[int] = None,
        multiple=None,
        cp_sizes=None,
        cp_groups=None,
    ):
        config = StepOptions(C, N, cp, cp_rank, stage=stage, cp_mode=cp_mode, seq_idx=seq_idx,
                             rope_table_rows=rope_table_rows, cp_order_index=cp_order_index,
                             slots=slots, tp=tp, tp_rank=tp_rank,
                             sequence_parallel=sequence_parallel, bundle=bundle, device=device,
                             convention=convention, cache_dir=cache_dir,
                             capacities=capacities, sequence_capacities=sequence_capacities,
                             dummy_length=dummy_length, multiple=multiple,
                             cp_sizes=cp_sizes, cp_groups=cp_groups)
        self.config = config
        self.device, self.on_host = config.device, config.device.type == "cpu"
        C, N, cp, stage = config.C, config.N, config.cp, config.stage
        seq_idx, cp_order_index = config.seq_idx, config.cp_order_index
        rope_table_rows, bundle, cache_dir = config.rope_table_rows, config.bundle, config.cache_dir
        slots = config.slots
        self.C, self.N, self.cp, self.cp_rank = C, N, cp, config.cp_rank
        self.tp, self.tp_rank = config.tp, config.tp_rank
        self.sequence_parallel = config.sequence_parallel
        self.stage, self.cp_mode, self.convention = stage, config.cp_mode, config.convention
        self.rope_table_rows = rope_table_rows
        self.options = config.pipeline_options
        self.data_keys = stages.data_keys(stage)

        self.capacities, self.sequence_capacities = (config.capacities,
                                                     config.sequence_capacities)
        rungs = config.rungs
        bundles = bundle if isinstance(bundle, tuple) else (bundle,) * len(rungs)
        # One kernel per CP size and rung, the top rung's last: the same
        # pipeline compiled for each rung's (C, N) (docs/capacity-ladder.md
        # says why) and each size of dynamic CP (docs/megatron.md, "Dynamic
        # context parallelism").
        self.cp_sizes, self.dynamic_cp = config.sizes, config.dynamic_cp
        self.variant_kernels, self._variant_specs = {}, {}
        for size in self.cp_sizes:
            for r, ((B, N_rung), rung_bundle) in enumerate(zip(rungs, bundles)):
                kernel, spec = self._load_rung(B, N_rung, rung_bundle, size)
                self.variant_kernels[size, r] = kernel
                self._variant_specs[size, r] = spec
        self.kernels = tuple(self.variant_kernels[cp, r] for r in range(len(rungs)))
        self._specs = [self._variant_specs[cp, r] for r in range(len(rungs))]
        self.kernel, self._spec = self.kernels[-1], self._specs[-1]
        _check_memory(self, slots)
        self.slots = [StepSlot(self, i) for i in range(slots)]
        thdc.log.info("GraphStep(C=%d, N=%d, cp=%d, stage=%r): %d kernel(s) (%d rung(s) x %d "
                      "CP size(s)), %d slot(s), %.1f MiB of buffers", C, N, cp, stage,
                      len(self.variant_kernels), len(rungs), len(self.cp_sizes), slots,
                      _step_bytes(self, slots)[1] / 2**20)
        # The step itself is its first slot: with one slot GraphStep is the
        # whole API, and step.slot(0) holds the same buffers.
        self._first = self.slots[0]
        for name in _SLOT_API:
            setattr(self, name, getattr(self._first, name))
        if not self.on_host:
            torch.cuda.synchronize(self.device)

    def _rope_table_param(self, C: int, cp: int) -> int:
        """The table rows R a rung is compiled with, so that a microbatch gets
        the same RoPE rows at whichever rung it lands. thd.rope_positions
        shifts positions by the sequence's start when R exceeds the rung's
        max_seqlen C*cp (S8's absolute table), so one table serving every
        rung would switch the lower rungs to that rule. The top rung's rule
        holds for all: a table longer than the top rung's C*cp is absolute
        at every rung as it is; else each rung gets min(R, C*cp) rows, the
        relative rule, and the same clamp (a rung's positions are below its
        C*cp)."""
        rows = self.rope_table_rows
        top = self.config.rungs[-1][0] * cp
        return rows if rows > top else min(rows, C * cp)

    def _load_rung(self, C: int, N: int, bundle, cp: int):
        """The kernel of one rung at one CP size (its bundle's, or compiled)
        and its checked signature."""
        stage, cache_dir = self.stage, self.config.cache_dir
        params = {"C": C, "cp": cp, "N": N}
        if self.rope_table_rows is not None:
            params["R"] = self._rope_table_param(C, cp)
        if bundle is not None and self.on_host:
            kernel = thdc.load(bundle, backend="host", cache_dir=cache_dir)
        elif bundle is not None:
            kernel = thdc.load(bundle, backend="cuda", cache_dir=cache_dir,
                               device=self.device.index)
        elif self.on_host:
            kernel = thdc.compile(stages.pipeline(stage, **self.options), params,
                                  backend="host", cache_dir=cache_dir)
        else:
            with torch.cuda.device(self.device):
                kernel = thdc.compile(stages.pipeline(stage, **self.options), params,
                                      backend="cuda", cache_dir=cache_dir)
        compiled = {k: kernel.params.get(k) for k in params}
        if compiled != params:
            raise ValueError(f"the bundle was compiled for {compiled}, not {params}")
        spec = thdc.signature(kernel)
        expected_inputs = list(self.data_keys) + ["cu_seqlens", "cu_seqlens_padded",
                                                  "num_seqs"]
        expected_inputs += ["num_rows"] if self.data_keys else []
        expected_inputs += ["cp_rank"]
        expected_inputs += ["rows"] if self.config.cp_order_index else []
        expected_outputs = stages.outputs(stage, seq_idx=self.config.seq_idx,
                                          rope=self.options["rope"],
                                          cp_order_index=self.config.cp_order_index)
        got_inputs = [a.name for a in spec if a.direction == "input"]
        got_outputs = [a.name for a in spec if a.direction == "output"]
        if got_inputs != expected_inputs or got_outputs != expected_outputs:
            raise ValueError(
                f"the kernel is not the step for stage={stage!r} and options {self.options}: it "
                f"takes {got_inputs} and computes {got_outputs}; the step needs {expected_inputs} "
                f"-> {expected_outputs} (compile thdc.stages.pipeline() for these options)")
        if not self.on_host:
            kernel.prepare(self.device.index)
        return kernel, spec

    def rung_index(self, num_rows: int, num_seqs: int, cp_size: Optional[int] = None) -> int:
        """The smallest rung that holds a microbatch of num_rows packed rows
        (all CP ranks of its sub-group: cu_seqlens_padded[num_seqs]) and
        num_seqs sequences at CP size cp_size (default: cp), from host
        figures (the plan's; thdc.planner.ladder_plan gives the same rung);
        ValueError when none does."""
        num_rows = thdc._check_int(num_rows, "num_rows")
        num_seqs = thdc._check_int(num_seqs, "num_seqs")
        if num_rows < 0 or num_seqs < 0:
            raise ValueError(f"num_rows and num_seqs must be >= 0; got {num_rows}, {num_seqs}")
        cp = self._check_size(cp_size)
        for i, (B, N) in enumerate(self.config.rungs):  # smallest C, then smallest N
            if _holds(num_rows, num_seqs, B * cp, N):
                return i
        raise ValueError(f"no rung holds {num_rows} rows and {num_seqs} sequences at CP size "
                         f"{cp}: the top rung holds {self.C * cp} rows and {self.N - 1} "
                         f"sequences")

    def _check_size(self, cp_size) -> int:
        """A CP size of the step (default: cp), checked."""
        if cp_size is None:
            return self.cp
        if isinstance(cp_size, torch.Tensor):
            if cp_size.device.type != "cpu":
                raise ValueError(
                    f"local_cp_size is a tensor on {cp_size.device}: reading it would "
                    f"synchronise the host with the device (megatron-core's loader puts it "
                    f"there, data_schedule_utils.py:519 on dev, and reads it back, "
                    f"data_schedule.py:631); pass the plan's CP size as an int "
                    f"(thdc.planner.DynamicCpPlan.cp_sizes)")
            if cp_size.numel() != 1:
                raise ValueError(f"local_cp_size must hold one value; got shape "
                                 f"{tuple(cp_size.shape)}")
            if cp_size.dtype.is_floating_point or cp_size.dtype.is_complex \
                    or cp_size.dtype == torch.bool:
                raise TypeError(f"local_cp_size must be an integer tensor; got "
                                f"{cp_size.dtype}")
            cp_size = int(cp_size.reshape(-1)[0])
        size = thdc._check_int(cp_size, "local_cp_size")
        if size not in self.cp_sizes:
            raise ValueError(f"local_cp_size={size}: the step runs CP sizes "
                             f"{list(self.cp_sizes)}" + (
                                 "" if self.dynamic_cp else
                                 " (GraphStep(cp_sizes=...) gives a step of several, for "
                                 "dynamic context parallelism)"))
        return size

    def slot(self, microbatch: int) -> "StepSlot":
        """The buffer set of microbatch `microbatch` (slot microbatch mod K)."""
        microbatch = thdc._check_int(microbatch, "microbatch")
        if microbatch < 0:
            raise ValueError(f"microbatch must be >= 0; got {microbatch}")
        return self.slots[microbatch % len(self.slots)]

    def __call__(self, *args, **kwargs):
        """The first slot's load_inputs, then run."""
        return self._first(*args, **kwargs)


# What GraphStep gives of its first slot, bound once in GraphStep.__init__
# (plain attributes: nothing is looked up per call on the launch path).
_SLOT_API = ("inputs", "outputs", "batch", "packed_seq_params", "status", "buffer", "seq_idx",
             "rope_rows", "cp_order_index", "padding_mask_full", "padding_mask_shard", "run",
             "load_inputs", "accumulate_status", "accumulate_dropped", "describe_status", "check_async",
             "restore_cp_order", "broadcast", "exact_rows", "rung")
# What a slot gives of its top rung (the step at C), bound in StepSlot.__init__.
_RUNG_API = ("outputs", "batch", "packed_seq_params", "seq_idx", "rope_rows",
             "cp_order_index", "padding_mask_full", "padding_mask_shard", "run", "exact_rows",
             "status", "accumulate_status", "accumulate_dropped", "describe_status", "check_async",
             "restore_cp_order", "broadcast")


def _tp_shard(rows: torch.Tensor, tp: int, tp_rank: int) -> torch.Tensor:
    """The sequence-parallel shard of [1, R] rows: rows [tp_rank*R/tp,
    (tp_rank+1)*R/tp), the contiguous piece megatron-core's scatter to the
    sequence-parallel region gives TP rank tp_rank."""
    shard = rows.shape[1] // tp
    return rows[:, tp_rank * shard:(tp_rank + 1) * shard]


def _step_bytes(step: "GraphStep", slots: int) -> Tuple[int, int]:
    """The bytes one slot's buffers take (inputs, outputs with the header
    and, with tp > 1, the empty microbatch of every rung and CP size that a
    broadcast receiver keeps), and the whole step's."""
    inputs = sum(a.shape[0] * _element_size(a) for a in step._spec if a.direction == "input")
    layouts = [_output_layout(s)[1] for s in step._variant_specs.values()]
    per_slot = inputs + _ALIGNMENT + max(layouts) + (sum(layouts) if step.tp > 1 else 0)
    return per_slot, per_slot * slots


def _check_memory(step: "GraphStep", slots: int) -> None:
    """MemoryError before any buffer is allocated when the step's buffers
    need more than the device has free (on the CPU, the host's available
    memory): C, N, cp and slots name sizes the caller can lower."""
    per_slot, total = _step_bytes(step, slots)
    if step.on_host:
        import os

        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # no such figure here
            return
        where = "available on the host"
    else:
        free = torch.cuda.mem_get_info(step.device)[0]
        where = f"free on {step.device}"
    if total > free:
        gib = lambda n: f"{n / 2**30:.2f} GiB"
        raise MemoryError(
            f"GraphStep(C={step.C}, N={step.N}, cp={step.cp}, slots={slots}): its buffers "
            f"take {gib(total)} ({gib(per_slot)} a slot), more than the {gib(free)} {where}; "
            f"lower C, N or slots")


def _element_size(arg) -> int:
    """The bytes of one element of a signature argument."""
    return torch.empty(0, dtype=getattr(torch, arg.dtype)).element_size()


def _output_layout(spec):
    """(arg, byte offset, element size) of every output in a slot's one
    buffer, and the bytes it needs: each output on an _ALIGNMENT boundary."""
    layout, offset = [], 0
    for a in spec:
        if a.direction == "output":
            size = _element_size(a)
            layout.append((a, offset, size))
            offset += -(-a.shape[0] * size // _ALIGNMENT) * _ALIGNMENT
    return layout, max(offset, _ALIGNMENT)


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

    def __init__(self, step: GraphStep, index: int):
        self.step, self.index = step, index
        device, spec = step.device, step._spec
        make = lambda a: torch.zeros(a.shape, dtype=getattr(torch, a.dtype), device=device)
        self.inputs = SimpleNamespace(**{a.name: make(a) for a in spec if a.direction == "input"})
        self.inputs.cp_rank.fill_(step.cp_rank)
        if hasattr(self.inputs, "rows"):  # the row numbers thd.cp_unslice permutes
            self.inputs.rows.copy_(torch.arange(self.inputs.rows.numel(), dtype=torch.int32))
        gather = thdc._thdc.Gather(None if step.on_host else device.index,
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
        for name in _RUNG_API:
            setattr(self, name, getattr(self._top, name))

    def rung(self, index: int) -> "SlotRung":
        """The slot's view at rung `index` of the ladder (0: the smallest;
        -1 or len - 1: the top one, the slot itself)."""
        index = thdc._check_int(index, "rung")
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
        raises ValueError. Only shapes are read on the host; thdc._thdc.InputGather states the
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
        # The header this rung sends and expects, and, where other TP ranks
        # may send, this rung's outputs for an empty microbatch (the run
        # above, on the zeroed inputs): what a receiver keeps when the
        # header disagrees.
        self._header = torch.tensor(_header_words(step, C, N, cp, index, layout),
                                    dtype=torch.int32, device=device)
        self._empty = self._output_bytes.clone() if step.tp > 1 else None
        if step.on_host:
            self.run = self._run_on_host
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

    def run(self, stream=None) -> Tuple[dict, "PackedSeqParams"]:
        """Launches the step on the static inputs (capturable: no allocation,
        no synchronisation) and returns the static batch and parameters. On
        the CPU it runs the host code and returns when done; a stream there
        raises ValueError."""
        self.kernel(*self._input_list, out=self._output_list, stream=stream,
                    device=self.step.device.index)
        return self.batch, self.packed_seq_params

    def _run_on_host(self, stream=None) -> Tuple[dict, "PackedSeqParams"]:
        """run for a step on the CPU: the host code, done when it returns."""
        if stream is not None:
            raise ValueError(
                f"run(stream=...): the step runs on the CPU, which has no streams; got "
                f"stream={stream!r} (a stream needs GraphStep(..., device='cuda:N'))")
        self.kernel(*self._input_list, out=self._output_list)
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
        from . import describe_status
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
            from . import describe_status
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
        only (contiguous CP puts a rank's real rows after others' tails)."""
        step = self.step
        cp, C, N = self.cp, self.C, self.N
        num_rows = thdc._check_int(num_rows, "num_rows")
        num_seqs = thdc._check_int(num_seqs, "num_seqs")
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
        max_seqlen = thdc._check_int(max_seqlen, "max_seqlen")
        if not 1 <= max_seqlen <= C * cp:
            raise ValueError(f"max_seqlen must be in [1, C*cp = {C * cp}]; got {max_seqlen}")
        if step.sequence_parallel and local % step.tp:
            raise ValueError(f"sequence parallelism shards the rank's {local} rows over tp = "
                             f"{step.tp} ranks: num_rows/cp must be a multiple of tp")
        out = self.outputs
        entries = max(num_seqs, 1) + 1
        ok = out.status == 0
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
        out.status.bitwise_or_(lost.to(torch.int32) * thdc.STATUS_BITS["rows_not_given"]
                               + disagree.to(torch.int32) * thdc.STATUS_BITS["figures_disagree"])
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

        The buffer starts with a header naming the layout the sender ran
        (C, N, CP size and rank, stage, rung, a fingerprint of the output
        layout). Each receiver compares it with its own on the device: on a
        mismatch it keeps an empty microbatch (its own layout, no rows to
        train, loss mask 0) and sets the status bit `layout_mismatch`,
        rather than read rows laid out for another step. The whole buffer
        is sent whichever rung or CP size ran, so the counts agree between
        TP ranks of the same step that picked different ones; a TP rank
        whose step has a buffer of another size makes the counts disagree,
        which only the collective itself can notice."""
        import torch.distributed as dist

        src = thdc._check_int(src, "src")
        if self._empty is None:
            raise ValueError("broadcast: the step was made for one TP rank (tp=1); the "
                             "broadcast recipe needs GraphStep(..., tp=, tp_rank=)")
        slot = self.slot
        sending = dist.get_rank() == src
        if sending:
            slot._header.copy_(self._header)
        dist.broadcast(slot.buffer, src=src, group=group)
        if sending:
            return
        bad = (slot._header != self._header).any()
        self._output_bytes.copy_(torch.where(bad, self._empty, self._output_bytes))
        self.outputs.status.bitwise_or_(bad.to(torch.int32) * _LAYOUT_MISMATCH)


def _header_words(step: GraphStep, C: int, N: int, cp: int, rung: int, layout) -> list:
    """The broadcast header of one rung and CP size (_HEADER_FIELDS)."""
    import zlib

    described = repr(([(a.name, a.dtype, a.shape[0], offset) for a, offset, _ in layout],
                      step.cp_mode, sorted(step.options.items())))
    fingerprint = zlib.crc32(described.encode())
    words = dict(magic=_HEADER_MAGIC, C=C, N=N, cp=cp, cp_rank=step.config.local_cp_rank(cp),
                 stage=STAGES.index(step.stage), rung=rung, layout=fingerprint)
    # As int32: the fingerprint's top bit is its sign.
    return [(words[f] + 2**31) % 2**32 - 2**31 for f in _HEADER_FIELDS]


# A slot's load_inputs, then run (its top rung's): SlotRung's own method,
# which reads only the two attributes a slot binds.
StepSlot.__call__ = SlotRung.__call__


# The reference framework's function where it calls one (its arguments, its
# 7-tuple), on GraphStep: python/thdc/_sequence_packing.py.
from ._sequence_packing import (  # noqa: E402
    SEQUENCE_PACKING, ConfigError, SequencePackingBatches,
    get_batch_on_this_rank_for_sequence_packing, slots_in_flight, stage_of, step_options)
