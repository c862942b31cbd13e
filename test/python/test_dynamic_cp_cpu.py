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


# What thdc's ValueError says for each way the framework's scheduler fails
# on a batch (a golden case's `kind`, and for an AssertionError its text),
# one of the alternatives given. The framework's fill loop under virtual
# pipeline stages runs forever where no sub-group can be widened onto the
# empty ranks; on some batches an earlier widening of it has already
# doubled a sub-group past the last rank (a microbatch of more ranks than
# there are, the "malformed" kind), which thdc refuses first.
_GROWN = "widening a sub-group onto the empty ranks makes a microbatch of"
_REFUSALS = {
    "IndexError": ("pushes the sub-groups after it past rank",),
    "endless": ("no sub-group can be widened onto the empty ranks", _GROWN),
    "malformed": (_GROWN,),
}
_ASSERTION_REFUSALS = {
    "requires CP size": ("CP ranks of C =",),
    "At least one sequence should fit": ("no sequence fits the whole DP x CP group",),
    "no tail microbatch has enough ids to split": ("no microbatch has more than one sub-group",),
    "CP size is not decreasing": ("not non-increasing",),
}


def _refusals(case):
    """The parts of thdc's error, one of which it has, for a golden case
    the framework fails on."""
    kind = case.get("kind") or ("endless" if case.get("endless") else
                                case["error"].split(":")[0])
    if kind == "AssertionError":
        for theirs, ours in _ASSERTION_REFUSALS.items():
            if theirs in case["error"]:
                return ours
    assert kind in _REFUSALS, f"no refusal known for the framework's {kind}: {case}"
    return _REFUSALS[kind]


def _assert_refused(case, plan):
    """thdc refuses the batch with a ValueError that names why, as the
    framework fails on it."""
    expected = _refusals(case)
    try:
        plan()
    except ValueError as error:
        assert any(part in str(error) for part in expected), (
            f"the framework: {case.get('error')}; thdc: {error}; case: {case}")
        return
    pytest.fail(f"thdc planned a batch the framework fails on "
                f"({case.get('error')}): {case}")


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


def test_scheduler_refuses_what_the_reference_framework_fails_on():
    """The batches the framework's scheduler fails on (an AssertionError: a
    sequence needs more ranks than there are) are refused by name."""
    with open(GOLDEN) as f:
        golden = json.load(f)
    cases = golden["refused_cases"]
    assert len(cases) == 7
    for case in cases:
        assert case["kind"] == "AssertionError", case
        _assert_refused(case, lambda: planner.dynamic_cp_plan(
            case["lengths"], case["C"], case["cp"], case["dp"],
            min_cp_size=case["min_cp_size"]))


def test_virtual_pipeline_alignment_equals_the_reference_frameworks():
    """With microbatch_group_size_per_vp_stage the framework splits
    microbatches until their count is a multiple of it
    (align_sample_id_groups); thdc's plans equal its 70 recorded ones, and
    where it gave up (10 cases) thdc refuses."""
    with open(GOLDEN) as f:
        golden = json.load(f)
    cases = golden["vpp_cases"]
    assert len(cases) == 80
    aligned = refused = 0
    for case in cases:
        group = case["microbatch_group_size_per_vp_stage"]
        plan = lambda: planner.dynamic_cp_plan(
            case["lengths"], case["C"], case["cp"], case["dp"],
            min_cp_size=case["min_cp_size"], microbatch_group_size_per_vp_stage=group)
        if case["groups"] is None:
            _assert_refused(case, plan)
            refused += 1
            continue
        made = plan()
        assert _as_lists(made) == case["groups"], case
        assert len(made) % group == 0
        check_plan(made, case["lengths"], case["C"], case["dp"] * case["cp"])
        aligned += 1
    assert (aligned, refused) == (70, 10)


