"""The capacity ladder on a GPU: every rung of GraphStep(..., capacities=...)
replayed from its own captured graph, per slot, for random microbatches of
every rung's size, equal to the reference of that rung under
set_sync_debug_mode("error"); graphs of every rung that allocate (as a
model's forward and backward do) sharing one memory pool, captured from the
largest rung down and replayed in random order, equal to the same work run
eagerly; exact_rows on the device without a synchronisation. The CPU twin
is test_capacity_ladder_cpu.py. Skipped without PyTorch or a GPU.

Kernels come from bundles (THDC_BUNDLES, written by
scripts/make-gpu-bundles.sh) or, where thdc has a JIT, are compiled here."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
import thdc.planner  # noqa: E402
import thdc.stages  # noqa: E402
from conftest import SOURCE_DIR  # noqa: E402
from microbatches import (given_rows, invalidate, random_microbatch, reference,  # noqa: E402
                          step_inputs, step_mismatches, widen, with_step_counts)

BUNDLES = os.environ.get("THDC_BUNDLES", os.path.join(SOURCE_DIR, "build-gpu-bundles"))


def make_step(capacities, sequences, cp=1, rank=0, **kwargs):
    """A ladder GraphStep from one bundle per rung, or through the JIT."""
    paths = [os.path.join(BUNDLES, "python", thdc.stages.bundle_name(B, cp, N))
             for B, N in zip(capacities, sequences)]
    if not all(os.path.isdir(p) for p in paths):
        if not thdc.has_jit:
            pytest.skip(f"no bundles {paths} and no JIT")
        paths = None
    return thdc.megatron.GraphStep(capacities[-1], sequences[-1], cp, rank, bundle=paths,
                                   capacities=capacities, sequence_capacities=sequences,
                                   **kwargs)


def host(outputs):
    return {k: v.cpu().numpy() for k, v in outputs._asdict().items()}


def expect(mb, C, cp, N, source):
    """The reference at rung (C, N) of a microbatch given as
    step_inputs(mb, source, cp) gives it."""
    rows = given_rows(mb, source, cp)
    expected = reference(widen(mb, C, cp, N, source), C, cp, N, rows_given=rows)
    return with_step_counts(expected, mb, C, cp)


def held(slot, C, cp, N):
    """What rung (C, N) of `slot` reads after load_inputs, from the slot's
    input buffers themselves (entries past those given hold what earlier
    microbatches left, which a microbatch claiming them reads), as a
    microbatch for the reference, and the rows given."""
    inputs = slot.inputs
    take = lambda t, count: t[:count].cpu().numpy().copy()
    mb = {k: take(getattr(inputs, k), C * cp)
          for k in ("tokens", "labels", "position_ids", "loss_mask")}
    mb.update(cu_seqlens=take(inputs.cu_seqlens, N + 1),
              cu_seqlens_padded=take(inputs.cu_seqlens_padded, N + 1),
              num_seqs=take(inputs.num_seqs, 1), cp_rank=take(inputs.cp_rank, 1))
    return mb, int(inputs.num_rows[0])


def expect_held(slot, C, cp, N):
    """The reference of rung (C, N) on what the slot holds."""
    mb, rows = held(slot, C, cp, N)
    expected = reference(mb, C, cp, N, rows_given=rows)
    return with_step_counts(expected, mb, C, cp)


def compare(got, expected):
    return step_mismatches(got, expected)


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_every_rung_replayed_from_its_graph(cp):
    """One graph per (slot, rung); 48 random microbatches, each of a random
    rung's size (some invalid, some too large for the rung below), loaded
    into slot m mod 2 and replayed at the rung step.rung_index picks, under
    set_sync_debug_mode("error"); each equal to the reference at that rung
    on what the slot's buffers hold (and, when valid, on the microbatch as
    given), the counters equal to the reference's dropped work."""
    capacities, sequences = (256, 512, 1024, 2048), (9, 17, 17, 33)
    step = make_step(capacities, sequences, cp, cp - 1, slots=2)
    graphs = {}
    for s in range(2):
        for r in range(len(capacities)):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step.slot(s).rung(r).run()
            graphs[s, r] = graph
    rng = np.random.default_rng(cp)
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    counts = torch.zeros(2, dtype=torch.int64, device="cuda")
    want_dropped, rungs_used, checked = np.zeros(2, np.int64), set(), 0
    for round_ in range(24):
        pair = []
        for s in range(2):
            size = int(rng.integers(0, len(capacities)))
            mb = random_microbatch(rng, capacities[size], cp, sequences[size], rank=cp - 1)
            if (round_ + s) % 5 == 4:
                mb = invalidate(rng, mb, sequences[size])
            n = int(mb["num_seqs"][0])
            rows = given_rows(mb, capacities[size], cp)
            rung = (step.rung_index(rows, n) if 0 <= n <= sequences[-1] - 1
                    else len(capacities) - 1)
            pair.append((mb, size, rung, step_inputs(mb, capacities[size], cp)))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for s, (mb, size, rung, inputs) in enumerate(pair):
                slot = step.slot(s)
                slot.load_inputs(**inputs)
                graphs[s, rung].replay()
                slot.rung(rung).accumulate_status(flag)
                slot.rung(rung).accumulate_dropped(counts)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        for s, (mb, size, rung, _) in enumerate(pair):
            C, N = capacities[rung], sequences[rung]
            expected = expect_held(step.slot(s), C, cp, N)
            if expected["status"] == 0:  # and the microbatch as it was given
                assert compare(host(step.slot(s).rung(rung).outputs),
                               expect(mb, C, cp, N, capacities[size])) == []
            bad = compare(host(step.slot(s).rung(rung).outputs), expected)
            assert bad == [], f"round {round_}, slot {s}, rung {rung}: {bad}"
            want_dropped += expected["dropped"]
            rungs_used.add(rung)
            checked += 1
    assert checked == 48 and rungs_used == set(range(len(capacities)))
    assert int(flag.item()) != 0 and want_dropped[0] > 0
    assert counts.cpu().tolist() == want_dropped.tolist()


