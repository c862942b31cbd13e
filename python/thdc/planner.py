"""The host-side microbatch planner (planner/Planner.h), on NumPy arrays: how
the sequences of one global batch are packed into microbatches before the
THD data step runs, and what examples/pack_microbatch.mlir then takes for
each microbatch (docs/semantics.md S1, S2, S3 and S12).

    import thdc.planner as planner
    padded = planner.align_lengths(valid_lengths, cp=2)          # S1
    plan = planner.plan(padded, C=4096, cp=2, max_packed_sequences=64)
    sample_ids, num_seqs = planner.microbatch_inputs(plan, rank, N=64)
    # sample_ids[m], num_seqs[m:m+1]: pack_microbatch's inputs for microbatch m

`plan` takes the padded lengths in global sequence order (the order of the
data-parallel ranks' samples) and returns a `Plan`: `packs` (sequence ids),
`groups[m][j]` (the pack of microbatch m on DP x CP rank j), `pack_tokens`,
`num_microbatches`, `capacity` (C*cp) and `max_real_seqs` (the S2 cap K:
N-1 with an alignment and the dummy tail, so that the dummy sequence always
has a slot). "next_fit" is the reference framework's scheduler; "balanced"
needs no more microbatches, often fewer. `max_microbatches` is the S12
bound: how many graph slots, or static output buffers, a global batch can
need. Errors raise ValueError with the planner's message.

Low-precision recipes (FP8, MXFP8, HybridEP) need the rows a rank feeds its
GEMMs to be a multiple m of tokens (`LOW_PRECISION_MULTIPLES`,
megatron-core's numbers: "mxfp8" 32, every other FP8 recipe 16, "hybridep"
64). In graph mode every CP rank holds exactly C rows, C/tp under sequence
parallelism, so the condition is on C, checked by `check_capacity`:

    planner.check_capacity(C=8192, tp=4, sequence_parallel=True, multiple="mxfp8")

`advise` picks a C (and rungs) that hold it. `align_lengths` and
`pad_granularity` with a `multiple` round every sequence instead, so that
each rank's share of each sequence is a multiple of m: only for consumers
of a variable packed length (eager, without a static C), at a cost in
tokens (docs/semantics.md S1).

Capacity ladders (docs/capacity-ladder.md): `ladder_plan` plans a global
batch over rungs B_1 < ... < B_k = C (rows per CP rank, each with its own
sequence capacity) and puts every microbatch at the smallest rung that
holds it, so that the step pads it to B instead of C; `assign_rungs` does
the same for an existing plan; `even_ladder` makes k evenly spaced rungs;
`advise` picks C, N, the ladder and the slot count from sample global
batches (also a command, `thdc-advise`):

    ladder = planner.ladder_plan(padded, [2048, 4096, 8192], cp=1,
                                 max_packed_sequences=64,
                                 sequence_capacities=[16, 32, 64])
    ladder.pack_rungs, ladder.fill, ladder.padded_rows

The ladder's rules are the planner's own: `check_ladder` (rows
non-decreasing, equal rows holding more sequences) and `rung_index` (the
smallest rung that holds a microbatch's rows and sequences, the rung
`assign_rungs` gives its pack). Whole-iteration graphs
(thdc.megatron.IterationGraphs): `choose_shapes` picks the few iteration
shapes (each microbatch's rung) worth capturing for the coming iterations.

Dynamic CP (S3b): `dynamic_cp_plan` plans a global batch as the reference
framework's dynamic-CP scheduler does and returns a `DynamicCpPlan` (the
ids and CP size of every rank in every microbatch); `dynamic_cp_sizes` the
CP sizes such a plan can use.
"""
import argparse
import dataclasses
import math
import sys
from typing import List, Optional, Sequence, Tuple

from ._checks import _check_int
from ._shapes import choose_shapes
from ._thdc import planner as _planner
# The native planner, re-exported (__all__).
from ._thdc.planner import (
    DynamicCpPlan, LadderPlan, Plan, align_lengths, assign_rungs, capacity_multiple,
    check_capacity, check_ladder, dynamic_cp_plan, graph_capture_count, ladder_plan,
    max_microbatches, microbatch_inputs, pad_granularity, plan, rung_index)

