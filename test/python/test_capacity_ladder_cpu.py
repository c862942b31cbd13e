"""The capacity ladder on the CPU (device="cpu": the pipelines' host code):
GraphStep(..., capacities=[...]) runs each rung's kernel on the slot's
shared inputs, equal at every rung to the reference of that rung's (C, N);
a microbatch a rung cannot hold is emptied and counted, never cut; rungs
share the slot's buffer without leaking into each other; the options are
checked by name; exact_rows gives the microbatch's own rows and offsets
that never reach past them; the planner's ladder plans agree with the
step's rung choice. The GPU twin is test_capacity_ladder_gpu.py."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.planner  # noqa: E402
import thdc.stages  # noqa: E402
from microbatches import (given_rows, invalidate, random_microbatch, reference, rope_rows,  # noqa: E402
                          step_inputs, step_mismatches, widen, with_step_counts)

from conftest import megatron_or_skip  # noqa: E402

megatron_or_skip()
import thdc.megatron  # noqa: E402

CAPACITIES = (16, 32, 48)
SEQUENCES = (4, 6, 9)
TOTAL_EXCEEDS = thdc.STATUS_BITS["total_exceeds_capacity"]
TOO_MANY = thdc.STATUS_BITS["num_seqs_out_of_range"]
ROWS_NOT_GIVEN = thdc.STATUS_BITS["rows_not_given"]


@pytest.fixture(scope="module")
def make_step(cache_dir):
    def make(cp=2, rank=1, capacities=CAPACITIES, sequences=SEQUENCES, **kwargs):
        return thdc.megatron.GraphStep(capacities[-1], sequences[-1], cp, rank, device="cpu",
                                       cache_dir=cache_dir, capacities=capacities,
                                       sequence_capacities=sequences, **kwargs)

    return make


def outputs(view):
    return {k: v.numpy().copy() for k, v in view.outputs._asdict().items()}


def expect(mb, C, cp, N, stage, cp_mode, source=None):
    """The reference of one rung: the step at (C, N), for a microbatch of
    that rung's or a smaller one's arrays. Contiguous CP pads the whole
    buffer to C*cp and cuts it (test_megatron_cpu states why). source: the
    rung step_inputs gave it for (default C)."""
    source = C if source is None else source
    rows = given_rows(mb, source, cp) if thdc.stages.data_keys(stage) else None
    mb = widen(mb, C, cp, N, source)
    expected = reference(mb, C, cp, N, rows_given=rows)
    if cp_mode == "contiguous":
        # No offset needs to be a multiple of anything: the cp = 1 step over
        # all C*cp rows (same checks but divisibility, same metadata), cut.
        whole = reference(dict(mb, cp_rank=np.array([0], np.int32)), C * cp, 1, N,
                          rows_given=rows)
        rank = int(mb["cp_rank"][0])
        for k in ("tokens", "labels", "position_ids", "loss_mask", "padding_mask"):
            expected[k] = whole[k][rank * C:(rank + 1) * C]
        for k in ("cu_seqlens_padded", "cu_seqlens", "max_seqlen", "status"):
            expected[k] = whole[k]
    return with_step_counts(expected, mb, C, cp)


def compare(got, expected, cp_mode):
    return step_mismatches(got, expected)


@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
@pytest.mark.parametrize("stage", thdc.stages.STAGES)
def test_every_rung_is_the_step_at_its_capacity(make_step, stage, cp_mode):
    """Random and invalid microbatches of every rung's size, each loaded into
    the slot and run at its rung, against the reference at that rung's
    (C, N); and at every rung above it, which must give that rung's own
    reference (a small microbatch padded further)."""
    cp = 2
    step = make_step(cp, 1, stage=stage, cp_mode=cp_mode)
    assert step.capacities == CAPACITIES and step.sequence_capacities == SEQUENCES
    assert len(step.kernels) == 3 and step.kernel is step.kernels[-1]
    assert step.slot(0).rung(-1) is step.slot(0).rungs[-1]
    rng = np.random.default_rng(sum(map(ord, stage + cp_mode)))
    statuses, compared = set(), 0
    for trial in range(36):
        low = trial % 3
        B, N = CAPACITIES[low], SEQUENCES[low]
        mb = random_microbatch(rng, B, cp, N, rank=1)
        if trial % 4 == 3:
            mb = invalidate(rng, mb, N)
        step.load_inputs(**step_inputs(mb, B, cp, device="cpu"))
        for r in range(low, 3):
            view = step.rung(r)
            batch, params = view.run()
            C_r, N_r = CAPACITIES[r], SEQUENCES[r]
            assert batch["padding_mask"].shape == (1, C_r)
            assert params.cu_seqlens_q.shape == (N_r + 1,)
            assert params.max_seqlen_q == C_r * cp
            expected = expect(mb, C_r, cp, N_r, stage, cp_mode, source=B)
            bad = compare(outputs(view), expected, cp_mode)
            assert bad == [], f"trial {trial}, rung {r}: {bad}"
            statuses.add(expected["status"] != 0)
            compared += 1
    assert statuses == {False, True} and compared == 36 * 2


def test_a_rung_too_small_empties_and_counts_never_cuts(make_step):
    """A microbatch of more rows or sequences than a rung holds, run at that
    rung: the rung's outputs are the empty microbatch's, the status says
    why and the dropped counters hold what it claimed; the top rung, run
    next on the same inputs, trains all of it."""
    step = make_step(1, 0)
    cu = [0, 10, 20, 30]  # 30 rows, 3 sequences: over rung 0's 16 rows
    data = dict(tokens=torch.arange(30).view(1, -1), labels=torch.arange(30).view(1, -1),
                loss_mask=torch.ones(1, 30), position_ids=torch.arange(30).view(1, -1),
                cu_seqlens=torch.tensor(cu, dtype=torch.int32),
                cu_seqlens_padded=torch.tensor(cu, dtype=torch.int32))
    step.load_inputs(**data)
    low = step.rung(0)
    low.run()
    assert int(low.status[0]) & TOTAL_EXCEEDS
    assert float(low.outputs.loss_mask.sum()) == 0.0
    counts = torch.zeros(2, dtype=torch.int64)
    low.accumulate_dropped(counts)
    assert counts.tolist() == [3, 30]
    top = step.rung(2)
    top.run()
    assert int(top.status[0]) == 0 and float(top.outputs.loss_mask.sum()) == 30.0
    assert step.rung_index(30, 3) == 1
    # Five sequences of 2 rows: 10 rows fit rung 0's 16, but not its N-1 = 3.
    cu = [0, 2, 4, 6, 8, 10]
    step.load_inputs(**{k: v[:, :10] for k, v in data.items() if v.dim() == 2},
                     cu_seqlens=torch.tensor(cu, dtype=torch.int32),
                     cu_seqlens_padded=torch.tensor(cu, dtype=torch.int32))
    low.run()
    assert int(low.status[0]) & TOO_MANY
    assert step.rung_index(10, 5) == 1
    step.rung(1).run()
    assert int(step.rung(1).status[0]) == 0
    with pytest.raises(ValueError, match="no rung holds 49 rows"):
        step.rung_index(49, 1)


def test_rungs_share_the_buffer_without_leaking(make_step):
    """The rungs of a slot write one buffer: a rung's outputs after it runs
    equal its reference whatever ran before it; the slots stay apart."""
    step = make_step(2, 0, slots=2)
    rng = np.random.default_rng(7)
    mbs = [random_microbatch(rng, 16, 2, 4, rank=0) for _ in range(2)]
    for slot, mb in zip(step.slots, mbs):
        slot.load_inputs(**step_inputs(mb, 16, 2, device="cpu"))
    for order in ([2, 0, 1], [0, 2, 1, 0], [1, 1, 2]):
        for r in order:
            for slot, mb in zip(step.slots, mbs):
                slot.rung(r).run()
                expected = expect(mb, CAPACITIES[r], 2, SEQUENCES[r], "first_last", "zigzag",
                                  source=16)
                assert compare(outputs(slot.rung(r)), expected, "zigzag") == []
    assert step.slots[0].buffer.data_ptr() != step.slots[1].buffer.data_ptr()
    for r in range(3):
        assert step.rung(r).buffer.data_ptr() == step.slots[0].buffer.data_ptr()
        assert step.rung(r).buffer.numel() <= step.slots[0].buffer.numel()


def test_ladder_options_are_checked_by_name(make_step):
    with pytest.raises(ValueError, match="the rungs' rows must not decrease"):
        make_step(capacities=(32, 16, 48))
    with pytest.raises(ValueError, match="a rung of equal rows must hold more"):
        make_step(capacities=(16, 48, 48), sequences=(4, 9, 9))
    two = make_step(capacities=(16, 48, 48), sequences=(4, 6, 9))
    assert two.rung_index(40, 5) == 1 and two.rung_index(40, 6) == 2
    assert two.rung(1).packed_seq_params.cu_seqlens_q.shape == (7,)
    with pytest.raises(ValueError, match="top rung is the step's C = 48"):
        thdc.megatron.GraphStep(48, 9, 2, 0, device="cpu", capacities=(16, 32))
    with pytest.raises(ValueError, match="a rung with more rows must hold at least as many sequences"):
        make_step(sequences=(6, 4, 9))
    with pytest.raises(ValueError, match="sequence_capacities has 2 entries"):
        make_step(sequences=(4, 9))
    with pytest.raises(ValueError, match=r"rung \(C=15, N=4\): zigzag CP"):
        make_step(capacities=(15, 32, 48))
    with pytest.raises(ValueError, match="every rung must be a multiple of tp"):
        make_step(capacities=(18, 32, 48), tp=4, sequence_parallel=True)
    with pytest.raises(ValueError, match="N >= 2"):
        make_step(sequences=(1, 6, 9))
    with pytest.raises(TypeError, match="one bundle per rung"):
        make_step(bundle="somewhere")
    with pytest.raises(ValueError, match="bundle has 2 paths"):
        make_step(bundle=("a", "b"))
    with pytest.raises(TypeError, match=r"capacities\[1\]"):
        make_step(capacities=(16, "32", 48))
    with pytest.raises(IndexError, match="the ladder has 3 rungs"):
        make_step().rung(3)
    step = thdc.megatron.GraphStep(48, 9, 2, 0, device="cpu", capacities=CAPACITIES)
    assert step.sequence_capacities == (9, 9, 9)
    assert step.config.rungs == ((16, 9), (32, 9), (48, 9))


def test_exact_rows_are_the_microbatchs_own(make_step):
    """exact_rows: the rank's T/cp rows of every key, offsets of num_seqs+1
    entries ending at T, max_seqlen as given, seq_idx over T rows; views of
    the slot's outputs."""
    cp = 2
    step = make_step(cp, 1, rope_table_rows=64)
    rng = np.random.default_rng(3)
    checked = 0
    for trial in range(40):
        r = trial % 3
        B, N = CAPACITIES[r], SEQUENCES[r]
        mb = random_microbatch(rng, B, cp, N, rank=1)
        n = int(mb["num_seqs"][0])
        step.load_inputs(**step_inputs(mb, B, cp, device="cpu"))
        view = step.rung(r)
        view.run()
        expected = expect(mb, B, cp, N, "first_last", "zigzag")
        assert compare(outputs(view), expected, "zigzag") == []
        T = int(mb["cu_seqlens_padded"][n])
        longest = int(np.diff(mb["cu_seqlens_padded"][:n + 1]).max()) if n else 1
        batch, params = view.exact_rows(T, n, max(longest, 1))
        total = T if T else 2 * cp
        local = total // cp
        for k in ("tokens", "labels", "position_ids", "loss_mask"):
            assert batch[k].shape == (1, local)
            assert np.array_equal(batch[k][0].numpy(), expected[k][:local])
            assert batch[k].data_ptr() == view.batch[k].data_ptr()  # a view
        assert np.array_equal(batch["padding_mask"][0].numpy(),
                              expected["padding_mask"][:local].astype(bool))
        cu = params.cu_seqlens_q.numpy()
        want = np.minimum(expected["cu_seqlens_padded"][:max(n, 1) + 1], total)
        want[-1] = total
        assert np.array_equal(cu, want), (trial, cu, want)
        assert params.max_seqlen_q == max(longest, 1)
        assert params.seq_idx.shape == (1, total)
        assert int(view.status[0]) == 0
        checked += 1
    assert checked == 40