@pytest.mark.parametrize("seed", range(3))
def test_virtual_pipeline_alignment_invariants(seed):
    """Random batches with a microbatch group: the count a multiple of it
    (or a refusal), every sequence once, every sub-group a whole block, the
    sequence cap kept."""
    rng = random.Random(1000 + seed)
    made = 0
    for _ in range(40):
        dp, cp = rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
        ranks, C, group = dp * cp, rng.choice([64, 512]), rng.choice([2, 3, 4])
        raw = [rng.randint(1, C * rng.choice([1, 1, 2, 4])) for _ in range(rng.randint(1, 50))]
        lengths = planner.align_lengths(np.array(raw, np.int32), cp=cp, dp=dp,
                                        dynamic_cp=True).tolist()
        lengths = [min(v, C * ranks) for v in lengths]
        try:
            plan = planner.dynamic_cp_plan(lengths, C, cp, dp, max_packed_sequences=9,
                                           microbatch_group_size_per_vp_stage=group)
        except ValueError as error:
            assert "no microbatch has more than one sub-group" in str(error) or \
                "needs" in str(error), error
            continue
        assert len(plan) % group == 0
        check_plan(plan, lengths, C, ranks, K=plan.max_real_seqs)
        made += 1
    assert made > 20


def check_plan(plan, lengths, C, ranks, K=None):
    """The invariants of a dynamic-CP plan (S3b)."""
    seen = []
    # The scheduler's sizes: powers of two from min_cp up to the rank count,
    # and the whole group (megatron-core has process groups for fewer when
    # the count is not a power of two; dynamic_cp_sizes gives those).
    sizes = {1 << i for i in range(ranks.bit_length()) if plan.min_cp_size <= 1 << i <= ranks}
    sizes.add(ranks)
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
    with pytest.raises(ValueError, match="microbatch 0 has 2 sequences on rank 3, more than N-1"):
        plan.microbatch_inputs(3, N=2)
    with pytest.raises(IndexError, match="2 microbatches over 4 ranks"):
        plan.local_rank(2, 0)
    assert planner.dynamic_cp_sizes(8) == (1, 2, 4, 8)
    # megatron-core's groups: 2**i for i < int(log2(W)), and W
    # (parallel_state.py:938-944 on dev): none of 8 ranks out of 12.
    assert planner.dynamic_cp_sizes(12, 2) == (2, 4, 12)
    assert planner.dynamic_cp_sizes(6) == (1, 2, 6)
    assert planner.dynamic_cp_sizes(1) == (1,) and planner.dynamic_cp_sizes(4, 4) == (4,)


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
        step.check_cp_size(torch.empty(1, device="meta"))
    assert step.slot(0).variant(1).packed_seq_params.cp_group is None
    fixed = make(cp=2)
    with pytest.raises(ValueError, match="GraphStep\\(cp_sizes=...\\)"):
        fixed.slot(0).variant(1)


def _dynamic_config(**fields):
    """test_megatron_cpu's config (C 64, N 9, cp 2) with dynamic CP on."""
    from test_megatron_cpu import _config

    return _config(**dict(dict(dynamic_context_parallel=True,
                               min_dynamic_context_parallel_size=1), **fields))


def _dynamic_pg(rank, ranks=4, cp=2, tp=(0, 1)):
    """Rank `rank` of `ranks` DP x CP ranks (dp = ranks / cp), one PP stage."""
    from types import SimpleNamespace

    from microbatches import LocalGroup

    return SimpleNamespace(tp=LocalGroup(*tp), cp=LocalGroup(rank % cp, cp),
                           pp=LocalGroup(0, 1), dp_cp=LocalGroup(rank, ranks))


# Layouts of four ranks into the aligned blocks dynamic CP forms.
LAYOUTS = ((4,), (2, 2), (2, 1, 1), (1, 1, 2), (1, 1, 1, 1))


