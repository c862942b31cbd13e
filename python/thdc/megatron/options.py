"""GraphStep's options (StepOptions) and their checks, one function per
concern: the numbers and flags, the capacity ladder, the bundles, the
pipeline's options, the parallel layout, a low-precision recipe's multiple
and the device. Each raises TypeError or ValueError naming the option."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from .. import planner, stages
from .._checks import _check_int, _check_path, _check_str, _import_torch

torch = _import_torch("thdc.megatron")

CONVENTIONS = ("graph", "compact")
STAGES = tuple(stages.STAGES)
CP_MODES = stages.CP_MODES


def _holds(rows: int, seqs: int, capacity: int, N: int) -> bool:
    """Whether a step of `capacity` rows (C*cp) and N cu entries past the
    first can take a microbatch of `rows` rows and `seqs` sequences without
    emptying it: N-1 and the dummy over a tail, or N filling every row
    (thd.validate's tail_slot, docs/semantics.md). The step's own limit,
    which exact_rows checks its figures against; which rung of a ladder a
    microbatch goes to is the planner's rule (thdc.planner.rung_index)."""
    return rows <= capacity and (seqs <= N - 1 or (seqs == N and rows == capacity))


def _check_ladder(capacities, sequence_capacities, C: int, N: int):
    """The ladder's rows per CP rank and sequence capacities as tuples of
    ints, the top rung (C, N): TypeError or ValueError naming what is wrong.
    The ladder's own rules (rows non-decreasing, sequences non-decreasing,
    equal rows holding more sequences) are the planner's, stated once in
    planner/Planner.h (checkLadder, thdc.planner.check_ladder); here what
    the step adds: one N per rung, the top rung the step's (C, N)."""
    def ints(values, name):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"{name} must be a sequence of ints; got {type(values).__name__}")
        return tuple(_check_int(v, f"{name}[{i}]") for i, v in enumerate(values))

    rows = (C,) if capacities is None else ints(capacities, "capacities")
    if not rows:
        raise ValueError("capacities must name at least one rung (the top one is C)")
    if sequence_capacities is None:
        seqs = (N,) * len(rows)
    else:
        seqs = ints(sequence_capacities, "sequence_capacities")
        if len(seqs) != len(rows):
            raise ValueError(f"sequence_capacities has {len(seqs)} entries; capacities has "
                             f"{len(rows)} rungs")
    try:
        if len(rows) > 1:  # one rung has nothing to order; its C and N are checked as the step's
            planner.check_ladder(rows, seqs)
    except ValueError as error:
        raise ValueError(f"capacities={list(rows)}, sequence_capacities={list(seqs)}: "
                         f"{error}") from None
    if rows[-1] != C:
        raise ValueError(f"the ladder's top rung is the step's C = {C}; capacities ends "
                         f"at {rows[-1]}")
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
    sizes = tuple(_check_int(v, f"cp_sizes[{i}]") for i, v in enumerate(cp_sizes))
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


def _check_numbers(options: "StepOptions") -> dict:
    """The int options as ints (TypeError naming the option; a bool or a
    float is not one), the flags as bools, rope_table_rows >= 1."""
    values = {name: _check_int(getattr(options, name), name)
              for name in ("C", "N", "cp", "cp_rank", "tp", "tp_rank", "slots")}
    for name in ("seq_idx", "cp_order_index", "sequence_parallel"):
        value = getattr(options, name)
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool; got {type(value).__name__}")
    rows = options.rope_table_rows
    if rows is not None:
        rows = _check_int(rows, "rope_table_rows")
        if rows < 1:
            raise ValueError(f"rope_table_rows must be >= 1; got {rows}")
    values["rope_table_rows"] = rows
    return values


def _check_bundle(bundle, rungs: int):
    """One path, one per rung of a ladder (a tuple), or None."""
    if bundle is not None and rungs > 1:
        if isinstance(bundle, (str, bytes)) or not hasattr(bundle, "__len__"):
            raise TypeError(f"a ladder of {rungs} rungs takes one bundle per "
                            f"rung: bundle must be a sequence of {rungs} paths")
        if len(bundle) != rungs:
            raise ValueError(f"bundle has {len(bundle)} paths; the ladder has {rungs} rungs")
        return tuple(_check_path(b, f"bundle[{i}]") for i, b in enumerate(bundle))
    return None if bundle is None else _check_path(bundle, "bundle")


def _check_pipeline(options: "StepOptions", values: dict) -> Optional[int]:
    """The pipeline's options (stage, cp_mode, convention, dummy_length,
    linear_attention_chunk), and every rung's parameters at the step's cp
    (thdc.stages states the rules); returns dummy_length checked."""
    for name in ("stage", "cp_mode", "convention", "cache_dir"):
        _check_str(getattr(options, name), name)
    dummy_length = options.dummy_length
    if dummy_length is not None:
        dummy_length = _check_int(dummy_length, "dummy_length")
    rows = values["rope_table_rows"]
    BT = values["linear_attention_chunk"] = stages.check_linear_chunk(
        options.linear_attention_chunk, "linear_attention_chunk")
    stages.check_options(options.stage, options.cp_mode, rows is not None, dummy_length, BT)
    if options.convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}; got {options.convention!r}")
    ladder = list(zip(values["capacities"], values["sequence_capacities"]))
    for B, N_rung in ladder:
        try:
            stages.check_params(B, values["cp"], N_rung, options.cp_mode, rows, dummy_length,
                                BT)
        except ValueError as error:
            raise ValueError(f"rung (C={B}, N={N_rung}): {error}"
                             if len(ladder) > 1 else str(error)) from None
    return dummy_length


