"""thdc.planner and examples/pack_microbatch.mlir from Python, on the CPU: the
planner's golden vectors (docs/semantics.md S1, S2, S3, S12) and errors,
thdc.reference.pack_microbatch's golden vectors, the pipeline compiled for
the host against the reference on random pools and plans (every DP x CP
rank), and the host-side logic of examples/python/global_batch.py (the
lengths' exchange, the planning, the check)."""
import ast
import os
import re
import sys

import numpy as np
import pytest

import thdc
import thdc.planner as planner
from conftest import SOURCE_DIR
from microbatches import POOLS, random_pool, reference_pack

sys.path.insert(0, os.path.join(SOURCE_DIR, "examples", "python"))
import global_batch  # noqa: E402  (examples/python/global_batch.py)

PACK = os.path.join(SOURCE_DIR, "examples", "pack_microbatch.mlir")
EXAMPLE = [5, 3, 4, 2, 2, 1, 6]  # S3's padded lengths, C = 4, cp = 2


#
# S1, S2, S3, S12
#

def test_align_lengths_golden():
    assert planner.align_lengths([3, 2, 4], cp=2).tolist() == [4, 4, 4]
    assert planner.align_lengths(np.array([3, 2, 4, 5]), 2).tolist() == [4, 4, 4, 8]
    assert planner.align_lengths([3, 2, 4], cp=1).tolist() == [3, 2, 4]
    assert planner.align_lengths([3, 9], cp=2, tp=2, sequence_parallel=True).tolist() == [8, 16]
    assert planner.pad_granularity(2, tp=2, sequence_parallel=True) == 8
    assert planner.pad_granularity(2, dp=2, dynamic_cp=True) == 8
    assert planner.align_lengths([], cp=2).dtype == np.int32
    with pytest.raises(ValueError, match=r"valid length v\[1\] = -1 is negative"):
        planner.align_lengths([3, -1], cp=2)
    with pytest.raises(ValueError, match="needs cp, tp, dp and the multiple >= 1"):
        planner.align_lengths([3], cp=0)
    with pytest.raises(ValueError, match=r"valid_lengths\[0\] = 4294967296 is outside the int32"):
        planner.align_lengths([1 << 32], cp=1)


def test_low_precision_multiples_golden():
    # G = tpPad * lcm(cpPad, share * m): every rank's share of every sequence
    # is a multiple of m.
    assert planner.pad_granularity(1, multiple=16) == 16
    assert planner.pad_granularity(2, multiple=16) == 32
    assert planner.pad_granularity(2, tp=2, sequence_parallel=True, multiple=16) == 64
    assert planner.pad_granularity(1, tp=4, sequence_parallel=True, multiple=128) == 512
    assert planner.pad_granularity(2, dp=2, dynamic_cp=True, multiple="mxfp8") == 128
    assert planner.pad_granularity(4, multiple=1) == planner.pad_granularity(4) == 8
    assert planner.align_lengths([3, 40, 0], cp=2, multiple=16).tolist() == [32, 64, 0]
    assert planner.align_lengths([3, 40], cp=2, multiple=np.int64(16)).tolist() == [32, 64]
    assert planner.align_lengths([3, 300], cp=1, tp=4, sequence_parallel=True,
                                 multiple="hybridep").tolist() == [256, 512]


def test_low_precision_recipes():
    # megatron-core's numbers (get_fp8_align_size; HybridEP's 64).
    assert planner.LOW_PRECISION_MULTIPLES == {
        "fp8": 16, "delayed": 16, "tensorwise": 16, "blockwise": 16, "custom": 16,
        "mxfp8": 32, "hybridep": 64}
    for recipe, multiple in planner.LOW_PRECISION_MULTIPLES.items():
        assert planner.pad_granularity(2, multiple=recipe) == \
            planner.pad_granularity(2, multiple=multiple)
        assert planner.align_lengths([1], cp=3, multiple=recipe).tolist() == \
            planner.align_lengths([1], cp=3, multiple=multiple).tolist()
    # Each rank's share (p / cp with zigzag's two chunks) of every length.
    for cp in (1, 2, 3, 4):
        for recipe, m in planner.LOW_PRECISION_MULTIPLES.items():
            padded = planner.align_lengths([1, 17, 129, 1000], cp=cp, multiple=recipe)
            assert all(p % (cp * m) == 0 and p % (2 * cp if cp > 1 else 1) == 0
                       for p in padded.tolist())
    with pytest.raises(ValueError, match="^align_lengths: unknown low-precision recipe 'fp4'; "
                                         "the recipes are 'fp8', 'delayed', 'tensorwise', "
                                         "'blockwise', 'custom', 'mxfp8', 'hybridep'$"):
        planner.align_lengths([3], cp=2, multiple="fp4")
    with pytest.raises(ValueError, match="^pad_granularity: unknown low-precision recipe 'FP8'"):
        planner.pad_granularity(2, multiple="FP8")
    with pytest.raises(ValueError, match=r"multiple >= 1 \(cp = 2, tp = 1, dp = 1, multiple = 0\)"):
        planner.align_lengths([3], cp=2, multiple=0)
    with pytest.raises(ValueError, match="multiple = -16"):
        planner.pad_granularity(1, multiple=-16)


def test_sequence_cap_golden():
    def cap(n, alignment, dummy):
        return planner.plan([1], 4, 2, max_packed_sequences=n, alignment_set=alignment,
                            dummy_tail=dummy).max_real_seqs

    assert cap(32, True, True) == 31
    assert cap(32, True, False) == 32
    assert cap(32, False, True) == 32
    assert cap(None, True, True) is None
    with pytest.raises(ValueError, match="must be >= 2 when THD padding appends"):
        cap(1, True, True)