def test_exact_rows_never_reach_past_the_rows(make_step):
    """An emptied microbatch gets offsets over the T rows in pieces of at most
    max_seqlen, all masked out; a T smaller than the step's rows sets
    rows_not_given; bad figures are refused by name; contiguous CP is
    refused."""
    step = make_step(1, 0)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    data = dict(tokens=torch.arange(12).view(1, -1), labels=torch.arange(12).view(1, -1),
                loss_mask=torch.ones(1, 12), position_ids=torch.arange(12).view(1, -1))
    bad = torch.tensor([0, 12, 5], dtype=torch.int32)  # decreasing: the step empties it
    step.load_inputs(**data, cu_seqlens=bad, cu_seqlens_padded=bad)
    view = step.rung(0)
    view.run()
    assert int(view.status[0]) != 0
    batch, params = view.exact_rows(12, 2, 7)
    assert params.cu_seqlens_q.tolist() == [0, 7, 12]
    assert float(batch["loss_mask"].sum()) == 0.0
    # Valid, but told 10 rows of 12: the view would leave rows out of its
    # last sequence; it is emptied and the status says so.
    step.load_inputs(**data, cu_seqlens=cu, cu_seqlens_padded=cu)
    view.run()
    assert int(view.status[0]) == 0
    batch, params = view.exact_rows(10, 2, 7)
    assert params.cu_seqlens_q.tolist() == [0, 7, 10]
    assert float(batch["loss_mask"].sum()) == 0.0
    assert int(view.status[0]) == ROWS_NOT_GIVEN
    flag = torch.zeros(1, dtype=torch.int32)
    view.accumulate_status(flag)
    assert int(flag[0]) == ROWS_NOT_GIVEN
    # Told one sequence of the two: they would merge (attention across
    # documents); told a longest of 5 where one has 7 rows: attention would
    # cut it. Both are flagged and emptied, never merged.
    figures = thdc.STATUS_BITS["figures_disagree"]
    for num_seqs, max_seqlen in ((1, 12), (2, 5)):
        view.run()
        batch, params = view.exact_rows(12, num_seqs, max_seqlen)
        assert int(view.status[0]) == figures, (num_seqs, max_seqlen)
        assert thdc.describe_status(int(view.status[0])) == "figures_disagree"
        assert float(batch["loss_mask"].sum()) == 0.0
        assert params.cu_seqlens_q.tolist()[-1] == 12
    # Told no row and no sequence of a microbatch that has both: the offsets
    # agree at entry 0, so only the count loaded tells; flagged, never a
    # microbatch dropped with status 0.
    view.run()
    batch, params = view.exact_rows(0, 0)
    assert int(view.status[0]) == figures
    assert float(batch["loss_mask"].sum()) == 0.0
    view.run()
    batch, params = view.exact_rows(12, 2, 7)  # the right figures
    assert int(view.status[0]) == 0 and params.cu_seqlens_q.tolist() == [0, 5, 12]
    assert float(batch["loss_mask"].sum()) == 12.0
    view.run()
    with pytest.raises(ValueError, match="num_rows must be in"):
        view.exact_rows(17, 2)
    with pytest.raises(ValueError, match=r"num_seqs must be in \[0, N-1 = 3\]"):
        view.exact_rows(12, 4)
    with pytest.raises(ValueError, match="max_seqlen must be in"):
        view.exact_rows(12, 2, 0)
    contiguous = make_step(2, 0, cp_mode="contiguous")
    with pytest.raises(ValueError, match="exact_rows needs zigzag CP"):
        contiguous.exact_rows(8, 1)
    with pytest.raises(ValueError, match="not a multiple of 4"):
        make_step(2, 0).exact_rows(6, 1)