def _check_parallelism(options: "StepOptions", values: dict) -> Optional[Tuple[int, ...]]:
    """The CP rank, dynamic CP's sizes (every rung's parameters at each) and
    groups, and the TP rank; returns cp_sizes checked."""
    cp, cp_rank = values["cp"], values["cp_rank"]
    if not 0 <= cp_rank < cp:
        raise ValueError(f"cp_rank must be in [0, {cp}); got {cp_rank}")
    cp_sizes = _check_cp_sizes(options.cp_sizes, cp, cp_rank)
    if cp_sizes is not None and len(cp_sizes) > 1 and values["bundle"] is not None:
        raise ValueError(f"cp_sizes={list(cp_sizes)}: a step of several CP sizes compiles "
                         f"one kernel per size and rung through the JIT; bundles for it "
                         f"are not supported, so pass bundle=None")
    for size in (cp_sizes or (cp,))[:-1]:
        for B, N_rung in zip(values["capacities"], values["sequence_capacities"]):
            try:
                stages.check_params(B, size, N_rung, options.cp_mode,
                                    values["rope_table_rows"], values["dummy_length"],
                                    values["linear_attention_chunk"])
            except ValueError as error:
                raise ValueError(f"CP size {size}, C={B}, N={N_rung}: {error}") from None
    cp_groups = options.cp_groups
    if cp_groups is not None and not (callable(cp_groups) or isinstance(cp_groups, dict)):
        raise TypeError(f"cp_groups must map a CP size to its process group (a dict, or a "
                        f"callable such as megatron-core's parallel_state."
                        f"get_dynamic_data_context_parallel_groups(group_size=...)); got "
                        f"{type(cp_groups).__name__}")
    tp, tp_rank = values["tp"], values["tp_rank"]
    if tp < 1 or not 0 <= tp_rank < tp:
        raise ValueError(f"tp must be >= 1 and tp_rank in [0, tp); got tp={tp}, "
                         f"tp_rank={tp_rank}")
    return cp_sizes


def _check_rows_per_rank(options: "StepOptions", values: dict) -> None:
    """What every rank feeds its GEMMs: a low-precision recipe's multiple of
    every rung's C (thdc.planner.check_capacity; the reference states the
    rule once), and C/tp whole under sequence parallelism."""
    capacities, tp = values["capacities"], values["tp"]
    multiple, sequence_parallel = options.multiple, options.sequence_parallel
    if multiple is not None:
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
                             f"{tp} ranks; " + ("C" if B == values["C"] else "every rung")
                             + " must be a multiple of tp")


def _resolve_device(device) -> "torch.device":
    """The step's device: "cuda" (None) as the current CUDA device, "cpu"
    for the pipeline's host code on CPU tensors (no streams, no graphs, no
    call into torch.cuda)."""
    if not (device is None or isinstance(device, (str, torch.device))):
        try:
            device = _check_int(device, "device")
        except TypeError:
            raise TypeError("device must be a torch.device, a str such as 'cuda:0' or "
                            f"an int ordinal; got {type(device).__name__}") from None
    try:
        resolved = torch.device("cuda" if device is None else device)
    except RuntimeError as error:  # torch's own word on a malformed string
        raise ValueError(f"device must be 'cpu' or a CUDA device; got {device!r}: "
                         f"{error}") from None
    if resolved.type == "cpu":
        return torch.device("cpu")
    if resolved.type != "cuda":
        raise ValueError(f"device must be 'cpu' or a CUDA device; got {device!r}")
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"GraphStep(device={device!r}): PyTorch sees no CUDA device here"
            + (" (the default is the current CUDA device)" if device is None else "")
            + "; pass device='cpu' to run the pipeline's host code on CPU tensors")
    if resolved.index is None:  # "cuda": the current device, as torch has it
        return torch.device("cuda", torch.cuda.current_device())
    return resolved


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
    linear_attention_chunk: Optional[int] = None
    multiple: object = None
    cp_sizes: Optional[Tuple[int, ...]] = None
    cp_groups: object = None

    def __post_init__(self):
        values = _check_numbers(self)
        values["capacities"], values["sequence_capacities"] = _check_ladder(
            self.capacities, self.sequence_capacities, values["C"], values["N"])
        values["bundle"] = _check_bundle(self.bundle, len(values["capacities"]))
        values["dummy_length"] = _check_pipeline(self, values)
        values["cp_sizes"] = _check_parallelism(self, values)
        _check_rows_per_rank(self, values)
        if values["slots"] < 1:
            raise ValueError(f"slots must be >= 1; got {values['slots']}")
        values["device"] = _resolve_device(self.device)
        for name, value in values.items():
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
        if self.linear_attention_chunk is not None:
            options["linear_chunk"] = self.linear_attention_chunk
        return options