def test_next_fit_golden():
    plan = planner.plan(EXAMPLE, C=4, cp=2, max_packed_sequences=3, alignment_set=False)
    assert plan.packs == [[0, 1], [2, 3, 4], [5, 6]]
    assert plan.pack_tokens == [8, 8, 7]
    assert plan.capacity == 8 and plan.max_real_seqs == 3 and plan.algorithm == "next_fit"
    assert plan.num_microbatches == len(plan) == 3 and (plan.dp, plan.cp) == (1, 2)
    assert plan.groups == [[pack, pack] for pack in plan.packs]
    assert repr(plan) == "Plan(3 microbatches, 3 packs, capacity 8, dp 1, cp 2, next_fit)"

    dp2 = planner.plan(EXAMPLE, 4, 2, dp=2, max_packed_sequences=3, alignment_set=False)
    assert dp2.packs == [[0, 1], [2, 3, 4], [5], [6]]
    assert dp2.groups[1] == [[5], [5], [6], [6]]
    # N = 4 with the dummy: K = 3, the cap closes the first pack.
    assert planner.plan([1] * 5, 4, 2, max_packed_sequences=4).packs == [[0, 1, 2], [3, 4]]
    equal = planner.plan([3] * 7, 4, 2, dp=2, max_packed_sequences=2, alignment_set=False)
    assert equal.packs == [[0, 1], [2, 3], [4, 5], [6]]
    assert equal.groups[0] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    vpp = planner.plan([2, 2, 2, 2], 8, 1, vpp_group=2)
    assert vpp.packs == [[0, 1, 2], [3]]


def test_balanced_golden():
    plan = planner.plan(EXAMPLE, 4, 2, max_packed_sequences=3, alignment_set=False,
                        algorithm="balanced")
    assert plan.algorithm == "first_fit_decreasing"
    assert plan.packs == [[0, 1], [2, 4, 5], [3, 6]]
    assert plan.pack_tokens == [8, 7, 8]
    # Next-fit: [5] [4,3] [4]; first-fit decreasing: [5,3] [4,4].
    assert planner.plan([5, 4, 3, 4], 4, 2, algorithm="balanced").num_microbatches == 2
    assert planner.plan([5, 4, 3, 4], 4, 2).num_microbatches == 3
    ffd = planner.plan([1, 1, 2, 1, 1, 6], 4, 2, max_packed_sequences=3, alignment_set=False,
                       algorithm="first_fit_decreasing")
    assert ffd.packs == [[0, 1, 3], [2, 5], [4]]


def test_plan_errors():
    with pytest.raises(ValueError, match=r"sequence 0 has padded length p\[0\] = 9, more than "
                                         r"the pack budget C\*cp = 4\*2 = 8"):
        planner.plan([9, 3], 4, 2)
    with pytest.raises(ValueError, match=r"p\[1\] = -1 is negative"):
        planner.plan([3, -1], 4, 2)
    with pytest.raises(ValueError, match="Not enough samples to move"):
        planner.plan([3], 4, 2, dp=2)
    with pytest.raises(ValueError, match="C = 0"):
        planner.plan([3], 0, 2)
    with pytest.raises(ValueError, match="microbatch_group_size_per_vp_stage = 0"):
        planner.plan([3], 4, 2, vpp_group=0)
    with pytest.raises(ValueError, match="algorithm must be 'next_fit', 'balanced'"):
        planner.plan([3], 4, 2, algorithm="best")
    with pytest.raises(ValueError, match="outside the int32 range"):
        planner.plan([1 << 31], 4, 2)


def test_microbatch_inputs_golden():
    plan = planner.plan(EXAMPLE, 4, 2, max_packed_sequences=4)
    for rank in (0, 1):
        sample_ids, num_seqs = planner.microbatch_inputs(plan, rank, 4)
        assert sample_ids.dtype == np.int32 and num_seqs.dtype == np.int32
        assert sample_ids.tolist() == [[0, 1, 0], [2, 3, 4], [5, 6, 0]]
        assert num_seqs.tolist() == [2, 3, 2]
    dp2 = planner.plan(EXAMPLE, 4, 2, dp=2, max_packed_sequences=3, alignment_set=False)
    assert planner.microbatch_inputs(dp2, 1, 4)[0].tolist() == [[0, 1, 0], [5, 0, 0]]
    assert planner.microbatch_inputs(dp2, 3, 4)[0].tolist() == [[2, 3, 4], [6, 0, 0]]
    assert planner.microbatch_inputs(dp2, 3, 4)[1].tolist() == [3, 1]
    empty_ids, empty_counts = planner.microbatch_inputs(planner.plan([], 4, 2), 0, 6)
    assert empty_ids.shape == (0, 5) and empty_counts.shape == (0,)


def test_microbatch_inputs_errors():
    plan = planner.plan(EXAMPLE, 4, 2, max_packed_sequences=3, alignment_set=False)
    with pytest.raises(ValueError, match="microbatch 1 has 3 sequences on rank 0, more than N-1 = 2"):
        planner.microbatch_inputs(plan, 0, 3)
    with pytest.raises(ValueError, match=r"rank 2 is outside \[0, dp\*cp = 1\*2 = 2\)"):
        planner.microbatch_inputs(plan, 2, 4)
    with pytest.raises(ValueError, match="N = 1 must be >= 2"):
        planner.microbatch_inputs(plan, 0, 1)


