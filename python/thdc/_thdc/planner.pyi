# Written by nanobind.stubgen (python -m nanobind.stubgen -m thdc._thdc -r); see __init__.pyi.
"""
The host-side microbatch planner (planner/Planner.h): docs/semantics.md S1, S2, S3 and S12
"""

from collections.abc import Sequence


class Plan:
    """
    A packing of one global batch into microbatches (S3): packs of sequence ids, and groups[m][j], the pack of microbatch m on DP x CP rank j = dp_index*cp + cp_index.
    """

    @property
    def packs(self) -> list[list[int]]:
        """the sequence ids of every pack, increasing within a pack"""

    @property
    def pack_tokens(self) -> list[int]:
        """the padded tokens of every pack (<= capacity)"""

    @property
    def groups(self) -> list[list[list[int]]]:
        """groups[m][j] = packs[m*dp + j//cp]"""

    @property
    def capacity(self) -> int:
        """the pack budget C*cp"""

    @property
    def max_real_seqs(self) -> int | None:
        """the S2 cap K on sequences per pack (None: no cap)"""

    @property
    def dp(self) -> int: ...

    @property
    def cp(self) -> int: ...

    @property
    def num_microbatches(self) -> int: ...

    @property
    def algorithm(self) -> str: ...

    def __len__(self) -> int: ...

    def __repr__(self) -> str: ...

def plan(padded_lengths: Sequence[int], C: int, cp: int, dp: int = 1, max_packed_sequences: int | None = None, alignment_set: bool = True, dummy_tail: bool = True, vpp_group: int | None = None, algorithm: str = 'next_fit') -> Plan:
    """
    Packs the padded lengths (global sequence ids in DP order) into microbatches of at most C*cp tokens and, with max_packed_sequences N, at most K sequences (S2: N-1 with an alignment and the dummy tail, else N). algorithm: 'next_fit' (the reference framework's scheduler, S3), 'balanced' (first-fit decreasing unless next-fit needs fewer microbatches) or 'first_fit_decreasing'. ValueError with the planner's message on bad settings, a negative length or a sequence longer than C*cp.
    """

def microbatch_inputs(plan: Plan, rank: int, N: int) -> tuple:
    """
    (sample_ids, num_seqs) of examples/pack_microbatch.mlir for DP x CP rank `rank` (cp_rank = rank % cp) and every microbatch: sample_ids an int32 array [num_microbatches, N-1] (each pack's ids, then zeros), num_seqs an int32 array [num_microbatches]. ValueError when a pack has more than N-1 sequences.
    """

def align_lengths(valid_lengths: Sequence[int], cp: int, tp: int = 1, sequence_parallel: bool = False, dp: int = 1, dynamic_cp: bool = False, multiple: int | str = 1) -> object:
    """
    S1: the padded lengths p = round_up(v, G) as an int32 array, G = pad_granularity(cp, tp, sequence_parallel, dp, dynamic_cp, multiple).
    """

def pad_granularity(cp: int, tp: int = 1, sequence_parallel: bool = False, dp: int = 1, dynamic_cp: bool = False, multiple: int | str = 1) -> int:
    """
    S1: the alignment granularity G = tpPad * lcm(cpPad, share * m): cpPad = 2*cp if cp > 1 else 1 (2*cp*dp with dynamic CP), share = cpPad/2 if cpPad > 1 else 1 (the ranks a sequence is divided among), tpPad = tp under sequence parallelism else 1, and m = multiple, an int >= 1 or a recipe of LOW_PRECISION_MULTIPLES: every rank's share of every sequence is then a multiple of m. ValueError on values below 1, an unknown recipe, or a G outside int32.
    """

def capacity_multiple(tp: int = 1, sequence_parallel: bool = False, multiple: int | str = 1) -> int:
    """
    S1, graph mode: what the static rows C of every CP rank must be a multiple of for a recipe's multiple m: m * tp under sequence parallelism, else m (check_capacity checks a C).
    """