def test_a_rung_that_did_not_run_is_refused(make_step):
    """The rungs share the slot's buffer, each laying it out for its own
    sizes: exact_rows of a rung other than the one that ran last would read
    another layout (the offsets [0, 5, 12, 16] of rung 0 read as rung 1's,
    with status 0). Where the host knows which rung ran it raises, naming
    both; where it cannot (a run captured in a CUDA graph, then replayed)
    the device compares the header of the rung that wrote the buffer with
    the view's: the view is emptied and flagged rung_not_run, and the
    buffer then counts as no rung's."""
    step = make_step(1, 0)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    data = dict(tokens=torch.arange(12).view(1, -1), labels=torch.arange(12).view(1, -1),
                loss_mask=torch.ones(1, 12), position_ids=torch.arange(12).view(1, -1))
    step.load_inputs(**data, cu_seqlens=cu, cu_seqlens_padded=cu)
    slot = step.slot(0)
    slot.rung(0).run()
    with pytest.raises(ValueError, match=r"exact_rows: rung 1 \(C = 32, N = 6\) of slot 0 did "
                                         r"not run last; rung 0 \(C = 16, N = 4\) did"):
        slot.rung(1).exact_rows(12, 2, 7)
    with pytest.raises(ValueError, match=r"rung 2 \(C = 48, N = 9\) of slot 0 did not run"):
        slot.exact_rows(12, 2, 7)  # the slot's own: its top rung's
    batch, params = slot.rung(0).exact_rows(12, 2, 7)  # the rung that ran
    assert int(slot.rung(0).status[0]) == 0 and params.cu_seqlens_q.tolist() == [0, 5, 12]
    assert float(batch["loss_mask"].sum()) == 12.0
    # What a replayed graph leaves: the host does not know which rung ran.
    slot.last_run = None
    view = slot.rung(1)
    batch, params = view.exact_rows(12, 2, 7)
    not_run = thdc.STATUS_BITS["rung_not_run"]
    assert int(view.status[0]) == not_run
    assert thdc.describe_status(int(view.status[0])) == "rung_not_run"
    assert params.cu_seqlens_q.tolist() == [0, 7, 12]  # max_seqlen pieces, none trained
    assert float(batch["loss_mask"].sum()) == 0.0
    # The view wrote into the buffer: no rung's outputs are whole any more.
    batch, params = slot.rung(0).exact_rows(12, 2, 7)
    assert int(slot.rung(0).status[0]) & not_run and float(batch["loss_mask"].sum()) == 0.0
    # Running the rung makes it readable again.
    view.run()
    batch, params = view.exact_rows(12, 2, 7)
    assert int(view.status[0]) == 0 and params.cu_seqlens_q.tolist() == [0, 5, 12]
    assert float(batch["loss_mask"].sum()) == 12.0