LOW_PRECISION_MULTIPLES = dict(_planner.LOW_PRECISION_MULTIPLES)


def dynamic_cp_sizes(ranks: int, min_cp_size: int = 1, *,
                     rank: Optional[int] = None) -> Tuple[int, ...]:
    """The CP sizes dynamic CP can give a microbatch over `ranks` DP x CP
    ranks: the sizes of the reference framework's dynamic process groups
    (the powers of two >= min_cp_size below the largest power of two <=
    `ranks`, and `ranks` itself; megatron-core parallel_state.py:428 and
    :938-944 on dev, create_dynamic_dp_cp_groups and
    initialize_model_parallel), smallest first. With `ranks` not a power of
    two the framework has no group for the largest power of two below it
    (W = 6: 1, 2, 6), though its scheduler can plan one (4); the step has
    no variant for it and refuses such a microbatch by name. With `rank`,
    only the sizes whose block of ranks holding it is whole (the last block
    of a size can be short: that rank never gets the size);
    GraphStep(cp_sizes=...) takes these."""
    ranks = _check_int(ranks, "ranks")
    min_cp_size = _check_int(min_cp_size, "min_cp_size")
    if ranks < 1 or min_cp_size < 1 or min_cp_size & (min_cp_size - 1) or min_cp_size > ranks:
        raise ValueError(f"ranks must be >= 1 and min_cp_size a power of two in [1, ranks]; "
                         f"got ranks={ranks}, min_cp_size={min_cp_size}")
    # 2**i for i in range(int(log2(ranks))): below the largest power of two.
    sizes = [1 << i for i in range(ranks.bit_length() - 1) if min_cp_size <= 1 << i]
    sizes.append(ranks)
    if rank is not None:
        rank = _check_int(rank, "rank")
        if not 0 <= rank < ranks:
            raise ValueError(f"rank must be in [0, {ranks}); got {rank}")
        sizes = [s for s in sizes if rank - rank % s + s <= ranks]
    return tuple(sizes)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def even_ladder(C: int, rungs: int, multiple: int = 1) -> List[int]:
    """`rungs` capacities evenly spaced up to C (B_i = ceil(i*C/k) rounded up
    to `multiple`, duplicates dropped), the last one C; C must be a
    multiple of `multiple` (the rows per rank every rung needs: 2 for zigzag
    CP, tp under sequence parallelism, a GEMM-friendly 64 or 128)."""
    for name, value in (("C", C), ("rungs", rungs), ("multiple", multiple)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")
    if C % multiple:
        raise ValueError(f"C = {C} is not a multiple of {multiple}")
    ladder: List[int] = []
    for i in range(1, rungs + 1):
        B = min(C, _round_up(-(-i * C // rungs), multiple))
        if not ladder or B > ladder[-1]:
            ladder.append(B)
    return ladder


@dataclasses.dataclass(frozen=True)
class Advice:
    """What `advise` recommends, and what it expects of it over the sample
    batches it was given."""

    C: int  # rows per CP rank of the top rung (max_seqlen_per_dp_cp_rank)
    N: int  # the top rung's sequence capacity, the dummy included
    cp: int
    capacities: Tuple[int, ...]  # the ladder, B_1 < ... < B_k = C
    sequence_capacities: Tuple[int, ...]  # each rung's N
    slots: int  # buffer sets: the microbatches in flight (at most the S12 bound)
    max_microbatches: int  # the S12 bound on the microbatches of a global batch
    padded_fraction: float  # padded rows / rows at the ladder's rungs
    single_padded_fraction: float  # the same with every microbatch at C
    microbatches_per_batch: float
    rung_share: Tuple[float, ...]  # the fraction of microbatches at each rung
    attention_blocks: Tuple[int, ...]  # per rung: N_i * ceil(B_i*cp / block)
    graph_memory_bytes: Optional[int]  # activation_bytes_per_row * C, or None
    considered: Tuple[Tuple[int, float], ...]  # (rungs, padded fraction) tried
    # Rungs of the chosen ladder that no sampled microbatch used, left out
    # (each would be a graph per slot to capture for nothing).
    unused_rungs: Tuple[int, ...] = ()

    @property
    def graphs(self) -> int:
        """Whole-microbatch graphs to capture: one per rung and slot."""
        return len(self.capacities) * self.slots

    def summary(self) -> str:
        lines = [f"C = {self.C}, N = {self.N}, cp = {self.cp}, slots = {self.slots}, "
                 f"{len(self.capacities)} rungs ({self.graphs} graphs); at most "
                 f"{self.max_microbatches} microbatches per global batch",
                 f"padded rows: {100 * self.padded_fraction:.1f}% with the ladder, "
                 f"{100 * self.single_padded_fraction:.1f}% at C alone; "
                 f"{self.microbatches_per_batch:.2f} microbatches per global batch"]
        lines.append("rung  rows (B)   N  share  attention blocks per head")
        for i, (B, n) in enumerate(zip(self.capacities, self.sequence_capacities)):
            lines.append(f"{i:>4}  {B:>8} {n:>3}  {100 * self.rung_share[i]:4.1f}%  "
                         f"{self.attention_blocks[i]:>8}")
        if self.graph_memory_bytes is not None:
            lines.append(f"graph memory: about {self.graph_memory_bytes / 2**30:.2f} GiB, one "
                         "pool for every graph (the largest rung's activations)")
        lines.append("rungs tried: " + ", ".join(f"{k}: {100 * f:.1f}%"
                                                  for k, f in self.considered))
        if self.unused_rungs:
            lines.append(f"left out: rows {', '.join(map(str, self.unused_rungs))} (no sampled "
                         f"microbatch used them)")
        return "\n".join(lines)


def _fraction(padded_rows: int, rows: int) -> float:
    return padded_rows / rows if rows else 0.0


# advise's bound on the rungs it tries: each is a graph per slot to
# capture, and a ladder past this many rungs pads no measurably fewer rows.
MAX_RUNGS = 64
# advise's bounds on the other counts it is given, each a size that the
# plans, or the step it advises, allocate: dp*cp ranks (a plan holds the
# pack of every DP x CP rank of every microbatch), the sequence capacity N
# (the step's offsets have N+1 int32 entries per rung and slot), C*cp rows
# within int32 (the offsets' dtype), and the sample's lengths times cp (every
# CP rank's copy of every pack).
MAX_RANKS = 1 << 16
MAX_SEQUENCE_CAPACITY = 1 << 20
MAX_RANK_LENGTHS = 1 << 24
_INT32_MAX = 2**31 - 1


def _check_advise_arguments(*, cp, dp, tp, C, N, multiple, max_rungs, tolerance, block,
                            rungs) -> None:
    """ValueError naming the first argument of advise out of its range."""
    for name, value, low in (("cp", cp, 1), ("dp", dp, 1), ("tp", tp, 1),
                             ("multiple", multiple, 1), ("block", block, 1),
                             ("max_rungs", max_rungs, 1)):
        if _check_int(value, name) < low:
            raise ValueError(f"{name} must be >= {low}; got {value}")
    for name, value, low in (("C", C, 1), ("N", N, 2), ("rungs", rungs, 1)):
        if value is not None and _check_int(value, name) < low:
            raise ValueError(f"{name} must be >= {low}; got {value}")
    for name, value in (("max_rungs", max_rungs), ("rungs", rungs)):
        if value is not None and value > MAX_RUNGS:
            raise ValueError(f"{name} must be <= {MAX_RUNGS} (each rung is a graph per slot "
                             f"to capture); got {value}")
    if dp * cp > MAX_RANKS:
        raise ValueError(f"dp*cp = {dp}*{cp} = {dp * cp} ranks: at most {MAX_RANKS} (a plan "
                         f"holds the pack of every DP x CP rank)")
    if C is not None and C > _INT32_MAX:
        raise ValueError(f"C must be <= {_INT32_MAX} (the step's offsets are int32); got {C}")
    if N is not None and N > MAX_SEQUENCE_CAPACITY:
        raise ValueError(f"N must be <= {MAX_SEQUENCE_CAPACITY} (the step's offsets have N+1 "
                         f"entries per rung and slot); got {N}")
    if not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) \
            or tolerance < 0:
        raise ValueError(f"tolerance must be a finite number >= 0; got {tolerance!r}")


def advise(batches: Sequence[Sequence[int]], *, cp: int = 1, dp: int = 1,
           C: Optional[int] = None, N: Optional[int] = None, multiple: int = 128,
           max_rungs: int = 16, tolerance: float = 0.01, block: int = 128,
           activation_bytes_per_row: Optional[int] = None,
           vpp_group: Optional[int] = None, in_flight: int = 1,
           rungs: Optional[int] = None, recipe=None, tp: int = 1,
           sequence_parallel: bool = False) -> Advice:
    """A capacity ladder for global batches like `batches` (each a sequence of
    padded lengths, S1-aligned: the first global batches of a run, or draws
    from a length histogram). C defaults to the longest sequence's rows per
    rank rounded up to `multiple`; N to one more than the most sequences a
    microbatch of the sample holds (the dummy's slot), rounded up to 8. For
    k = 1 .. max_rungs the batches are planned over even_ladder(C, k,
    multiple) with each rung's N the most sequences its microbatches hold
    (+1, rounded up to 8, non-decreasing, at most N) and, when the top
    rung's microbatches need fewer than N, a last rung (C, N) for those
    that need more (varlen attention's launch grows with the offsets, so
    the common case should not pay for the rare one); the smallest k whose
    padded fraction is within `tolerance` of the best is advised (every rung
    is a graph per slot to capture, and the pool is shared, so the cost of a
    rung is capture time, not memory). attention_blocks: the thread blocks
    per head varlen attention launches at each rung (its grid is the
    sequence count times ceil(max_seqlen / block)); graph_memory_bytes:
    with the model's activation bytes per row, the shared pool's size.
    in_flight: the microbatches alive at once (1 without pipeline
    parallelism, where each replays after the last on one stream; the
    pipeline's depth under 1F1B): the slots, at most the S12 bound.
    rungs: advise this many rungs (even_ladder's k) instead of choosing.
    recipe, tp, sequence_parallel: a low-precision recipe (a name of
    LOW_PRECISION_MULTIPLES or an int) and the TP layout: every rung is then
    also a multiple of capacity_multiple(tp, sequence_parallel, recipe), the
    graph-mode condition (a given C is checked). Bounds (ValueError past
    them, before anything is planned): dp*cp <= MAX_RANKS, C*cp within
    int32, N <= MAX_SEQUENCE_CAPACITY, the sample's lengths times cp <=
    MAX_RANK_LENGTHS."""
    _check_advise_arguments(cp=cp, dp=dp, tp=tp, C=C, N=N, multiple=multiple,
                            max_rungs=max_rungs, tolerance=tolerance, block=block,
                            rungs=rungs)
    batches = [list(map(int, b)) for b in batches]
    if not batches or not any(batches):
        raise ValueError("advise needs at least one global batch of lengths")
    if min(min(b) for b in batches if b) < 0:
        raise ValueError("lengths must be >= 0")
    lengths = sum(len(b) for b in batches)
    if lengths * cp > MAX_RANK_LENGTHS:
        raise ValueError(f"the sample's {lengths} lengths times cp = {cp} are {lengths * cp} "
                         f"pack entries, more than {MAX_RANK_LENGTHS} (the plans hold every CP "
                         f"rank's copy of every pack): advise on fewer global batches")
    longest = max(max(b) for b in batches if b)
    if recipe is not None or sequence_parallel:
        m = 1 if recipe is None else recipe
        if C is not None:
            try:
                check_capacity(C, tp, sequence_parallel, m)
            except ValueError as error:
                raise ValueError(str(error).replace("check_capacity: ", "", 1)) from None
        multiple = math.lcm(multiple, capacity_multiple(tp, sequence_parallel, m))
    if C is None:
        C = _round_up(max(1, -(-longest // cp)), multiple)
    if C * cp > _INT32_MAX:
        raise ValueError(f"C*cp = {C}*{cp} = {C * cp} is outside int32 (the step's offsets "
                         f"are int32)")
    if longest > C * cp:
        raise ValueError(f"the longest sequence ({longest}) is longer than C*cp = {C * cp}")
    if C % multiple:
        raise ValueError(f"C = {C} is not a multiple of multiple = {multiple}")
    if N is None:
        most = max(max(len(p) for p in plan(b, C, cp, dp, vpp_group=vpp_group,
                                            max_packed_sequences=None,
                                            algorithm="balanced").packs)
                   for b in batches if b)
        N = _round_up(most + 1, 8)

    def plan_all(capacities, seqs):
        """Each sample batch planned over the ladder, one at a time: a plan
        holds a copy of every pack per DP x CP rank, so no k's plans are
        kept (the chosen ladder's are planned again)."""
        return (ladder_plan(b, capacities, cp, dp, max_packed_sequences=N,
                            sequence_capacities=seqs, vpp_group=vpp_group) for b in batches)

    considered, results = [], []
    for k in ([rungs] if rungs is not None else range(1, max_rungs + 1)):
        capacities = even_ladder(C, k, multiple)
        k_rows = len(capacities)
        if results and len(capacities) == results[-1][3]:
            continue  # C / multiple allows no more rungs
        # Each rung's N: the most sequences its microbatches hold, planned
        # with N everywhere first.
        most = [1] * len(capacities)
        for lp in plan_all(capacities, None):
            for rung, pack in zip(lp.pack_rungs, lp.plan.packs):
                most[rung] = max(most[rung], len(pack))
        seqs, floor = [], 2
        for m in most:
            floor = max(floor, min(N, _round_up(m + 1, 8)))
            seqs.append(floor)
        if seqs[-1] < N:  # the top rung's microbatches need fewer offsets:
            capacities = capacities + [C]  # a last rung (C, N) for the rest
            seqs.append(N)
        rows = padded = 0
        for p in plan_all(capacities, seqs):
            rows, padded = rows + p.rows, padded + p.padded_rows
        fraction = _fraction(padded, rows)
        considered.append((k_rows, fraction))
        results.append((capacities, seqs, fraction, k_rows))
    best = min(r[2] for r in results)
    capacities, seqs, fraction, _ = next(r for r in results if r[2] <= best + tolerance)

    def tally(capacities, seqs):
        """The chosen ladder's plans as the advice reports them: rows, padded
        rows, microbatches and the packs at each rung."""
        rows = padded = microbatches = 0
        counts = [0] * len(capacities)
        for p in plan_all(capacities, seqs):
            rows, padded = rows + p.rows, padded + p.padded_rows
            microbatches += p.num_microbatches
            for rung in p.pack_rungs:
                counts[rung] += 1
        return _fraction(padded, rows), microbatches, counts

    fraction, microbatches, counts = tally(capacities, seqs)
    unused = ()
    if rungs is None:
        # A rung no sampled microbatch used is a graph per slot captured for
        # nothing: left out (the top one stays, the bound of every
        # microbatch). Each microbatch keeps its rung, the smallest that
        # holds it, so the packs and rows are the same.
        used = {len(capacities) - 1} | {i for i, c in enumerate(counts) if c}
        if len(used) < len(capacities):
            unused = tuple(B for i, B in enumerate(capacities) if i not in used)
            capacities = [B for i, B in enumerate(capacities) if i in used]
            seqs = [n for i, n in enumerate(seqs) if i in used]
            fraction, microbatches, counts = tally(capacities, seqs)
    single_rows = single_padded = 0
    for p in plan_all([C], None):
        single_rows, single_padded = single_rows + p.rows, single_padded + p.padded_rows
    packs = sum(counts)
    bound = max(max_microbatches(len(b), max(b) if b else 1, C, cp, dp,
                                 max_packed_sequences=N, vpp_group=vpp_group)
                for b in batches)
    if isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 1:
        raise ValueError(f"in_flight must be an int >= 1; got {in_flight!r}")
    return Advice(
        C=C, N=N, cp=cp, capacities=tuple(capacities), sequence_capacities=tuple(seqs),
        slots=min(in_flight, bound), max_microbatches=bound, padded_fraction=fraction,
        single_padded_fraction=_fraction(single_padded, single_rows),
        microbatches_per_batch=microbatches / len(batches),
        rung_share=tuple(c / packs if packs else 0.0 for c in counts),
        attention_blocks=tuple(n * -(-B * cp // block) for B, n in zip(capacities, seqs)),
        graph_memory_bytes=(None if activation_bytes_per_row is None
                            else int(activation_bytes_per_row) * C),
        considered=tuple(considered), unused_rungs=unused)


# thdc-advise reads at most this much of its lengths file, and lines of at
# most _MAX_LINE characters: a sample of global batches, never a device's
# endless stream (/dev/zero). The bytes bound no work: at most _MAX_LENGTHS
# lengths in at most _MAX_BATCHES global batches (each batch is planned once
# per rung count tried; 30 MB of one-length lines were 15 million batches).
_MAX_INPUT = 64 << 20
_MAX_LINE = 1 << 20
_MAX_LENGTHS = 10 ** 6
_MAX_BATCHES = 10 ** 4


def _refuse(message: str):
    """thdc-advise's exit on a bad input: the message, status 2 (as
    argparse's own errors)."""
    print(f"thdc-advise: {message}", file=sys.stderr)
    raise SystemExit(2)


def _read_lengths(path: str) -> List[List[int]]:
    """Global batches from a text file: one line per global batch, lengths
    separated by spaces or commas ('-' reads standard input); at most
    _MAX_INPUT characters in lines of at most _MAX_LINE, at most
    _MAX_LENGTHS lengths in at most _MAX_BATCHES batches."""
    stream = sys.stdin if path == "-" else open(path, errors="replace")
    with stream:
        batches, read, number, lengths = [], 0, 0, 0
        while True:
            line = stream.readline(_MAX_LINE + 1)
            if not line:
                break
            number += 1
            read += len(line)
            if len(line) > _MAX_LINE and not line.endswith("\n"):
                _refuse(f"{path}:{number}: a line longer than {_MAX_LINE} characters: not a "
                        f"file of lengths")
            if read > _MAX_INPUT:
                _refuse(f"{path}: more than {_MAX_INPUT >> 20} MiB: a sample of global "
                        f"batches is expected")
            fields = line.replace(",", " ").split()
            if not fields or fields[0].startswith("#"):
                continue
            lengths += len(fields)
            if lengths > _MAX_LENGTHS:
                _refuse(f"{path}:{number}: more than {_MAX_LENGTHS} lengths: a sample of "
                        f"global batches is expected")
            if len(batches) == _MAX_BATCHES:
                _refuse(f"{path}:{number}: more than {_MAX_BATCHES} global batches: a sample "
                        f"of global batches is expected")
            try:
                batches.append([int(f) for f in fields])
            except ValueError:
                _refuse(f"{path}:{number}: not a list of integer lengths: "
                        f"{line.strip()[:60]!r}")
    return batches


def _int_in(low: int, high: Optional[int] = None):
    """An argparse type: an int in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"must be {bound}; got {value}")
        return value
    return parse


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; got {text}")
    return value


def _recipe(text: Optional[str]):
    """--recipe: a token multiple (an int) or a recipe's name."""
    try:
        return None if text is None else int(text)
    except ValueError:
        return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    """thdc-advise: a capacity ladder for the global batches in a file."""
    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog="thdc-advise",
        description="Advises C, N, a capacity ladder and the graph slots for THD "
                    "microbatches, from sample global batches (one line each: the "
                    "sequences' padded lengths).")
    parser.add_argument("lengths", help=f"the file of global batches ('-': standard input): "
                        f"at most {_MAX_LENGTHS} lengths in at most {_MAX_BATCHES} global "
                        f"batches, lines of at most {_MAX_LINE} characters, "
                        f"{_MAX_INPUT >> 20} MiB in all")
    parser.add_argument("--version", action="version", version=f"thdc-advise {__version__}")
    parser.add_argument("--cp", type=_int_in(1, MAX_RANKS), default=1,
                        help="context-parallel size: a microbatch's rows are split over "
                             f"this many ranks (default 1; dp*cp at most {MAX_RANKS})")
    parser.add_argument("--dp", type=_int_in(1, MAX_RANKS), default=1,
                        help="data-parallel size: microbatches are planned for this many "
                             "replicas at once (default 1)")
    parser.add_argument("--C", type=_int_in(1, _INT32_MAX),
                        help="rows per CP rank (default: the longest sequence's, rounded up; "
                             "C*cp within int32)")
    parser.add_argument("--N", type=_int_in(2, MAX_SEQUENCE_CAPACITY),
                        help=f"sequence capacity (default: from the sample; at most "
                             f"{MAX_SEQUENCE_CAPACITY})")
    parser.add_argument("--multiple", type=_int_in(1), default=128,
                        help="every rung a multiple of this many rows (default 128)")
    parser.add_argument("--recipe", help="a low-precision recipe (fp8, mxfp8, hybridep, ...) "
                        "or its token multiple: every rung then holds its graph-mode "
                        "condition")
    parser.add_argument("--tp", type=_int_in(1), default=1,
                        help="tensor-parallel size, for --recipe and --sequence-parallel's "
                             "row multiple (default 1)")
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="sequence parallelism: every rung's rows split over the TP ranks")
    parser.add_argument("--max-rungs", type=_int_in(1, MAX_RUNGS), default=16,
                        help=f"the most rungs to try (default 16, at most {MAX_RUNGS})")
    parser.add_argument("--tolerance", type=_tolerance, default=0.01,
                        help="the fewest rungs within this padded fraction of the best")
    parser.add_argument("--in-flight", type=_int_in(1), default=1,
                        help="microbatches alive at once (the pipeline depth under 1F1B)")
    parser.add_argument("--activation-bytes-per-row", type=_int_in(0),
                        help="the model's activation memory per row, for the graph memory")
    args = parser.parse_args(argv)
    try:
        advice = advise(_read_lengths(args.lengths), cp=args.cp, dp=args.dp, C=args.C,
                        N=args.N, multiple=args.multiple, max_rungs=args.max_rungs,
                        tolerance=args.tolerance, in_flight=args.in_flight,
                        activation_bytes_per_row=args.activation_bytes_per_row,
                        recipe=_recipe(args.recipe), tp=args.tp,
                        sequence_parallel=args.sequence_parallel)
    except (ValueError, OSError) as error:
        parser.exit(2, f"thdc-advise: {error}\n")
    except MemoryError:
        parser.exit(2, "thdc-advise: out of memory planning the sample: advise on fewer "
                       "global batches, or smaller --cp/--dp\n")
    print(advice.summary())
    extra = "" if args.recipe is None else f", multiple={args.recipe!r}"
    extra += (f", tp={args.tp}, sequence_parallel=True" if args.sequence_parallel else "")
    print("GraphStep(C={}, N={}, cp={}, slots={}, capacities={}, sequence_capacities={}{})"
          .format(advice.C, advice.N, advice.cp, advice.slots, list(advice.capacities),
                  list(advice.sequence_capacities), extra))
    return 0

__all__ = [
    "Advice",
    "DynamicCpPlan",
    "LOW_PRECISION_MULTIPLES",
    "check_capacity",
    "capacity_multiple",
    "LadderPlan",
    "Plan",
    "advise",
    "assign_rungs",
    "choose_shapes",
    "check_ladder",
    "dynamic_cp_plan",
    "dynamic_cp_sizes",
    "even_ladder",
    "ladder_plan",
    "align_lengths",
    "graph_capture_count",
    "max_microbatches",
    "microbatch_inputs",
    "pad_granularity",
    "plan",
    "rung_index",
]


if __name__ == "__main__":
    sys.exit(main())