def check_capacity(C: int, tp: int = 1, sequence_parallel: bool = False, multiple: int | str = 1) -> int:
    """
    S1, graph mode: the condition a low-precision recipe puts on the static rows C of every CP rank, which feeds its GEMMs exactly C rows (C/tp under sequence parallelism): C % (m * tpPad) == 0, m = multiple (an int >= 1 or a recipe of LOW_PRECISION_MULTIPLES), tpPad = tp under sequence parallelism else 1. Returns m * tpPad; ValueError naming the nearest capacities that hold otherwise.
    """

LOW_PRECISION_MULTIPLES: dict = ...

def max_microbatches(global_batch_size: int, max_seqlen: int, C: int, cp: int, dp: int = 1, max_packed_sequences: int | None = None, alignment_set: bool = True, dummy_tail: bool = True, vpp_group: int | None = None) -> int:
    """
    S12: the upper bound U on the microbatches of a global batch of global_batch_size sequences of padded length at most max_seqlen: how many graph slots (or static output buffers) to prepare. A next-fit plan never needs more, a balanced plan never more than next-fit.
    """

def graph_capture_count(num_microbatches: int, upper_bound: int, use_runtime_count: bool = False) -> int:
    """
    S12: max(num_microbatches, upper_bound), or num_microbatches alone when the runtime count must be used.
    """

class LadderPlan:
    """
    A plan over a capacity ladder (docs/capacity-ladder.md): every pack at the smallest rung that holds its tokens and its sequences.
    """

    @property
    def plan(self) -> Plan:
        """the packing (a Plan)"""

    @property
    def capacities(self) -> list[int]:
        """the rungs' rows per CP rank, B"""

    @property
    def sequence_capacities(self) -> list[int | None]:
        """the rungs' N (None: no cap)"""

    @property
    def pack_rungs(self) -> list[int]:
        """the rung of every pack"""

    @property
    def pack_rows(self) -> list[int]:
        """the rows every pack occupies at its rung, B*cp"""

    @property
    def pack_max_lengths(self) -> list[int]:
        """the longest padded length of every pack (its tightest max_seqlen)"""

    @property
    def tokens(self) -> int:
        """padded tokens of the plan"""

    @property
    def rows(self) -> int:
        """rows of the plan at its rungs"""

    @property
    def padded_rows(self) -> int:
        """rows - tokens: what the step pads"""

    @property
    def fill(self) -> float:
        """tokens / rows (1.0 for an empty plan)"""

    @property
    def num_microbatches(self) -> int: ...

    def rung(self, microbatch: int, rank: int) -> int:
        """
        the rung microbatch m runs at on DP x CP rank j = dp_index*cp + cp_index
        """

    def __len__(self) -> int: ...

    def __repr__(self) -> str: ...

def ladder_plan(padded_lengths: Sequence[int], capacities: object, cp: int, dp: int = 1, max_packed_sequences: int | None = None, sequence_capacities: object | None = None, alignment_set: bool = True, dummy_tail: bool = True, vpp_group: int | None = None) -> LadderPlan:
    """
    Plans the padded lengths over a capacity ladder: capacities B_1 < ... < B_k rows per CP rank (the top one is C), sequence_capacities their N (default: max_packed_sequences for every rung). Next-fit and the balanced plan over the top rung, each pack at its smallest rung; the plan with fewer rows is kept (ties: fewer microbatches, then next-fit). Returns a LadderPlan.
    """

def assign_rungs(plan: Plan, padded_lengths: Sequence[int], capacities: object, max_packed_sequences: int | None = None, sequence_capacities: object | None = None, alignment_set: bool = True, dummy_tail: bool = True) -> LadderPlan:
    """
    The smallest rung of the ladder for every pack of an existing plan (the lengths it was planned from). ValueError naming a pack no rung holds.
    """

def check_ladder(capacities: object, sequence_capacities: object | None) -> None:
    """
    Checks a capacity ladder (docs/capacity-ladder.md): capacities B_1 <= ... <= B_k rows per CP rank, each >= 1; sequence_capacities their N (None: no cap), each >= 1 and non-decreasing (a rung with more rows holds at least as many sequences); two rungs of equal rows differ in N, the later holding more. ValueError naming the first offending rung, TypeError for a value that is no int.
    """