@pytest.mark.parametrize("cp", [1, 2])
def test_the_planner_and_the_step_choose_the_same_rung(make_step, cp):
    """thdc.planner.ladder_plan over the step's ladder: every pack at the
    rung step.rung_index gives it, no more microbatches than next-fit,
    rows and padded rows adding up; every microbatch loaded and run at its
    rung is valid."""
    step = make_step(cp, 0)
    rng = np.random.default_rng(cp)
    for trial in range(20):
        valid = rng.integers(1, CAPACITIES[-1] * cp // 3, size=int(rng.integers(1, 30)))
        padded = thdc.planner.align_lengths(valid, cp)
        ladder = thdc.planner.ladder_plan(padded, step.capacities, cp,
                                          max_packed_sequences=step.N,
                                          sequence_capacities=step.sequence_capacities)
        next_fit = thdc.planner.plan(padded, step.C, cp, max_packed_sequences=step.N)
        assert ladder.num_microbatches <= next_fit.num_microbatches
        assert ladder.capacities == list(CAPACITIES)
        assert ladder.tokens == int(padded.sum())
        assert ladder.rows == sum(ladder.pack_rows)
        assert ladder.padded_rows == ladder.rows - ladder.tokens >= 0
        assert 0 < ladder.fill <= 1
        for m, pack in enumerate(ladder.plan.packs):
            tokens, seqs = ladder.plan.pack_tokens[m], len(pack)
            assert ladder.rung(m, 0) == ladder.pack_rungs[m] == step.rung_index(tokens, seqs)
            assert ladder.pack_max_lengths[m] == int(padded[pack].max())
            lengths = padded[pack]
            cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
            rows = int(lengths.sum())
            data = {k: torch.zeros(1, rows, dtype=torch.int64)
                    for k in ("tokens", "labels", "position_ids")}
            step.load_inputs(**data, loss_mask=torch.ones(1, rows), cu_seqlens=cu,
                             cu_seqlens_padded=cu)
            view = step.rung(ladder.pack_rungs[m])
            view.run()
            assert int(view.status[0]) == 0
            assert float(view.outputs.loss_mask.sum()) == rows // cp


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_split_dummy_sequences_against_the_reference(make_step, cp):
    """dummy_length: the tail in dummy sequences of that many rows over the
    spare entries, at every rung, against the reference's
    split_dummy_sequences; the data and mask those of one dummy, the rows
    RoPE and seq_idx read consistent with the offsets."""
    L = 4 * cp
    step = make_step(cp, cp - 1, dummy_length=L, rope_table_rows=64)
    plain = make_step(cp, cp - 1, rope_table_rows=64)
    assert step.config.pipeline_options["dummy_length"] == L
    rng = np.random.default_rng(40 + cp)
    split_seen = 0
    for trial in range(30):
        r = trial % 3
        B, N = CAPACITIES[r], SEQUENCES[r]
        mb = random_microbatch(rng, B, cp, N, rank=cp - 1)
        if trial % 5 == 4:
            mb = invalidate(rng, mb, N)
        inputs = step_inputs(mb, B, cp, device="cpu")
        for s in (step, plain):
            s.load_inputs(**inputs)
            s.rung(r).run()
        rows = given_rows(mb, B, cp)
        want = reference(widen(mb, B, cp, N, B), B, cp, N, rows_given=rows, dummy_length=L)
        got = outputs(step.rung(r))
        for k in ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens",
                  "cu_seqlens_padded"):
            assert np.array_equal(got[k], want[k]), (trial, k)
        assert int(got["status"][0]) == want["status"]
        one = outputs(plain.rung(r))
        for k in ("tokens", "labels", "loss_mask", "padding_mask"):
            assert np.array_equal(got[k], one[k]), (trial, k)
        cup = got["cu_seqlens_padded"]
        assert np.array_equal(got["seq_idx"], thdc.reference.seq_idx(cup, B * cp))
        split_seen += int(np.count_nonzero(np.diff(cup) > 0) >
                          np.count_nonzero(np.diff(one["cu_seqlens_padded"]) > 0))
        assert np.diff(cup).max() <= max(np.diff(one["cu_seqlens_padded"]).max(), 0)
    assert split_seen > 0
    with pytest.raises(ValueError, match="multiple of 4"):
        make_step(2, 0, dummy_length=6)
    with pytest.raises(ValueError, match="dummy_length must be an int >= 1"):
        make_step(1, 0, dummy_length=0)