def test_s12_golden():
    # GBS, dp, cp, C, Lmax, vppGroup, N (with the dummy: K = N-1) -> U.
    assert planner.max_microbatches(64, 2048, 4096, 2, dp=2, max_packed_sequences=32) == 8
    assert planner.max_microbatches(64, 2048, 4096, 2, dp=2, max_packed_sequences=32,
                                    vpp_group=3) == 9
    assert planner.max_microbatches(64, 2048, 4096, 2, dp=2, max_packed_sequences=3) == 16
    assert planner.max_microbatches(64, 2048, 1024, 1, dp=2) == 32
    assert planner.max_microbatches(1, 128, 1024, 1, dp=4) == 1
    with pytest.raises(ValueError, match="needs positive inputs"):
        planner.max_microbatches(0, 2048, 4096, 2)
    assert planner.graph_capture_count(5, 8) == 8
    assert planner.graph_capture_count(9, 8) == 9
    assert planner.graph_capture_count(5, 8, use_runtime_count=True) == 5
    # The bound holds: 64 sequences of 2048 tokens in next-fit packs.
    assert planner.plan([2048] * 64, 4096, 2, dp=2, max_packed_sequences=32).num_microbatches == 8


#
# thdc.reference.pack_microbatch
#

def spec_pool():
    """The running example of docs/semantics.md in a pool: A = [11,12,13] at
    row 5, B = [21,22] at row 0, C = [31,32,33,34] at row 20 (labels +100,
    loss masks all 1.0), five more samples; C = 8, cp = 2, N = 6, P = 64,
    S = 8."""
    tokens = np.full(64, -1, np.int64)
    offsets = np.array([5, 0, 20, 30, 30, 31, 36, 44], np.int32)
    lengths = np.array([3, 2, 4, 0, 1, 5, 8, 2], np.int32)
    for sample, (start, length) in enumerate(zip(offsets, lengths)):
        tokens[start:start + length] = 10 * (sample + 1) + np.arange(1, length + 1)
    mask = np.where(tokens >= 0, 1.0, -1.0).astype(np.float32)
    return {"token_pool": tokens, "label_pool": tokens + 100, "loss_mask_pool": mask,
            "sample_offsets": offsets, "sample_lengths": lengths}


def test_reference_pack_microbatch_golden():
    pool = spec_pool()
    ids = [0, 1, 2, -1, 99]
    r0 = reference_pack(pool, ids, 3, 0, 8, 2, 6)
    r1 = reference_pack(pool, ids, 3, 1, 8, 2, 6)
    assert r0["tokens"].tolist() == [11, 0, 21, 0, 31, 34, 0, 0]
    assert r1["tokens"].tolist() == [12, 13, 22, 0, 32, 33, 0, 0]
    assert r0["labels"].tolist() == [111, 0, 121, 0, 131, 134, 0, 0]
    assert r0["loss_mask"].tolist() == [1, 0, 1, 0, 1, 1, 0, 0]
    assert r1["loss_mask"].tolist() == [1, 1, 1, 0, 1, 1, 0, 0]
    assert r0["loss_mask"].dtype == np.float32
    assert r1["position_ids"].tolist() == [1, 2, 1, 0, 1, 2, 0, 0]
    assert r0["padding_mask"].tolist() == [0, 1, 0, 1, 0, 0, 1, 1]
    for out in (r0, r1):
        assert out["cu_seqlens_padded"].tolist() == [0, 4, 8, 12, 16, 16, 16]
        assert out["cu_seqlens"].tolist() == [0, 3, 5, 9, 13, 13, 13]
        assert out["max_seqlen"] == 16 and out["status"] == 0


def test_reference_pack_microbatch_bad_data_and_shapes():
    pool = spec_pool()
    # num_seqs = N leaves no slot for the dummy: status bit 1, empty microbatch.
    out = reference_pack(pool, [0, 1, 3, 4, 7], 6, 0, 8, 2, 6)
    assert out["status"] == 1 and thdc.describe_status(out["status"]) == "num_seqs_out_of_range"
    assert out["tokens"].tolist() == [0] * 8 and out["loss_mask"].tolist() == [0] * 8
    assert out["padding_mask"].tolist() == [1] * 8
    assert out["cu_seqlens_padded"].tolist() == [0, 16, 16, 16, 16, 16, 16]
    with pytest.raises(ValueError, match="sample_ids has 4 entries; it must have N-1 = 5"):
        reference_pack(pool, [0, 1, 2, 3], 3, 0, 8, 2, 6)
    with pytest.raises(ValueError, match="C = 7 must be even"):
        reference_pack(pool, [0, 1, 2, 3, 4], 3, 0, 7, 2, 6)
    short = dict(pool, loss_mask_pool=pool["loss_mask_pool"][:63])
    with pytest.raises(ValueError, match="loss_mask_pool have 64/64/63 rows"):
        reference_pack(short, [0, 1, 2, 3, 4], 3, 0, 8, 2, 6)


#
# The compiled pipeline against the reference
#

def marked_outputs(kernel):
    """Output arrays filled with a marker (NaN for floats), so that an
    element the kernel does not write shows up as a difference."""
    return {a.name: np.full(a.shape, np.nan if a.dtype.startswith("float") else 0x5A,
                            dtype=a.dtype)
            for a in thdc.signature(kernel) if a.direction == "output"}


SHAPES = [(64, 1, 9, 2048, 48), (64, 2, 9, 4096, 64), (96, 4, 17, 8192, 96)]


