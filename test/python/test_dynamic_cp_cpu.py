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


#
# The step: one variant per CP size (and rung)
#

torch = pytest.importorskip("torch")
from microbatches import invalidate, random_microbatch, step_inputs, step_mismatches  # noqa: E402
from test_megatron_cpu import expect, outputs  # noqa: E402

SIZES = (1, 2, 4)


@pytest.fixture(scope="module")
def dynamic_step(cache_dir):
    made = {}

    def make(rank, **kwargs):
        key = (rank, repr(sorted(kwargs.items())))
        if key not in made:
            made[key] = thdc.megatron.GraphStep(64, 9, 4, rank, device="cpu",
                                                cache_dir=cache_dir, cp_sizes=SIZES, **kwargs)
        return made[key]

    return make


@pytest.mark.parametrize("rank", range(4))
def test_every_size_equals_the_fixed_cp_step_of_that_size(dynamic_step, rank):
    """Rank `rank` of four at every CP size and rung: the outputs of the
    fixed-CP step of that size for its CP rank in the sub-group (the
    reference's), on valid and invalid microbatches."""
    groups = {size: object() for size in SIZES}
    step = dynamic_step(rank, capacities=(32, 64), sequence_capacities=(5, 9),
                        cp_groups=groups)
    rng = np.random.default_rng(100 + rank)
    checked = 0
    for size in SIZES:
        local = rank % size
        for rung, (C, N) in enumerate(((32, 5), (64, 9))):
            variant = step.slot(0).variant(size, rung)
            assert (variant.cp, variant.C, variant.N) == (size, C, N)
            for _ in range(6):
                mb = invalidate(rng, random_microbatch(rng, C, size, N, rank=local), N)
                batch, params = variant(**step_inputs(mb, C, size, device="cpu"))
                assert not step_mismatches(outputs(variant), expect(mb, C, size, N)), (size, C)
                assert batch["tokens"].shape == (1, C)
                assert params.local_cp_size == size and params.cp_group is groups[size]
                assert params.max_seqlen_q == C * size
                assert params.cu_seqlens_q_padded.numel() == N + 1
                checked += 1
    assert checked == 36
    # The step's call picks the size from the batch's local_cp_size.
    mb = random_microbatch(rng, 64, 2, 9, rank=rank % 2)
    _, params = step(**step_inputs(mb, 64, 2, device="cpu"), local_cp_size=2)
    assert params.local_cp_size == 2
    assert not step_mismatches(outputs(step.slot(0).variant(2)), expect(mb, 64, 2, 9))


def test_a_planned_global_batch_is_trained_whole_and_only_once(dynamic_step):
    """A global batch planned for dynamic CP over four ranks, each
    microbatch run by every rank at its CP size and the sub-group's rows put
    back in sequence order: every valid token of every sequence is trained
    once, with its own label, and no padding row is."""
    rng = np.random.default_rng(7)
    C, N, ranks = 64, 9, 4
    valid = [int(v) for v in rng.integers(1, 200, size=30)]
    padded = planner.align_lengths(np.array(valid, np.int32), cp=ranks, dynamic_cp=True).tolist()
    plan = planner.dynamic_cp_plan(padded, C, cp=ranks, max_packed_sequences=N)
    assert len(plan.sizes) > 1, "the batch exercises more than one CP size"
    tokens = [rng.integers(1, 50000, size=v) for v in valid]
    steps = [dynamic_step(j, cp_order_index=True) for j in range(ranks)]
    trained = {}
    for m in range(len(plan)):
        j = 0
        while j < ranks:
            block, ids = plan.sub_group(m, j), plan.groups[m][j]
            size = len(block)
            cu, cup, rows = [0], [0], []
            for i in ids:
                rows.append(np.pad(tokens[i], (0, padded[i] - valid[i])))
                cu.append(cu[-1] + valid[i])
                cup.append(cup[-1] + padded[i])
            data = torch.from_numpy(np.concatenate(rows)).view(1, -1)
            mask = torch.from_numpy(np.concatenate(
                [np.r_[np.ones(valid[i]), np.zeros(padded[i] - valid[i])] for i in ids]
            ).astype(np.float32)).view(1, -1)
            batch = dict(tokens=data, labels=data + 1, position_ids=torch.zeros_like(data),
                         loss_mask=mask, cu_seqlens=torch.tensor(cu, dtype=torch.int32),
                         cu_seqlens_padded=torch.tensor(cup, dtype=torch.int32))
            gathered = {k: [] for k in ("tokens", "labels", "loss_mask")}
            for k in block:
                out, params = steps[k](**batch, local_cp_size=size)
                assert int(steps[k].slot(0).variant(size).status[0]) == 0
                assert params.local_cp_size == size
                for key in gathered:
                    gathered[key].append(out[key].reshape(-1).clone())
            variant = steps[block[0]].slot(0).variant(size)
            ordered = {k: variant.restore_cp_order(torch.cat(v)) for k, v in gathered.items()}
            for n, i in enumerate(ids):
                lo = cup[n]
                got = ordered["tokens"][lo:lo + valid[i]].numpy()
                assert np.array_equal(got, tokens[i])
                assert np.array_equal(ordered["labels"][lo:lo + valid[i]].numpy(), tokens[i] + 1)
                assert trained.setdefault(i, m) == m, f"sequence {i} trained twice"
            taken = ordered["loss_mask"]
            assert int(taken.sum()) == sum(valid[i] for i in ids), "no padding row is trained"
            j = block.stop
    assert sorted(trained) == list(range(len(valid)))


def test_dynamic_step_refusals(cache_dir):
    make = lambda **kw: thdc.megatron.GraphStep(64, 9, device="cpu", cache_dir=cache_dir, **kw)
    with pytest.raises(ValueError, match="largest CP size is the step's cp = 4"):
        make(cp=4, cp_sizes=(1, 2))
    with pytest.raises(ValueError, match="increasing"):
        make(cp=4, cp_sizes=(2, 1, 4))
    with pytest.raises(ValueError, match="rank 5 of 6 is in no sub-group of 4 ranks"):
        make(cp=6, cp_rank=5, cp_sizes=(1, 2, 4, 6))
    assert planner.dynamic_cp_sizes(6, rank=5) == (1, 2, 6)
    with pytest.raises(ValueError, match="bundles for it are not supported"):
        make(cp=2, cp_sizes=(1, 2), bundle="x.thdcb")
    with pytest.raises(TypeError, match="cp_groups must map a CP size"):
        make(cp=2, cp_sizes=(1, 2), cp_groups=3)
    step = make(cp=2, cp_sizes=(1, 2))
    with pytest.raises(ValueError, match=r"local_cp_size=4: the step runs CP sizes \[1, 2\]"):
        step.slot(0).variant(4)
    with pytest.raises(ValueError, match="reading it would synchronise"):
        step._check_size(torch.empty(1, device="meta"))
    assert step.slot(0).variant(1).packed_seq_params.cp_group is None
    fixed = make(cp=2)
    with pytest.raises(ValueError, match="GraphStep\\(cp_sizes=...\\)"):
        fixed.slot(0).variant(1)