def test_graphs_sharing_a_pool_replay_in_any_order():
    """Per rung, the step and work that allocates and frees (an embedding, a
    product, a reduction into a static accumulator) captured in one graph,
    the graphs sharing one pool, captured largest first; replayed in random
    rung order, the accumulator equals the same work run eagerly."""
    capacities, sequences = (256, 512, 1024), (9, 17, 33)
    step = make_step(capacities, sequences, 1, 0)
    table = torch.randn(50000, 64, device="cuda")
    weight = torch.randn(64, 64, device="cuda")
    total = torch.zeros(1, device="cuda")

    def work(view):
        batch, params = view.run()
        x = table[batch["tokens"][0].clamp(0, 49999)] @ weight
        total.add_((x.relu().sum(1) * batch["loss_mask"][0]).sum())

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for r in range(3):
            work(step.rung(r))
    torch.cuda.current_stream().wait_stream(side)
    graphs, pool = [None] * 3, None
    for r in reversed(range(3)):
        graphs[r] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[r], pool=pool):
            work(step.rung(r))
        pool = graphs[r].pool()
    rng = np.random.default_rng(5)
    staged = []
    for _ in range(40):
        r = int(rng.integers(0, 3))
        mb = random_microbatch(rng, capacities[r], 1, sequences[r], rank=0)
        staged.append((r, step_inputs(mb, capacities[r], 1)))
    total.zero_()
    for r, inputs in staged:
        step.load_inputs(**inputs)
        graphs[r].replay()
    replayed = total.clone()
    total.zero_()
    for r, inputs in staged:
        step.load_inputs(**inputs)
        work(step.rung(r))
    torch.testing.assert_close(replayed, total, rtol=1e-5, atol=1e-3)
    assert float(total) != 0.0


def test_exact_rows_on_the_device_do_not_synchronise():
    """exact_rows after each run, under set_sync_debug_mode("error"): the
    views and offsets equal the reference's first rows and offsets."""
    capacities, sequences, cp = (512, 1024), (17, 33), 2
    step = make_step(capacities, sequences, cp, 1)
    rng = np.random.default_rng(11)
    for trial in range(40):
        r = trial % 2
        mb = random_microbatch(rng, capacities[r], cp, sequences[r], rank=1)
        n = int(mb["num_seqs"][0])
        T = int(mb["cu_seqlens_padded"][n])
        longest = max(1, int(np.diff(mb["cu_seqlens_padded"][:n + 1]).max()) if n else 1)
        inputs = step_inputs(mb, capacities[r], cp)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            step.load_inputs(**inputs)
            step.rung(r).run()
            batch, params = step.rung(r).exact_rows(T, n, longest)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        expected = expect(mb, capacities[r], cp, sequences[r], capacities[r])
        total = T if T else 2 * cp
        local = total // cp
        for k in ("tokens", "labels", "position_ids", "loss_mask"):
            assert np.array_equal(batch[k][0].cpu().numpy(), expected[k][:local]), (trial, k)
        want = np.minimum(expected["cu_seqlens_padded"][:max(n, 1) + 1], total)
        want[-1] = total
        assert np.array_equal(params.cu_seqlens_q.cpu().numpy(), want), trial
        assert params.max_seqlen_q == longest


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_split_dummy_sequences_replayed(cp):
    """dummy_length on the GPU, every rung replayed from its graph: equal to
    the reference's split_dummy_sequences on what the slot holds."""
    capacities, sequences, L = (256, 1024, 2048), (9, 17, 33), 64 * cp
    paths = [os.path.join(BUNDLES, "python", thdc.stages.bundle_name(B, cp, N,
                                                                     dummy_length=L))
             for B, N in zip(capacities, sequences)]
    if not all(os.path.isdir(p) for p in paths):
        if not thdc.has_jit:
            pytest.skip(f"no bundles {paths} and no JIT")
        paths = None
    step = thdc.megatron.GraphStep(2048, 33, cp, cp - 1, bundle=paths, capacities=capacities,
                                   sequence_capacities=sequences, dummy_length=L)
    graphs = []
    for r in range(3):
        graphs.append(torch.cuda.CUDAGraph())
        with torch.cuda.graph(graphs[-1]):
            step.rung(r).run()
    rng = np.random.default_rng(90 + cp)
    pieces = 0
    for trial in range(30):
        r = trial % 3
        mb = random_microbatch(rng, capacities[r], cp, sequences[r], rank=cp - 1)
        step.load_inputs(**step_inputs(mb, capacities[r], cp))
        graphs[r].replay()
        held_mb, rows = held(step.slot(0), capacities[r], cp, sequences[r])
        want = reference(held_mb, capacities[r], cp, sequences[r], rows_given=rows,
                         dummy_length=L)
        got = host(step.rung(r).outputs)
        for k in ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens",
                  "cu_seqlens_padded"):
            assert np.array_equal(got[k], want[k]), (trial, k)
        assert int(got["status"][0]) == want["status"]
        pieces += int(np.count_nonzero(np.diff(got["cu_seqlens_padded"]) == L))
    assert pieces > 0