@pytest.mark.parametrize("table_rows", [64, 96, 200])
def test_a_microbatch_gets_the_same_rope_rows_at_every_rung(make_step, table_rows):
    """One RoPE table serves every rung (examples/train builds one of the top
    rung's rows): a microbatch that fits the lowest rung gets the same table
    row for each of its rows at the lowest rung and at the top, the rule the
    top rung's max_seqlen gives (relative within the sequence for a table of
    at most C*cp rows, absolute beyond), as S8's restatement computes it."""
    cp, rank = 2, 1
    step = make_step(cp, rank, rope_table_rows=table_rows)
    top_rows = CAPACITIES[-1] * cp
    rng = np.random.default_rng(11)
    for _ in range(12):
        mb = random_microbatch(rng, CAPACITIES[0], cp, SEQUENCES[0], rank=rank)
        n = int(mb["num_seqs"][0])
        local = int(mb["cu_seqlens_padded"][n]) // cp
        rows = []
        for r in (0, len(CAPACITIES) - 1):
            step.load_inputs(**step_inputs(mb, CAPACITIES[0], cp, device="cpu"))
            view = step.rung(r)
            view.run()
            assert int(view.status[0]) == 0
            rows.append(view.rope_rows.numpy()[:local].copy())
        want = rope_rows(mb["cu_seqlens_padded"][:n + 1], top_rows, cp, rank, local, table_rows)
        assert np.array_equal(rows[1], want)
        assert np.array_equal(rows[0], rows[1]), (table_rows, rows)