def test_get_batch_with_dynamic_cp_gives_each_rank_its_sub_groups_step(cache_dir):
    """get_batch_on_this_rank_for_sequence_packing(dynamic_cp=True) on four
    DP x CP ranks (dp 2 x cp 2, one process each): every microbatch's
    sub-groups laid out in aligned blocks, each rank's outputs those of the
    fixed-CP step of its sub-group's size for its rank in it (the
    reference's), on valid and invalid microbatches; PackedSeqParams carry
    the size and the sub-group; the size given as an int or a CPU tensor."""
    M = thdc.megatron
    groups = {size: object() for size in SIZES}
    ranks, C, N = 4, 64, 9
    batches = [M.SequencePackingBatches(device="cpu", cache_dir=cache_dir, cp_groups=groups)
               for _ in range(ranks)]
    config = _dynamic_config()
    rng = np.random.default_rng(123)
    checked = {size: 0 for size in SIZES}
    for m in range(20):
        start = 0
        for size in LAYOUTS[m % len(LAYOUTS)]:
            mb = invalidate(rng, random_microbatch(rng, C, size, N, rank=0), N)
            given = dict(step_inputs(mb, C, size, device="cpu"), max_seqlen=C * size)
            for k in range(start, start + size):
                cp_size = size if m % 2 else torch.tensor([size], dtype=torch.int32)
                tokens, labels, loss_mask, attention_mask, position_ids, params, mask = \
                    batches[k](iter([dict(given, local_cp_size=cp_size)]), dynamic_cp=True,
                               pg_collection=_dynamic_pg(k), config=config)
                slot = batches[k].last
                assert (slot.cp, slot.step.cp, slot.step.cp_sizes) == (size, 4, SIZES)
                local = dict(mb, cp_rank=np.array([k - start], np.int32))
                assert not step_mismatches(outputs(slot), expect(local, C, size, N)), (m, k)
                assert tokens.shape == mask.shape == (1, C) and attention_mask is None
                assert params.local_cp_size == size and params.cp_group is groups[size]
                assert params.max_seqlen_q == C * size
                checked[size] += 1
            start += size
        assert start == ranks
    assert all(checked.values()) and sum(checked.values()) == 20 * ranks
    # One step per rank, its variants reused from call to call.
    assert all(len(b.steps) == 1 for b in batches)


def test_get_batch_with_dynamic_cp_on_the_other_tp_ranks(cache_dir, monkeypatch):
    """TP rank 1 of a DP x CP rank gets the size from its own iterator (the
    plan's, on the host) and receives TP rank 0's outputs: the slot's whole
    buffer, so the counts agree whatever size each picked, with the sender's
    layout in its header. The same size gives TP rank 0's outputs; another
    is flagged layout_mismatch on the device and leaves the receiver an
    empty microbatch. None there is refused by name."""
    import torch.distributed as dist

    M = thdc.megatron
    sent = {}
    current = {"rank": 0}

    def broadcast(tensor, src, group=None):  # src's bytes to the others
        if current["rank"] == src:
            sent["bytes"] = tensor.clone()
        else:
            assert tensor.numel() == sent["bytes"].numel(), "the counts must agree"
            tensor.copy_(sent["bytes"])

    def all_gather(tensors, tensor, group=None):  # the ranks' steps, as far as they called
        sent[current["rank"]] = tensor.clone()
        for rank, out in enumerate(tensors):
            out.copy_(sent.get(rank, tensor))

    monkeypatch.setattr(dist, "get_process_group_ranks", lambda group: [0, 1])
    monkeypatch.setattr(dist, "get_rank", lambda group=None: current["rank"])
    monkeypatch.setattr(dist, "broadcast", broadcast)
    monkeypatch.setattr(dist, "all_gather", all_gather)
    groups = {size: object() for size in SIZES}
    config = _dynamic_config()
    rng = np.random.default_rng(5)
    mb = random_microbatch(rng, 64, 2, 9, rank=1)
    given = dict(step_inputs(mb, 64, 2, device="cpu"), max_seqlen=128, local_cp_size=2)
    make = lambda: M.SequencePackingBatches(device="cpu", cache_dir=cache_dir, cp_groups=groups,
                                            seq_idx=True, cp_order_index=True)
    zero, one = make(), make()
    call = lambda batches, iterator, tp_rank: batches(
        iterator, dynamic_cp=True, pg_collection=_dynamic_pg(3, tp=(tp_rank, 2)), config=config)
    call(zero, iter([given]), 0)
    current["rank"] = 1
    *_, params, _ = call(one, iter([{"local_cp_size": 2}]), 1)
    assert params.local_cp_size == 2 and one.last.cp == 2
    assert torch.equal(one.last.slot.buffer, zero.last.slot.buffer)
    local = dict(mb, cp_rank=np.array([1], np.int32))
    assert not step_mismatches(outputs(one.last), expect(local, 64, 2, 9))
    # TP rank 0 ran size 2; this rank's plan says 4 (its rows would be laid
    # out for 4 ranks): flagged, and nothing of the sender's rows kept.
    current["rank"] = 0
    call(zero, iter([given]), 0)
    current["rank"] = 1
    tokens, labels, loss_mask, *_ = call(one, iter([4]), 1)
    assert one.last.cp == 4
    assert int(one.last.status[0]) == thdc.STATUS_BITS["layout_mismatch"]
    assert loss_mask.sum() == 0 and not one.last.padding_mask_full.logical_not().any()
    with pytest.raises(ValueError, match="dynamic_cp=True on TP rank 1: .* an iterator of "
                                         "the plan's sizes"):
        call(one, None, 1)