def rung_index(capacities: object, sequence_capacities: object | None, rows: int, seqs: int, cp: int = 1, *, alignment_set: bool = True, dummy_tail: bool = True) -> int:
    """
    The smallest rung of the ladder that holds a microbatch of `rows` packed rows (all cp ranks of its CP group) and `seqs` sequences: B*cp >= rows and seqs <= the S2 cap of the rung's N (N-1 with an alignment and the dummy tail, else N; no cap for N None), the rung assign_rungs and ladder_plan give a pack. ValueError for a bad ladder (check_ladder's), negative rows or seqs, cp < 1, or when no rung holds the microbatch.
    """

class DynamicCpPlan:
    """
    A global batch planned for dynamic CP (docs/semantics.md S3b): for every microbatch m and DP x CP rank j, the sequence ids the rank receives (groups[m][j], every rank of a sub-group the same) and its CP size (cp_sizes[m][j]). Rank j's sub-group is the block of cp_sizes[m][j] ranks holding it (sub_group), its CP rank there j mod the size (local_rank); the sub-group's padded tokens are at most C per rank.
    """

    @property
    def groups(self) -> object:
        """groups[m][j]: the ids rank j receives in microbatch m"""

    @property
    def cp_sizes(self) -> object:
        """cp_sizes[m][j]: rank j's CP size in microbatch m"""

    @property
    def lengths(self) -> object:
        """the padded lengths the plan was made for"""

    @property
    def C(self) -> int:
        """max_seqlen_per_dp_cp_rank, the rows of every rank"""

    @property
    def dp(self) -> int: ...

    @property
    def cp(self) -> int: ...

    @property
    def min_cp_size(self) -> int: ...

    @property
    def max_real_seqs(self) -> int | None:
        """the S2 cap K on sequences per sub-group (None: no cap)"""

    @property
    def ranks(self) -> int:
        """dp * cp"""

    @property
    def num_microbatches(self) -> int: ...

    @property
    def sizes(self) -> object:
        """The CP sizes the plan uses, smallest first."""

    def __len__(self) -> int: ...

    def local_rank(self, microbatch: int, rank: int) -> int:
        """Rank j's CP rank in its sub-group of microbatch m."""

    def sub_group(self, microbatch: int, rank: int) -> object:
        """The DP x CP ranks of rank j's sub-group in microbatch m (a range)."""

    def tokens(self, microbatch: int, rank: int) -> int:
        """
        The padded tokens of rank j's sub-group in microbatch m (all its ranks; at most C times its size).
        """

    def microbatch_inputs(self, rank: int, N: int) -> tuple:
        """
        (sample_ids, num_seqs, cp_sizes) for DP x CP rank `rank` and every microbatch, as Plan's microbatch_inputs gives them: sample_ids int32 [num_microbatches, N-1] (the ids, then zeros), num_seqs int32 [num_microbatches], cp_sizes int32 [num_microbatches]. ValueError when a microbatch has more than N-1 sequences, IndexError for a rank outside [0, ranks).
        """

    def __repr__(self) -> str: ...

def dynamic_cp_plan(padded_lengths: Sequence[int], C: int, cp: int, dp: int = 1, *, min_cp_size: int = 1, max_packed_sequences: int | None = None, alignment_set: bool = True, dummy_tail: bool = True, microbatch_group_size_per_vp_stage: int | None = None) -> DynamicCpPlan:
    """
    Plans a global batch for dynamic CP over the dp*cp DP x CP ranks as the reference framework's default dynamic-CP scheduler does (S3b): C = max_seqlen_per_dp_cp_rank, the rows each rank holds; min_cp_size = min_dynamic_context_parallel_size. With max_packed_sequences N, at most K sequences per sub-group (S2: N-1 with an alignment and the dummy tail), a bound the framework's scheduler does not apply. The padded lengths should be aligned for dynamic CP (align_lengths(..., dynamic_cp=True, dp=dp): multiples of 2*cp*dp), so that every sub-group size can slice every sequence. microbatch_group_size_per_vp_stage: with virtual pipeline stages the config field of that name (None without them, as the framework passes its scheduler, data_schedule.py:536-541 on dev: megatron-core sets the field to the pipeline size even without VPP, model_parallel_config.py:600-601); above 1 the microbatch count is made a multiple of it, as the framework does, by splitting microbatches and widening their sub-groups (S3b). Returns a DynamicCpPlan; ValueError with the scheduler's message.
    """