def test_a_one_rung_ladder_must_end_at_the_steps_capacities(cache_dir):
    """sequence_capacities=[5] on a step of N = 9: one rung is the top rung,
    and its N must be the step's (the check sat inside the loop over rung
    pairs, so a one-rung ladder escaped it and the step ran with N = 5 while
    step.N said 9)."""
    with pytest.raises(ValueError, match="top rung is the step's N = 9; sequence_capacities "
                                         "ends at 5"):
        thdc.megatron.GraphStep(64, 9, 1, 0, device="cpu", cache_dir=cache_dir,
                                sequence_capacities=[5])
    with pytest.raises(ValueError, match="top rung is the step's N = 9"):
        thdc.megatron.GraphStep(64, 9, 1, 0, device="cpu", cache_dir=cache_dir,
                                capacities=[32, 64], sequence_capacities=[5, 7])


def test_rung_index_refuses_negative_figures(make_step):
    step = make_step()
    with pytest.raises(ValueError, match="num_rows and num_seqs must be >= 0; got -1, 2"):
        step.rung_index(-1, 2)
    with pytest.raises(ValueError, match="must be >= 0; got 10, -3"):
        step.rung_index(10, -3)


def test_a_cuda_run_records_its_header_unless_the_host_knows_it_is_there(make_step,
                                                                          monkeypatch):
    """SlotRung.wrote, the CUDA run's record of which rung wrote the slot's
    buffer, on a CPU step's tensors with the capture state stood in for:
    the copy is left out only where the host knows this view wrote last and
    nothing is being captured; a capture records it and leaves the host not
    knowing for good; a broadcast's forced write puts it back."""
    from thdc.megatron.slot import SlotRung

    step = make_step()
    slot = step.slots[0]
    low, top = slot.rung(0), slot.rung(len(CAPACITIES) - 1)
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    assert slot.last_run is top
    slot.header.zero_()  # a stand-in for a header the host did not write
    SlotRung.wrote(top)  # the host knows top wrote last: no copy
    assert int(slot.header.abs().sum()) == 0 and slot.last_run is top
    SlotRung.wrote(top, force=True)
    assert torch.equal(slot.header, top.header)
    SlotRung.wrote(low)  # another rung: its header, and the host knows it
    assert torch.equal(slot.header, low.header) and slot.last_run is low
    capturing[0] = True
    slot.header.zero_()
    SlotRung.wrote(low)  # captured: the graph must record the copy
    assert torch.equal(slot.header, low.header) and slot.last_run is None
    capturing[0] = False
    slot.header.zero_()
    SlotRung.wrote(low)  # after a capture the host never knows: always copy
    assert torch.equal(slot.header, low.header) and slot.last_run is None