def test_dynamic_cp_sub_groups_must_be_the_ranks_the_step_slices_for(cache_dir):
    """A process group of cp_groups with rank() and size() must be the
    rank's sub-group of that size; a lookup that fails is named."""
    from microbatches import LocalGroup

    make = lambda groups, rank=3: thdc.megatron.GraphStep(
        64, 9, 4, rank, device="cpu", cache_dir=cache_dir, cp_sizes=SIZES, cp_groups=groups)
    good = {1: LocalGroup(0, 1), 2: LocalGroup(1, 2), 4: LocalGroup(3, 4)}
    assert make(good).slot(0).variant(2).packed_seq_params.cp_group is good[2]
    with pytest.raises(ValueError, match="group for CP size 2 has 2 ranks with this rank at 0; "
                                         "the step slices for rank 1 of 2"):
        make({**good, 2: LocalGroup(0, 2)})
    with pytest.raises(ValueError, match="group for CP size 4 has 2 ranks"):
        make({**good, 4: LocalGroup(1, 2)})

    def megatron_like(group_size):  # W = 4 made without size 2
        return {1: good[1], 4: good[4]}[group_size]

    with pytest.raises(ValueError, match="cp_groups gives no process group for CP size 2 "
                                         "\\(KeyError"):
        make(megatron_like)


@pytest.mark.parametrize("fields, batch, call, error, message", [
    ({}, dict(local_cp_size=torch.empty(1, dtype=torch.int32, device="meta")), {}, ValueError,
     "the batch: local_cp_size is a tensor on meta: reading it would synchronise"),
    ({}, dict(local_cp_size=None), {}, ValueError, "the batch: local_cp_size is None"),
    ({}, dict(local_cp_size=3), {}, ValueError,
     "the batch: local_cp_size=3: the step runs CP sizes [1, 2, 4]"),
    ({}, {}, {}, KeyError, "the batch lacks local_cp_size"),
    (dict(dynamic_context_parallel=False), dict(local_cp_size=2), {}, None,
     "config.dynamic_context_parallel=False but the call has dynamic_cp=True"),
    (dict(min_dynamic_context_parallel_size=3), dict(local_cp_size=2), {}, None,
     "config.min_dynamic_context_parallel_size over 4 DP x CP ranks"),
    (dict(min_dynamic_context_parallel_size=2), dict(local_cp_size=1), {}, ValueError,
     "the batch: local_cp_size=1: the step runs CP sizes [2, 4]"),
])
def test_get_batch_with_dynamic_cp_refusals(cache_dir, fields, batch, call, error, message):
    import re

    M = thdc.megatron
    rng = np.random.default_rng(9)
    mb = random_microbatch(rng, 64, 2, 9, rank=0)
    given = dict(step_inputs(mb, 64, 2, device="cpu"), max_seqlen=128, **batch)
    batches = M.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                       cp_groups={s: None for s in SIZES})
    with pytest.raises(error or M.ConfigError, match=re.escape(message)):
        batches(iter([given]), dynamic_cp=True, pg_collection=_dynamic_pg(0),
                config=_dynamic_config(**fields), **call)