@pytest.mark.parametrize("C,cp,N,P,S", SHAPES)
def test_pack_microbatch_matches_reference(compile_host, C, cp, N, P, S):
    """Random pools planned into microbatches (next-fit and balanced, dp 1
    and 2): every microbatch of every DP x CP rank, compiled pipeline
    against thdc.reference.pack_microbatch."""
    kernel = compile_host(PACK, C=C, cp=cp, N=N, P=P, S=S)
    assert [a.name for a in thdc.signature(kernel) if a.direction == "input"] == [
        *POOLS, "sample_ids", "num_seqs", "cp_rank"]
    rng = np.random.default_rng(C * 100 + cp * 10 + N)
    runs, fractions = 0, 0
    for trial in range(12):
        pool, count = random_pool(rng, C, cp, P, S)
        dp = 1 + trial % 2
        algorithm = ("next_fit", "balanced")[trial // 2 % 2]
        padded = planner.align_lengths(pool["sample_lengths"][:count], cp)
        try:
            plan = planner.plan(padded, C, cp, dp=dp, max_packed_sequences=N,
                                algorithm=algorithm)
        except ValueError as error:  # dp = 2 needs at least two packs
            assert "Not enough samples to move" in str(error)
            continue
        assert sorted(i for pack in plan.packs for i in pack) == list(range(count))
        for rank in range(dp * cp):
            sample_ids, num_seqs = planner.microbatch_inputs(plan, rank, N)
            for m in range(plan.num_microbatches):
                inputs = dict(pool, sample_ids=sample_ids[m], num_seqs=num_seqs[m:m + 1],
                              cp_rank=np.array([rank % cp], np.int32))
                outputs = kernel(**inputs, out=marked_outputs(kernel))
                expected = reference_pack(pool, sample_ids[m], int(num_seqs[m]), rank % cp,
                                          C, cp, N)
                assert expected["status"] == 0
                bad = global_batch.differences(outputs._asdict(), expected)
                assert bad == [], f"trial {trial}, rank {rank}, microbatch {m}: {bad} differ"
                fractions += bool(((expected["loss_mask"] > 0) & (expected["loss_mask"] < 1)).any())
                runs += 1
    assert runs > 50 and fractions > 0


#
# examples/python/global_batch.py, without the GPU
#

@pytest.mark.parametrize("world", [1, 2, 3])
def test_lengths_exchange_restores_the_global_order(world):
    batch = global_batch.draw_global_batch(3, 100, 64, 2, 8192, 128)
    n = batch["num_samples"]
    lengths = batch["sample_lengths"][:n]
    size = global_batch.share_size(n, world)
    shares = [global_batch.local_share(lengths, rank, world) for rank in range(world)]
    assert sum(len(share) for share in shares) == n
    gathered = np.concatenate([np.pad(s, (0, size - len(s)), constant_values=-1) for s in shares])
    assert np.array_equal(global_batch.interleave_shares(gathered, n, world), lengths)


def test_global_batch_draw():
    C, cp, P, S = 4096, 2, 1 << 20, 512
    batch = global_batch.draw_global_batch(0, 256, C, cp, P, S)
    again = global_batch.draw_global_batch(0, 256, C, cp, P, S)
    assert all(np.array_equal(batch[k], again[k]) for k in POOLS)
    n = batch["num_samples"]
    lengths, offsets = batch["sample_lengths"][:n], batch["sample_offsets"][:n]
    assert n == 256 and lengths.min() >= 1 and lengths.max() <= C * cp
    assert np.array_equal(offsets[1:], (offsets + lengths)[:-1])
    ignored = batch["label_pool"] == global_batch.IGNORE
    assert ignored.any() and not batch["loss_mask_pool"][ignored].any()
    small = global_batch.draw_global_batch(0, 256, C, cp, 50000, S)
    assert 0 < small["num_samples"] < 256
    assert small["sample_lengths"].sum() <= 50000


@pytest.mark.parametrize("cp", [1, 2])
def test_global_batch_example_on_the_host(compile_host, cp):
    """The example's flow for every rank of a CP group, with the host code:
    the shares exchanged, the plan, each microbatch's launch against the
    reference."""
    C, N, P, S = 256, 17, 16384, 128
    kernel = compile_host(PACK, C=C, cp=cp, N=N, P=P, S=S)
    batch = global_batch.draw_global_batch(11, 120, C, cp, P, S)
    n = batch["num_samples"]
    size = global_batch.share_size(n, cp)
    gathered = np.concatenate([
        np.pad(global_batch.local_share(batch["sample_lengths"][:n], rank, cp),
               (0, size - len(range(rank, n, cp))), constant_values=-1) for rank in range(cp)])
    lengths = global_batch.interleave_shares(gathered, n, cp)
    pools = {name: batch[name] for name in POOLS}
    for algorithm in ("next_fit", "balanced"):
        for rank in range(cp):
            plan, sample_ids, num_seqs = global_batch.plan_microbatches(
                lengths, C, cp, N, rank, algorithm)
            assert plan.num_microbatches <= planner.max_microbatches(n, C * cp, C, cp,
                                                                     max_packed_sequences=N)
            packed = [i for m in range(plan.num_microbatches) for i in sample_ids[m, :num_seqs[m]]]
            assert sorted(packed) == list(range(n))
            expected = global_batch.reference_outputs(batch, sample_ids, num_seqs, rank, C, cp, N)
            for m in range(plan.num_microbatches):
                out = kernel(**pools, sample_ids=sample_ids[m], num_seqs=num_seqs[m:m + 1],
                             cp_rank=np.array([rank], np.int32), out=marked_outputs(kernel))
                assert global_batch.differences(out._asdict(), expected[m]) == []
                assert expected[m]["status"] == 0


#
# Capacity ladders
#

def test_ladder_plan_golden():
    """Planner.h's golden: next-fit packs of 8, 8, 7 tokens over rows {2, 4}
    at cp 2 all need the top rung; [3,1,6,7,2] packs to rungs 0, 1, 2, 0."""
    plan = planner.plan(EXAMPLE, 4, 2, max_packed_sequences=3, alignment_set=False,
                        dummy_tail=False)
    ladder = planner.assign_rungs(plan, EXAMPLE, [2, 4], max_packed_sequences=3,
                                  alignment_set=False, dummy_tail=False)
    assert ladder.pack_rungs == [1, 1, 1] and ladder.padded_rows == 1
    assert ladder.pack_max_lengths == [5, 4, 6]
    lengths = [3, 1, 6, 7, 2]
    plan = planner.plan(lengths, 4, 2, max_packed_sequences=3, alignment_set=False,
                        dummy_tail=False)
    ladder = planner.assign_rungs(plan, lengths, [2, 3, 4], max_packed_sequences=3,
                                  alignment_set=False, dummy_tail=False)
    assert ladder.pack_rungs == [0, 1, 2, 0]
    assert ladder.rows == 4 + 6 + 8 + 4 and ladder.tokens == 19
    assert ladder.rung(2, 1) == 2
    with pytest.raises(IndexError, match="the plan has 4 microbatches"):
        ladder.rung(4, 0)


def test_ladder_errors_name_the_rung():
    with pytest.raises(ValueError, match="rows must not decrease"):
        planner.ladder_plan(EXAMPLE, [4, 2], 2, max_packed_sequences=4)
    with pytest.raises(ValueError, match="fits no rung"):
        planner.assign_rungs(planner.plan(EXAMPLE, 4, 2), EXAMPLE, [2, 3])
    with pytest.raises(ValueError, match="sequence_capacities has 1 entries"):
        planner.ladder_plan(EXAMPLE, [2, 4], 2, sequence_capacities=[4])
    with pytest.raises(TypeError, match=r"capacities\[0\]"):
        planner.ladder_plan(EXAMPLE, ["2", 4], 2)
    with pytest.raises(TypeError, match="sequence of ints"):
        planner.ladder_plan(EXAMPLE, 4, 2)


def test_check_ladder_states_the_planners_rules():
    """check_ladder is the planner's checkLadder: rows >= 1 and
    non-decreasing, sequence capacities all None or all >= 1 and
    non-decreasing, rungs of equal rows holding more sequences."""
    assert planner.check_ladder([2, 4, 4], [8, 16, 32]) is None
    assert planner.check_ladder((2, 4), None) is None
    assert planner.check_ladder(np.array([2, 4]), np.array([4, 4])) is None
    for capacities, sequences, message in [
        ([], None, "at least one rung"),
        ([4, 2], [4, 4], "rung 1 has 2 rows, fewer than rung 0's 4"),
        ([0, 4], [4, 4], "rung 0 has 0 rows"),
        ([2, 4], [8, 4], "rung 1 holds 4 sequences, fewer than rung 0's 8"),
        ([4, 4], [8, 8], "rung 1 has the 4 rows of rung 0 and no more sequences"),
        ([4, 4], None, "rung 1 has the rows of rung 0 and no sequence capacity"),
        ([2, 4], [0, 4], "rung 0 has sequence capacity 0"),
        ([2, 4], [4], "sequence_capacities has 1 entries; the ladder has 2 rungs"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            planner.check_ladder(capacities, sequences)
    with pytest.raises(TypeError, match=r"capacities\[1\] must be an int; got float"):
        planner.check_ladder([2, 4.0], None)
    with pytest.raises(TypeError, match="sequence_capacities must be a sequence of ints"):
        planner.check_ladder([2, 4], 8)


def test_rung_index_is_the_rung_assign_rungs_gives():
    """rung_index: the smallest rung with B*cp >= rows and the S2 cap of its
    N (N-1 with an alignment and the dummy tail) >= seqs; the rung
    assign_rungs gives every pack."""
    capacities, sequences = [2, 3, 4], [4, 4, 4]
    assert planner.rung_index(capacities, sequences, 4, 3, cp=2) == 0
    assert planner.rung_index(capacities, sequences, 6, 3, 2) == 1
    assert planner.rung_index(capacities, sequences, 7, 1, cp=2) == 2
    assert planner.rung_index(capacities, sequences, 3, 1) == 1  # cp 1: B >= 3
    assert planner.rung_index(capacities, sequences, 0, 0) == 0
    # The dummy's slot is kept even when the rows are full; without the
    # dummy tail N sequences fit, and without N any number.
    with pytest.raises(ValueError, match="no rung holds 8 rows and 4 sequences at CP size 2: "
                                         "the top rung holds 8 rows and 3 sequences"):
        planner.rung_index(capacities, sequences, 8, 4, cp=2)
    assert planner.rung_index(capacities, sequences, 8, 4, cp=2, dummy_tail=False) == 2
    assert planner.rung_index([2, 4], None, 5, 1000, cp=2) == 1
    # Equal rows, more sequences.
    assert planner.rung_index([4, 4, 8], [3, 6, 8], 8, 5, cp=2) == 1
    lengths = [3, 1, 6, 7, 2, 5, 5, 1, 1, 1, 8]
    plan = planner.plan(lengths, 4, 2, max_packed_sequences=4)
    ladder = planner.assign_rungs(plan, lengths, [2, 3, 4], max_packed_sequences=4,
                                  sequence_capacities=[3, 4, 4])
    assert ladder.pack_rungs == [planner.rung_index([2, 3, 4], [3, 4, 4], tokens, len(pack), 2)
                                 for tokens, pack in zip(plan.pack_tokens, plan.packs)]


@pytest.mark.parametrize("args, kwargs, error, message", [
    (([2, 4], [4, 4], 9, 1), dict(cp=2), ValueError,
     "no rung holds 9 rows and 1 sequences at CP size 2"),
    (([2, 4], None, 9, 1), dict(cp=2), ValueError,
     "the top rung holds 8 rows and any number of sequences"),
    (([4, 2], [4, 4], 1, 1), {}, ValueError, "rows must not decrease"),
    (([2, 4], [4, 4], -1, 1), {}, ValueError, "rows and sequences must be >= 0; got -1, 1"),
    (([2, 4], [4, 4], 1, -1), {}, ValueError, "must be >= 0"),
    (([2, 4], [4, 4], 1, 1), dict(cp=0), ValueError, "cp = 0 must be >= 1"),
    (([1, 2], [1, 4], 1, 0), {}, ValueError, "rung of 1 rows: "),
    (([2, 4], [4, 4], 1.0, 1), {}, TypeError, "rows must be an int; got float"),
    (([2, 4], [4, 4], 1, True), {}, TypeError, "seqs must be an int; got bool"),
    (([2, 4], [4, 4], 1, 1), dict(cp="2"), TypeError, "cp must be an int; got str"),
])
def test_rung_index_errors(args, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        planner.rung_index(*args, **kwargs)


def test_dynamic_cp_plan_is_the_planners_and_read_only():
    """DynamicCpPlan is the C++ planner's: its tables are tuples, its
    accessors check their indices, and nothing of it can be set."""
    plan = planner.dynamic_cp_plan([3000, 1000, 500, 200, 100], 1024, cp=2, dp=2)
    assert isinstance(plan, planner.DynamicCpPlan)
    assert plan.groups == (((0, 1),) * 4, ((2,), (2,), (3, 4), (3, 4)))
    assert plan.lengths == (3000, 1000, 500, 200, 100)
    assert (plan.C, plan.dp, plan.cp, plan.ranks, plan.min_cp_size) == (1024, 2, 2, 4, 1)
    assert plan.max_real_seqs is None and plan.num_microbatches == len(plan) == 2
    assert plan.tokens(1, 2) == 300 and plan.sub_group(0, 1) == range(0, 4)
    assert "2 microbatches over 4 ranks" in repr(plan)
    for name in ("groups", "cp_sizes", "C", "max_real_seqs"):
        with pytest.raises(AttributeError):
            setattr(plan, name, None)
    with pytest.raises(IndexError, match="microbatch 0, rank 4: the plan has 2 microbatches"):
        plan.tokens(0, 4)
    with pytest.raises(IndexError, match="rank -1: the plan has 2 microbatches over 4 ranks"):
        plan.microbatch_inputs(-1, N=4)
    with pytest.raises(TypeError, match="microbatch must be an int; got float"):
        plan.local_rank(0.0, 0)
    with pytest.raises(TypeError, match="C must be an int; got float"):
        planner.dynamic_cp_plan([5], 1024.0, 1)
    with pytest.raises(TypeError):
        planner.dynamic_cp_plan([5], 1024, 1, 1, 1)  # min_cp_size is keyword-only
    ids, counts, sizes = plan.microbatch_inputs(0, N=3)
    assert ids.dtype == counts.dtype == sizes.dtype == np.int32
    assert ids.shape == (2, 2) and ids.tolist() == [[0, 1], [2, 0]]


def test_even_ladder():
    assert planner.even_ladder(1024, 4, 128) == [256, 512, 768, 1024]
    assert planner.even_ladder(1000, 3) == [334, 667, 1000]
    assert planner.even_ladder(256, 8, 128) == [128, 256]
    with pytest.raises(ValueError, match="not a multiple"):
        planner.even_ladder(1000, 4, 128)


def test_advise_pads_less_than_one_capacity_and_names_what_it_chose():
    rng = np.random.default_rng(0)
    batches = [np.clip(rng.lognormal(np.log(256), 1.0, 40), 16, 4096).astype(int)
               for _ in range(10)]
    advice = planner.advise(batches, C=4096, N=64)
    assert advice.capacities[-1] == 4096 and advice.sequence_capacities[-1] == 64
    assert list(advice.capacities) == sorted(advice.capacities)
    assert advice.padded_fraction < advice.single_padded_fraction
    assert advice.slots == 1 and advice.max_microbatches >= 1
    assert len(advice.rung_share) == len(advice.capacities)
    assert abs(sum(advice.rung_share) - 1) < 1e-9
    assert advice.graph_memory_bytes is None and advice.graphs == len(advice.capacities)
    # The advised ladder is within the tolerance of the best one tried.
    assert advice.padded_fraction <= min(f for _, f in advice.considered) + 0.01
    fixed = planner.advise(batches, C=4096, N=64, rungs=4, activation_bytes_per_row=1000,
                           in_flight=3)
    assert [B for B in fixed.capacities if B < 4096] == [1024, 2048, 3072]
    assert fixed.graph_memory_bytes == 4096 * 1000 and fixed.slots == 3
    # A default C holds the longest sequence.
    assert planner.advise(batches).C >= max(int(b.max()) for b in batches)
    with pytest.raises(ValueError, match="longer than C"):
        planner.advise(batches, C=128)
    with pytest.raises(ValueError, match="at least one global batch"):
        planner.advise([])


def _advise_refuses(capsys, path, *options):
    """thdc-advise's standard error for `path` (and options), which it must
    refuse with status 2."""
    with pytest.raises(SystemExit) as raised:
        planner.main([str(path), *options])
    assert raised.value.code == 2
    return capsys.readouterr().err


def test_advise_command(tmp_path, capsys):
    path = tmp_path / "lengths.txt"
    path.write_text("# one global batch per line\n100 200 300 4000\n50, 60, 70\n")
    assert planner.main([str(path), "--C", "4096", "--N", "16"]) == 0
    out = capsys.readouterr().out
    assert "C = 4096, N = 16" in out and "GraphStep(C=4096, N=16" in out
    # A recipe: every rung a multiple of m*tp under sequence parallelism.
    assert planner.main([str(path), "--recipe", "mxfp8", "--tp", "8", "--sequence-parallel",
                         "--multiple", "128"]) == 0
    out = capsys.readouterr().out
    line = [l for l in out.splitlines() if l.startswith("GraphStep(")][0]
    assert "multiple='mxfp8', tp=8, sequence_parallel=True" in line
    rungs = ast.literal_eval(line.split("capacities=")[1].split("]")[0] + "]")
    assert rungs and all(B % 256 == 0 for B in rungs)
    with pytest.raises(SystemExit):
        planner.main([str(path), "--C", "4100", "--recipe", "fp8"])
    assert "C = 4100 is not a multiple of m = 16" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 x\n")
    assert "bad.txt:1: not a list of integer lengths" in _advise_refuses(capsys, bad)
    with pytest.raises(SystemExit) as raised:
        planner.main(["--version"])
    assert raised.value.code == 0
    assert capsys.readouterr().out.strip() == f"thdc-advise {thdc.__version__}"


def test_advise_command_explains_every_option(capsys):
    with pytest.raises(SystemExit):
        planner.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--cp", "--dp", "--C", "--N", "--multiple", "--recipe", "--tp",
                   "--sequence-parallel", "--max-rungs", "--tolerance", "--in-flight",
                   "--activation-bytes-per-row", "--version"):
        described = re.search(re.escape(option) + r"(?: [A-Z_]+)? ([a-z(])", out)
        assert described, f"{option} has no help text"


def test_advise_leaves_out_rungs_no_microbatch_uses():
    """An even ladder's low rungs that no sampled microbatch lands on would
    each be a graph per slot captured for nothing: left out and named, the
    packs and rows unchanged; the top rung stays. A fixed rung count is kept
    as asked."""
    rng = np.random.default_rng(0)
    batches = [rng.integers(64, 4096, size=64) for _ in range(8)]
    advice = planner.advise(batches, C=4096, N=8)
    assert advice.unused_rungs and all(share > 0 for share in advice.rung_share[:-1])
    assert advice.capacities[-1] == 4096 and not set(advice.unused_rungs) & set(advice.capacities)
    assert "left out: rows " in advice.summary()
    kept = planner.advise(batches, C=4096, N=8, rungs=8)
    assert len(kept.capacities) >= 8 and kept.unused_rungs == ()
    assert min(kept.rung_share) == 0  # as asked, though unused


@pytest.mark.parametrize("options, message", [
    (["--cp", "0"], "argument --cp: must be in [1, 65536]; got 0"),
    (["--dp", "-1"], "argument --dp: must be in [1, 65536]; got -1"),
    (["--tp", "0"], "argument --tp: must be >= 1; got 0"),
    (["--multiple", "0"], "argument --multiple: must be >= 1; got 0"),
    (["--multiple", "1.5"], "argument --multiple: not an integer: '1.5'"),
    (["--tolerance", "nan"], "argument --tolerance: must be a finite number >= 0; got nan"),
    (["--tolerance", "-1"], "argument --tolerance: must be a finite number >= 0"),
    (["--max-rungs", "100000"], "argument --max-rungs: must be in [1, 64]; got 100000"),
    (["--max-rungs", "0"], "argument --max-rungs: must be in [1, 64]; got 0"),
    (["--N", "1"], "argument --N: must be in [2, 1048576]; got 1"),
    (["--in-flight", "0"], "argument --in-flight: must be >= 1; got 0"),
    # Counts that the plans or the advised step allocate: --cp 1000000000
    # grew past 23 GB in a minute (the plans hold a pack per DP x CP rank),
    # --cp 10000000 ended in a std::bad_alloc traceback, --N 1000000000 was
    # advised as is, and a C*cp past int32 (the offsets' dtype) too: each is
    # refused before anything is planned.
    (["--cp", "1000000000"], "argument --cp: must be in [1, 65536]; got 1000000000"),
    (["--cp", "10000000"], "argument --cp: must be in [1, 65536]; got 10000000"),
    (["--dp", "100000"], "argument --dp: must be in [1, 65536]; got 100000"),
    (["--dp", "512", "--cp", "256"], "dp*cp = 512*256 = 131072 ranks: at most 65536"),
    (["--N", "1000000000"], "argument --N: must be in [2, 1048576]; got 1000000000"),
    (["--C", "4294967296"], "argument --C: must be in [1, 2147483647]; got 4294967296"),
    (["--C", "1073741824", "--cp", "4", "--multiple", "1"],
     "C*cp = 1073741824*4 = 4294967296 is outside int32"),
])
def test_advise_command_names_the_bad_option(tmp_path, capsys, options, message):
    """Each of these was a traceback (ZeroDivisionError, StopIteration) or,
    for --max-rungs 100000, minutes of work; now argparse's exit 2 naming the
    option."""
    path = tmp_path / "lengths.txt"
    path.write_text("100 200 300\n50 60\n")
    assert message in _advise_refuses(capsys, path, *options)


def test_advise_refuses_bad_arguments_by_name():
    batches = [[100, 200, 300]]
    for kwargs, message in ((dict(cp=0), "cp must be >= 1"), (dict(multiple=0), "multiple must"),
                            (dict(tolerance=float("nan")), "tolerance must be a finite"),
                            (dict(max_rungs=10 ** 5), "max_rungs must be <= 64"),
                            (dict(rungs=0), "rungs must be >= 1"), (dict(N=1), "N must be >= 2")):
        with pytest.raises(ValueError, match=message):
            planner.advise(batches, **kwargs)


def test_advise_reads_a_bounded_sample(tmp_path, monkeypatch, capsys):
    """A lengths file that is a device's endless stream (/dev/zero grew to
    3.7 GB in 4 s) or a line past the bound is refused, not read whole."""
    monkeypatch.setattr(planner, "_MAX_LINE", 64)
    monkeypatch.setattr(planner, "_MAX_INPUT", 1000)
    long_line = tmp_path / "long.txt"
    long_line.write_text("1 " * 100)
    assert "long.txt:1: a line longer than 64 characters" in _advise_refuses(capsys, long_line)
    many = tmp_path / "many.txt"
    many.write_text("100 200\n" * 200)
    with pytest.raises(SystemExit):
        planner.main([str(many)])
    assert "many.txt: more than" in capsys.readouterr().err


def test_advise_bounds_its_counts_before_planning():
    """The library refuses the same counts, before any plan is made; a C*cp
    past int32 from a default C (the longest sequence's) too."""
    batches = [[100, 200, 300]]
    for kwargs, message in ((dict(cp=10 ** 9), r"dp\*cp = 1\*1000000000 = 1000000000 ranks: at most 65536"),
                            (dict(dp=2 ** 16, cp=2), r"dp\*cp = 65536\*2 = 131072 ranks"),
                            (dict(N=10 ** 9), "N must be <= 1048576"),
                            (dict(C=2 ** 30, cp=4, multiple=1), r"C\*cp = 1073741824\*4"),
                            (dict(C=2 ** 40), "C must be <= 2147483647")):
        with pytest.raises(ValueError, match=message):
            planner.advise(batches, **kwargs)
    with pytest.raises(ValueError, match=r"C\*cp = .* is outside int32"):
        planner.advise([[2 ** 31 + 5]], multiple=1)
    many = [[4] * 1000]
    with pytest.raises(ValueError, match=r"1000 lengths times cp = 65536"):
        planner.advise(many, cp=65536)  # every CP rank's copy of every pack


def test_advise_reads_a_bounded_count_of_lengths(tmp_path, monkeypatch, capsys):
    """The 64 MiB cap on the file is no cap on the work: 30 MB of
    single-length lines were 15 million global batches (87 s, 5.7 GB, then a
    traceback). The lengths and the global batches read are bounded too, and
    --help says so."""
    monkeypatch.setattr(planner, "_MAX_LENGTHS", 10)
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("100 200 300 400\n" * 3)
    assert "lengths.txt:3: more than 10 lengths" in _advise_refuses(capsys, lengths)
    monkeypatch.setattr(planner, "_MAX_LENGTHS", 10 ** 6)
    monkeypatch.setattr(planner, "_MAX_BATCHES", 5)
    batches = tmp_path / "batches.txt"
    batches.write_text("# a comment\n\n" + "100\n" * 6)
    assert "batches.txt:8: more than 5 global batches" in _advise_refuses(capsys, batches)
    batches.write_text("# a comment\n\n" + "100\n" * 5)
    assert planner.main([str(batches)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        planner.main(["--help"])
    assert "at most 1000000 lengths in at most 5 global batches" in \
        " ".join(capsys.readouterr().out.split())


def test_advise_command_reports_running_out_of_memory(tmp_path, monkeypatch, capsys):
    """A MemoryError (std::bad_alloc from the planner) is a message and
    status 2, not a traceback."""
    def advise(*args, **kwargs):
        raise MemoryError("std::bad_alloc")
    monkeypatch.setattr(planner, "advise", advise)
    path = tmp_path / "lengths.txt"
    path.write_text("100 200 300\n")
    err = _advise_refuses(capsys, path)
    assert "thdc-advise: out of memory" in err and "Traceback" not in err


def test_graph_mode_alignment_is_a_condition_on_C():
    """In graph mode every CP rank feeds its GEMMs exactly C rows (C/tp under
    sequence parallelism): the recipe's multiple is a condition on C."""
    assert planner.capacity_multiple(4, True, "mxfp8") == 128
    assert planner.capacity_multiple(4, False, "mxfp8") == 32
    assert planner.check_capacity(8192, tp=4, sequence_parallel=True, multiple="mxfp8") == 128
    assert planner.check_capacity(4096, multiple="hybridep") == 64
    with pytest.raises(ValueError, match=r"^check_capacity: C = 8200 is not a multiple of "
                                         r"m \* tp = 32 \* 4 = 128 .*8192 or 8320$"):
        planner.check_capacity(8200, tp=4, sequence_parallel=True, multiple="mxfp8")
    with pytest.raises(ValueError, match="unknown low-precision recipe 'fp4'"):
        planner.check_capacity(4096, multiple="fp4")
    # The advisor's rungs hold it; a given C is checked.
    lengths = [[100, 2000, 3000, 700, 64, 5000, 1200]] * 3
    advice = planner.advise(lengths, cp=1, multiple=128, recipe="mxfp8", tp=8,
                            sequence_parallel=True)
    assert all(B % 256 == 0 for B in advice.capacities)
    with pytest.raises(ValueError, match=r"C = 5248 is not a multiple of m \* tp"):
        planner.advise(lengths, C=5248, recipe="mxfp8", tp=8, sequence_parallel=True)
