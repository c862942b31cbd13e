"""Dynamic context parallelism on the CPU: the scheduler (docs/semantics.md
S3b) against the reference framework's own on recorded global batches
(data/dynamic_cp_golden.json, written by make_dynamic_cp_golden.py from
megatron-core's DefaultDynamicCPScheduler) and its invariants on random
ones; GraphStep with a CP size per microbatch against the fixed-CP step of
that size for every rank; the drop-in's PackedSeqParams and refusals."""
import json
import os
import random

import numpy as np
import pytest

import thdc
import thdc.planner as planner

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "dynamic_cp_golden.json")


def _as_lists(plan):
    return [[list(ids) for ids in group] for group in plan.groups]


def test_scheduler_equals_the_reference_frameworks():
    with open(GOLDEN) as f:
        golden = json.load(f)
    assert len(golden["cases"]) == 80
    microbatches = 0
    for case in golden["cases"]:
        plan = planner.dynamic_cp_plan(case["lengths"], case["C"], case["cp"], case["dp"],
                                       min_cp_size=case["min_cp_size"])
        assert _as_lists(plan) == case["groups"], case
        microbatches += len(plan)
    assert microbatches == sum(len(c["groups"]) for c in golden["cases"])


def check_plan(plan, lengths, C, ranks, K=None):
    """The invariants of a dynamic-CP plan (S3b)."""
    seen = []
    sizes = planner.dynamic_cp_sizes(ranks, plan.min_cp_size)
    for m, (group, row) in enumerate(zip(plan.groups, plan.cp_sizes)):
        assert len(group) == len(row) == ranks
        j = 0
        while j < ranks:
            size = row[j]
            assert size in sizes, (m, j, size)
            block = plan.sub_group(m, j)
            assert block.start == j and block.stop <= ranks
            for k in block:
                assert group[k] == group[j] and row[k] == size
                assert plan.local_rank(m, k) == k - j
            ids = group[j]
            assert ids, "no rank is left empty"
            assert sum(lengths[i] for i in ids) <= C * size
            assert plan.tokens(m, j) == sum(lengths[i] for i in ids)
            for i in ids:
                assert lengths[i] <= C * size
                assert size >= planner_size_needed(lengths[i], C, plan.min_cp_size)
            if K is not None:
                assert len(ids) <= K
            seen.extend(ids)
            j = block.stop
    assert sorted(seen) == list(range(len(lengths))), "every sequence exactly once"


def planner_size_needed(length, C, min_cp):
    p = 1
    while p * C < length:
        p *= 2
    return max(p, min_cp)


@pytest.mark.parametrize("seed", range(6))
def test_scheduler_invariants_on_random_batches(seed):
    rng = random.Random(seed)
    for _ in range(40):
        dp, cp = rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 4])
        ranks = dp * cp
        C = rng.choice([64, 512, 2048])
        min_cp = rng.choice([m for m in (1, 2, 4) if m <= ranks])
        raw = [rng.randint(1, C * rng.choice([1, 1, 2, 4])) for _ in range(rng.randint(1, 60))]
        lengths = planner.align_lengths(np.array(raw, np.int32), cp=cp, dp=dp,
                                        dynamic_cp=True).tolist()
        # The longest a sequence may be: C rows on each rank of the largest
        # power-of-two sub-group (the scheduler's sizes double).
        top = C * (1 << (ranks.bit_length() - 1))
        lengths = [min(length, top - top % (2 * ranks)) for length in lengths]
        N = rng.choice([None, 4, 9])
        plan = planner.dynamic_cp_plan(lengths, C, cp, dp, min_cp_size=min_cp,
                                       max_packed_sequences=N)
        K = None if N is None else N - 1
        assert plan.max_real_seqs == K
        check_plan(plan, lengths, C, ranks, K)
        # Every size of the plan divides every aligned length by 2*size.
        for size in plan.sizes:
            assert all(length % (2 * size) == 0 for length in lengths if ranks % size == 0)


def test_scheduler_inputs_and_sizes():
    plan = planner.dynamic_cp_plan([3000, 1000, 500, 200, 100], 1024, cp=4)
    assert plan.cp_sizes == ((4, 4, 4, 4), (2, 2, 2, 2))
    assert plan.sizes == (2, 4)
    ids, counts, sizes = plan.microbatch_inputs(3, N=4)
    assert ids.tolist() == [[0, 1, 0], [3, 4, 0]]
    assert counts.tolist() == [2, 2] and sizes.tolist() == [4, 2]
    assert plan.local_rank(1, 3) == 1 and plan.sub_group(1, 3) == range(2, 4)
    with pytest.raises(ValueError, match="microbatch 0 gives rank 3 2 sequences"):
        plan.microbatch_inputs(3, N=2)
    with pytest.raises(IndexError, match="2 microbatches over 4 ranks"):
        plan.local_rank(2, 0)
    assert planner.dynamic_cp_sizes(8) == (1, 2, 4, 8)
    assert planner.dynamic_cp_sizes(12, 2) == (2, 4, 8, 12)
    assert planner.dynamic_cp_sizes(1) == (1,)


@pytest.mark.parametrize("args, kwargs, message", [
    (([5000], 1024, 4), {}, "needs 8 CP ranks of C = 1024 rows; there are 4"),
    (([5, -1], 1024, 4), {}, r"p\[1\] = -1 is negative"),
    (([5], 1024, 4), dict(min_cp_size=3), "must be a power of two in"),
    (([5], 1024, 2, 2), dict(min_cp_size=8), "must be a power of two in"),
    (([5], 1024, 4), dict(max_packed_sequences=1), "must be >= 2 when THD padding"),
    (([5], 1024, 0), {}, "cp and dp must be >= 1"),
])
def test_scheduler_errors(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        planner.dynamic_cp_plan(*args, **kwargs)