def test_get_batch_dynamic_cp_switch_must_match_the_config(cache_dir):
    M = thdc.megatron
    rng = np.random.default_rng(10)
    mb = random_microbatch(rng, 64, 2, 9, rank=0)
    given = dict(step_inputs(mb, 64, 2, device="cpu"), max_seqlen=128)
    batches = M.SequencePackingBatches(device="cpu", cache_dir=cache_dir)
    with pytest.raises(M.ConfigError, match="config.dynamic_context_parallel=True but the "
                                            "call has dynamic_cp=False"):
        batches(iter([given]), pg_collection=_dynamic_pg(0), config=_dynamic_config())
    with pytest.raises(M.ConfigError, match="config.hybrid_context_parallel=True"):
        batches(iter([given]), pg_collection=_dynamic_pg(0),
                config=_dynamic_config(dynamic_context_parallel=None,
                                       hybrid_context_parallel=True))
    # Without dynamic CP a batch planned for it is refused, not sliced over
    # the fixed CP group.
    with pytest.raises(ValueError, match="local_cp_size"):
        batches(iter([dict(given, local_cp_size=2)]), pg_collection=_dynamic_pg(0),
                config=_dynamic_config(dynamic_context_parallel=False))
    with pytest.raises(M.ConfigError, match="configure\\(cp_sizes=...\\)"):
        batches.configure(cp_sizes=(1, 2))
    # Without megatron-core and without cp_groups the sub-groups are missing.
    try:
        import megatron.core  # noqa: F401
    except Exception:
        with pytest.raises(M.ConfigError, match="configure\\(cp_groups=...\\)"):
            batches(iter([dict(given, local_cp_size=2)]), dynamic_cp=True,
                    pg_collection=_dynamic_pg(0), config=_dynamic_config())


RANKS_GOLDEN = os.path.join(os.path.dirname(__file__), "data", "dynamic_cp_ranks_golden.json")


@pytest.mark.parametrize("part", ["cases", "vpp_cases"])
def test_scheduler_at_every_rank_count_equals_the_reference_frameworks_or_refuses(part):
    """megatron-core's scheduler at W = 1..32 DP x CP ranks (most not powers
    of two; data/dynamic_cp_ranks_golden.json, make_dynamic_cp_golden.py
    --ranks), without and with virtual pipeline stages: where it plans, the
    same groups; where it fails, a ValueError that says why. It fails with
    an IndexError when filling the empty ranks pushes sub-groups past the
    last rank (where thdc wrote past its rank array before: a heap overflow
    reachable from Python); and with virtual pipeline stages with an
    AssertionError, an endless loop where no sub-group can be widened onto
    the empty ranks, or a microbatch of more ranks than there are (where
    thdc reported an internal error before)."""
    with open(RANKS_GOLDEN) as f:
        golden = json.load(f)
    kinds = {}
    for case in golden[part]:
        group = case.get("microbatch_group_size_per_vp_stage")
        plan = lambda: planner.dynamic_cp_plan(
            case["lengths"], case["C"], case["cp"], case["dp"],
            min_cp_size=case["min_cp_size"], microbatch_group_size_per_vp_stage=group)
        if "groups" in case:
            assert _as_lists(plan()) == case["groups"], case
            kind = "groups"
        else:
            _assert_refused(case, plan)
            kind = case["kind"]
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {
        "cases": {"groups": 121, "IndexError": 71},
        "vpp_cases": {"groups": 33, "IndexError": 42, "AssertionError": 19,
                      "endless": 24, "malformed": 10},
    }[part]


def test_the_rank_filling_overflow_reproducer():
    """The reproducer: two sequences of 200 rows over 5 ranks of C = 128."""
    with pytest.raises(ValueError, match="dynamic CP over 5 ranks cannot fill the empty ranks"):
        planner.dynamic_cp_plan([200, 200], 128, cp=5, dp=1)


@pytest.mark.parametrize("seed", range(4))
def test_scheduler_property_at_every_rank_count(seed):
    """Random batches at every W from 1 to 32: a plan that keeps the
    scheduler's invariants, or a ValueError; never a crash."""
    rng = random.Random(100 + seed)
    outcomes = {"planned": 0, "refused": 0}
    for ranks in range(1, 33):
        cps = [c for c in (1, 2, 4, 8) if ranks % c == 0]
        for _ in range(5):
            cp = rng.choice(cps)
            dp = ranks // cp
            C = rng.choice([64, 128, 512])
            min_cp = rng.choice([m for m in (1, 2, 4) if m <= ranks])
            top = C * (1 << (ranks.bit_length() - 1))
            lengths = [min(top, rng.randint(1, C * rng.choice([1, 1, 2, 4])))
                       for _ in range(rng.randint(1, 40))]
            N = rng.choice([None, 4, 9])
            try:
                plan = planner.dynamic_cp_plan(lengths, C, cp, dp, min_cp_size=min_cp,
                                               max_packed_sequences=N, alignment_set=False)
            except ValueError:
                outcomes["refused"] += 1
                continue
            outcomes["planned"] += 1
            check_plan(plan, lengths, C, ranks, plan.max_real_seqs)
    assert outcomes["planned"] > 0
