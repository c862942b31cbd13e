"""thdc.megatron.IterationGraphs on GraphStep's host code: the handoff of
each iteration's microbatches into the step's slots, the shape policy
(which iteration runs eagerly, is captured or replays), the budget and every
refused call. The CUDA graph is a stand-in here (a capture runs the
schedule once, a replay runs it again on the same static slots and copies
its results into the captured ones: what a graph's replay does to its
static outputs); the real capture runs on the GPU (bench/megatron_gpt.py's
thdc-full-iteration)."""
import numpy as np
import pytest

import thdc

torch = pytest.importorskip("torch", minversion="2.10")
if not thdc.has_jit:
    pytest.skip("this build of thdc has no JIT (GraphStep's host code needs it)",
                allow_module_level=True)
import thdc.megatron as tm  # noqa: E402

C, N = 128, 8
CAPACITIES, SEQUENCES = [32, 64, 128], [4, 6, 8]
SLOTS = 4
KEYS = ("tokens", "labels", "loss_mask", "position_ids", "padding_mask")


def make_step(slots=SLOTS):
    return tm.GraphStep(C, N, 1, 0, device="cpu", convention="compact", slots=slots,
                        capacities=CAPACITIES, sequence_capacities=SEQUENCES)


def microbatch(rng, rung):
    """A packed microbatch whose smallest rung is `rung`: more rows than the
    rung below holds (documents padded to even lengths, some not full)."""
    low = CAPACITIES[rung - 1] if rung > 0 else 0
    T = int(rng.integers(low // 2 + 1, CAPACITIES[rung] // 2 + 1)) * 2
    k = int(rng.integers(1, min(SEQUENCES[rung] - 1, T // 2) + 1))
    cuts = np.sort(rng.choice(np.arange(1, T // 2), size=k - 1, replace=False)) * 2
    padded = np.diff(np.concatenate([[0], cuts, [T]])).astype(np.int64)
    lengths = padded - rng.integers(0, 2, size=k)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    cup = np.concatenate([[0], np.cumsum(padded)]).astype(np.int32)
    mask = np.zeros(T, np.float32)
    for i, length in enumerate(lengths):
        mask[cup[i]:cup[i] + length] = 1
    batch = {"tokens": torch.from_numpy(rng.integers(0, 1000, T)),
             "labels": torch.from_numpy(rng.integers(0, 1000, T)),
             "loss_mask": torch.from_numpy(mask),
             "position_ids": torch.from_numpy(rng.integers(0, 64, T)),
             "cu_seqlens": torch.from_numpy(cu), "cu_seqlens_padded": torch.from_numpy(cup),
             "max_seqlen": int(padded.max())}
    assert rung == next(r for r, (B, n) in enumerate(zip(CAPACITIES, SEQUENCES))
                        if T <= B and k <= n - 1)
    return batch, rung


def iteration(rng, rungs):
    return [microbatch(rng, r) for r in rungs]


def schedule(forward_step_func, data_iterator, model, num_microbatches, seq_length,
             micro_batch_size, forward_only=False):
    """A stand-in of megatron-core's forward_backward_func: every microbatch
    through forward_step_func, one result dict each."""
    out = []
    for _ in range(num_microbatches):
        out.append(forward_step_func(data_iterator, model))
    return out


def forward_step(data_iterator, model, get_batch=tm.IterationGraphs.get_batch):
    tokens, labels, loss_mask, mask, position_ids, params, padding_mask = \
        get_batch(data_iterator)
    assert mask is None
    result = {"tokens": tokens, "labels": labels, "loss_mask": loss_mask,
              "position_ids": position_ids, "padding_mask": padding_mask,
              "cu_seqlens_padded": params.cu_seqlens_q_padded,
              "cu_seqlens": params.cu_seqlens_q}
    return {k: v.clone() for k, v in result.items()}


def _copy_into(target, source):
    if isinstance(target, torch.Tensor):
        target.copy_(source)
    elif isinstance(target, dict):
        for key in target:
            _copy_into(target[key], source[key])
    else:
        for t, s in zip(target, source):
            _copy_into(t, s)


class StandInGraph:
    def __init__(self, run, result):
        self.run, self.result, self.fresh, self.replays = run, result, True, 0

    def replay(self):
        if self.fresh:  # the capture ran it: the replay right after is that run
            self.fresh = False
            return
        self.replays += 1
        _copy_into(self.result, self.run())

    def reset(self):
        self.run = None


class StandInGraphs(tm.IterationGraphs):
    def _capture(self, run):
        result = run()
        return StandInGraph(run, result), result


def call(graphs, items, **overrides):
    kwargs = dict(forward_step_func=forward_step, data_iterator=iter(items), model=[None],
                  num_microbatches=len(items), seq_length=C, micro_batch_size=1,
                  forward_only=False)
    kwargs.update(overrides)
    return graphs(**kwargs)


def expected(items, order, rungs=None):
    """Each microbatch through a one-slot step of the same ladder, eagerly,
    in the wrapper's order, at its own rung or at `rungs` (in that order)."""
    step = make_step(1)
    out = []
    for i, m in enumerate(order):
        batch, rung = items[m]
        slot = step.slot(0)
        slot.load_inputs(**batch)
        b, p = slot.rung(rung if rungs is None else rungs[i]).run()
        out.append({**{k: b[k].clone() for k in KEYS},
                    "cu_seqlens_padded": p.cu_seqlens_q_padded.clone(),
                    "cu_seqlens": p.cu_seqlens_q.clone()})
    return out


def check(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for key in w:
            assert torch.equal(g[key], w[key]), key


def test_handoff_order_and_policy():
    """Each iteration's microbatches, largest rung first, each in its own
    slot, give what the step gives each alone: when run eagerly, when
    captured and when replayed on new data. Iteration 0 runs eagerly (its
    rungs are not warm); a shape whose rungs are warm is captured when first
    met, then replayed; a shape with a cold rung runs eagerly."""
    rng = np.random.default_rng(7)
    graphs = StandInGraphs(schedule, make_step(), warmup=1)
    plan = [[2, 0], [0, 2], [2, 0], [1, 2, 0], [2, 0], [0], [2, 1, 0], [2, 0, 0, 0]]
    kinds, shapes = [], []
    for rungs_given in plan:
        items = iteration(rng, rungs_given)
        rungs = [r for _, r in items]
        replay = graphs.captured(rungs)
        result = call(graphs, items)
        kinds.append(graphs.last_kind)
        assert (graphs.last_kind == "replay") == replay
        order = graphs.last_order
        assert sorted(order) == list(range(len(items)))
        assert [rungs[m] for m in order] == sorted(rungs, reverse=True)
        check(result, expected(items, order))
        shapes.append(graphs.shape(rungs))
        for i, m in enumerate(order):  # the slot holds what was given
            assert torch.equal(graphs.step.slot(i).inputs.tokens[:len(items[m][0]["tokens"])],
                               items[m][0]["tokens"])
    assert shapes[0] == shapes[1] == shapes[2] == shapes[4] == (False, (2, 0))
    assert kinds[:3] == ["eager", "capture", "replay"]
    assert kinds[3] == "eager"  # rung 1 is cold
    assert kinds[4] == "replay"
    assert kinds[5] == "capture"  # (0,): warm since iteration 0
    assert kinds[6] == "capture"  # (2, 1, 0): rung 1 warm since iteration 3
    assert kinds[7] == "capture"  # (2, 0, 0, 0)
    stats = graphs.stats
    assert (stats["eager"], stats["captured"], stats["replayed"]) == (2, 4, 2)
    assert stats["shapes"][(False, (2, 0))] == 4
    assert stats["eager_over_budget"] == 0


def users_forward_step(data_iterator, model):
    """A forward_step as a Megatron user writes it: its get_batch is the
    sequence-packing function of the reference framework (thdc's, which the
    launcher puts in its place), nothing of IterationGraphs."""
    return forward_step(data_iterator, model,
                        get_batch=tm.get_batch_on_this_rank_for_sequence_packing)


def test_the_users_forward_step_runs_unchanged():
    """Inside IterationGraphs, get_batch_on_this_rank_for_sequence_packing
    takes the iteration's views for an iterator and runs each: eagerly,
    captured and replayed, every microbatch is what the step gives it
    alone, and no batch is read from the ring of SEQUENCE_PACKING."""
    rng = np.random.default_rng(11)
    graphs = StandInGraphs(schedule, make_step(), warmup=1)
    steps, last = dict(tm.SEQUENCE_PACKING.steps), tm.SEQUENCE_PACKING.last
    kinds = []
    for _ in range(3):
        items = iteration(rng, [2, 0])
        result = call(graphs, items, forward_step_func=users_forward_step)
        kinds.append(graphs.last_kind)
        check(result, expected(items, graphs.last_order))
    assert kinds == ["eager", "capture", "replay"]
    assert tm.SEQUENCE_PACKING.steps == steps and tm.SEQUENCE_PACKING.last is last


def test_replay_returns_the_static_outputs():
    """A replay returns the captured result object, overwritten with the new
    iteration's outputs (as a graph's static outputs are)."""
    rng = np.random.default_rng(3)
    graphs = StandInGraphs(schedule, make_step(), warmup=1)
    call(graphs, iteration(rng, [2, 0]))
    first = call(graphs, iteration(rng, [2, 0]))
    assert graphs.last_kind == "capture"
    items = iteration(rng, [2, 0])
    again = call(graphs, items)
    assert again is first and graphs.last_kind == "replay"
    check(again, expected(items, graphs.last_order))


def test_budget_runs_new_shapes_eagerly():
    rng = np.random.default_rng(5)
    graphs = StandInGraphs(schedule, make_step(), warmup=1, max_graphs=1)
    call(graphs, iteration(rng, [2, 0]))  # warms rungs 2 and 0
    call(graphs, iteration(rng, [2, 0]))  # captured: the budget's one graph
    items = iteration(rng, [0])
    result = call(graphs, items)
    assert graphs.last_kind == "eager"
    check(result, expected(items, graphs.last_order))
    assert graphs.stats["eager_over_budget"] == 1 and graphs.stats["captured"] == 1
    zero = StandInGraphs(schedule, make_step(), max_graphs=0)
    for _ in range(3):
        call(zero, iteration(rng, [0]))
        assert zero.last_kind == "eager"


def test_past_the_budget_a_larger_captured_shape_holds_the_iteration():
    """Over the budget, an iteration replays the captured shape that holds it
    at the fewest rows, its microbatches padded to that shape's rungs (what
    the step gives each alone at those rungs); one that no captured shape
    holds runs eagerly."""
    rng = np.random.default_rng(29)
    graphs = StandInGraphs(schedule, make_step(), warmup=1, max_graphs=2)
    for rungs in ([2, 1], [2, 1], [2, 2], [2, 2]):
        call(graphs, iteration(rng, rungs))
    assert graphs.stats["captured"] == 2
    for rungs, held, rows in (([0, 2], (2, 1), CAPACITIES[1] - CAPACITIES[0]),
                              ([1, 1], (2, 1), CAPACITIES[2] - CAPACITIES[1]),
                              ([2, 0], (2, 1), CAPACITIES[1] - CAPACITIES[0]),
                              ([2, 2], (2, 2), 0)):
        items = iteration(rng, rungs)
        before = graphs.stats["promoted_rows"]
        assert graphs.captured(rungs)
        result = call(graphs, items)
        assert graphs.last_kind == "replay"
        assert tuple(graphs.last_rungs) == held
        assert graphs.stats["promoted_rows"] - before == rows
        check(result, expected(items, graphs.last_order, graphs.last_rungs))
    assert graphs.stats["promoted"] == 3
    items = iteration(rng, [2, 2, 0])  # three microbatches: no graph holds it
    assert not graphs.captured([2, 2, 0])
    check(call(graphs, items), expected(items, graphs.last_order))
    assert graphs.last_kind == "eager" and graphs.last_rungs == [2, 2, 0]


def test_planned_shapes_are_the_ones_captured():
    """With shapes=..., an iteration runs the planned shape that holds it at
    the fewest rows: warmed eagerly at that shape's rungs, then captured and
    replayed by every iteration it holds; a shape no planned one holds is
    captured itself while the budget lasts."""
    rng = np.random.default_rng(31)
    plan = tm.choose_shapes([[2, 0], [1, 0], [1, 1], [0], [2, 1]], CAPACITIES, 2)
    assert plan == [(2, 1), (0,)]
    graphs = StandInGraphs(schedule, make_step(), warmup=1, max_graphs=3, shapes=plan)
    kinds, held = [], []
    for rungs in ([1, 0], [0, 1], [2, 0], [1, 1], [0], [0], [2, 2], [2, 2], [2, 2]):
        items = iteration(rng, rungs)
        result = call(graphs, items)
        kinds.append(graphs.last_kind)
        held.append(tuple(graphs.last_rungs))
        check(result, expected(items, graphs.last_order, graphs.last_rungs))
    assert held[:6] == [(2, 1)] * 4 + [(0,)] * 2
    assert kinds[:6] == ["eager", "capture", "replay", "replay", "eager", "capture"]
    # (2, 2): no planned shape holds it; the budget's third graph, its rung warm
    assert held[6:] == [(2, 2)] * 3 and kinds[6:] == ["capture", "replay", "replay"]
    assert graphs.stats["captured"] == 3 and graphs.stats["promoted"] == 4


def test_choose_shapes():
    capacities = [10, 20, 40, 80]
    stream = [[3, 0], [0, 3], [3, 1], [2, 2], [1, 1], [1, 1], [1, 0], [3, 3, 0], [0]]
    # a budget of the distinct shapes: each its own, no row added
    everything = tm.choose_shapes(stream, capacities, 10)
    assert sorted(everything) == sorted({tuple(sorted(r, reverse=True)) for r in stream})
    # one shape per count, each holding its count's shapes, the most frequent count first
    # (ties: fewer microbatches first)
    assert tm.choose_shapes(stream, capacities, 3) == [(3, 2), (0,), (3, 3, 0)]
    assert tm.choose_shapes(stream, capacities, 1) == [(3, 2)]
    assert tm.choose_shapes(stream, capacities, 0) == []

    def added(shapes):
        total = 0
        for rungs in stream:
            own = sorted(rungs, reverse=True)
            total += min(sum(capacities[b] - capacities[a] for a, b in zip(own, s))
                         for s in shapes
                         if len(s) == len(own) and all(b >= a for a, b in zip(own, s)))
        return total

    rows = [added(tm.choose_shapes(stream, capacities, k)) for k in range(3, 8)]
    assert rows == sorted(rows, reverse=True) and rows[-1] == 0 < rows[0]
    # the fourth graph: (1, 1), which saves the most rows (3 iterations)
    assert tm.choose_shapes(stream, capacities, 4)[3] == (1, 1)
    for bad, match in ((([[4]], capacities, 2)), "rungs must be 0 to 3"), \
                      ((([[]], capacities, 2)), "at least one"), \
                      ((([[0]], capacities, -1)), "max_graphs"), \
                      ((([[0]], [20, 10], 1)), "must not decrease"):
        with pytest.raises(ValueError, match=match):
            tm.choose_shapes(*bad)
    with pytest.raises(TypeError, match="rungs are ints"):
        tm.choose_shapes([[1.5]], capacities, 2)
    assert tm.choose_shapes([np.array([1, 0])], capacities, 1) == [(1, 0)]
    # A bool is no rung; the ladder's rows are ints >= 1, never truncated.
    for rungs in ([True, 0], [np.bool_(True)]):
        with pytest.raises(TypeError, match="rungs are ints"):
            tm.choose_shapes([rungs], capacities, 2)
    for bad, error, match in (([10, 20.9], TypeError, "rows are ints; got 20.9"),
                              ([10, "20"], TypeError, "rows are ints; got '20'"),
                              ([True, 20], TypeError, "rows are ints; got True"),
                              ([-10, 20], ValueError, "rows must be >= 1; got -10"),
                              ([0, 20], ValueError, "rows must be >= 1; got 0")):
        with pytest.raises(error, match=match):
            tm.choose_shapes([[1, 0]], bad, 2)
    assert tm.choose_shapes([[1, 0]], [np.int64(10), np.int32(20)], 1) == [(1, 0)]


def test_choose_shapes_pads_nothing_where_the_budget_holds_every_shape():
    """Five distinct shapes, a budget of five: each its own graph. The first
    pass took each count's column-wise largest rungs, (4, 3, 3, 3, 2), which
    then kept a graph of the five while (3, 3, 3, 3, 2) was padded by it."""
    capacities = [16, 32, 48, 64, 80]
    stream = [[4, 3, 3, 2, 2], [3, 3, 3, 3, 2], [4, 3, 2, 2, 2], [4, 2, 2, 2, 2],
              [3, 3, 3, 2, 2]] * 3 + [[3, 3, 3, 3, 2]]
    chosen = tm.choose_shapes(stream, capacities, 5)
    assert sorted(chosen) == sorted({tuple(r) for r in stream})
    assert chosen[0] == (3, 3, 3, 3, 2)  # the most frequent first


@pytest.mark.parametrize("seed", range(4))
def test_choose_shapes_against_exhaustive_search_on_small_streams(seed):
    """The plan holds every shape of the stream within the budget, and pads
    no more rows than twice the best plan of the stream's own shapes and
    each count's largest found by exhaustive search (the greedy is not
    exact; this bounds it)."""
    import itertools

    rng = np.random.default_rng(seed)
    capacities = sorted(int(c) for c in rng.integers(1, 64, 4))
    stream = [list(rng.integers(0, 4, int(rng.integers(2, 4)))) for _ in range(30)]
    own = sorted({tuple(sorted(map(int, r), reverse=True)) for r in stream})
    lengths = {len(s) for s in own}

    def padded(plan):
        total = 0
        for rungs in stream:
            s = tuple(sorted(map(int, rungs), reverse=True))
            options = [sum(capacities[b] - capacities[a] for a, b in zip(s, c)) for c in plan
                       if len(c) == len(s) and all(b >= a for a, b in zip(s, c))]
            if not options:
                return None
            total += min(options)
        return total

    tops = {tuple(max(col) for col in zip(*[s for s in own if len(s) == k])) for k in lengths}
    candidates = sorted(set(own) | tops)
    for budget in range(len(lengths), min(len(own), 6)):
        best = min(p for p in (padded(c) for c in itertools.combinations(candidates, budget))
                   if p is not None)
        got = padded(tm.choose_shapes(stream, capacities, budget))
        assert got is not None and got <= 2 * best, (budget, got, best)


def test_warmup_counts_eager_runs_per_rung():
    rng = np.random.default_rng(11)
    graphs = StandInGraphs(schedule, make_step(), warmup=2)
    kinds = []
    for _ in range(4):
        call(graphs, iteration(rng, [0]))
        kinds.append(graphs.last_kind)
    assert kinds == ["eager", "eager", "capture", "replay"]


def test_forward_only_is_its_own_shape():
    rng = np.random.default_rng(13)
    graphs = StandInGraphs(schedule, make_step(), warmup=1)
    call(graphs, iteration(rng, [0]))
    call(graphs, iteration(rng, [0]))
    assert graphs.last_kind == "capture"
    call(graphs, iteration(rng, [0]), forward_only=True)
    assert graphs.last_kind == "eager"  # validation's rungs are not warm
    assert graphs.captured([0]) and not graphs.captured([0], forward_only=True)


def test_a_dict_alone_runs_the_top_rung():
    rng = np.random.default_rng(17)
    graphs = StandInGraphs(schedule, make_step(), warmup=1)
    batch, _ = microbatch(rng, 0)
    result = call(graphs, [batch])
    assert graphs.shape([None]) == (False, (len(CAPACITIES) - 1,))
    assert result[0]["tokens"].shape == (1, C)
    check(result, expected([(batch, -1)], [0]))


def test_shapes_of_counts_what_would_be_captured():
    step = make_step()
    counts = tm.shapes_of([[2, 0], [0, 2], [1], [2, 0, 0], [1]], step)
    assert counts == {(False, (2, 0)): 2, (False, (1,)): 2, (False, (2, 0, 0)): 1}


def test_refused_calls():
    rng = np.random.default_rng(19)
    step = make_step()
    with pytest.raises(TypeError, match="GraphStep"):
        tm.IterationGraphs(schedule, object())
    for bad in ({"warmup": 0}, {"warmup": 1.5}, {"max_graphs": -1}, {"max_graphs": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            tm.IterationGraphs(schedule, step, **bad)
    graphs = StandInGraphs(schedule, step)
    items = iteration(rng, [0, 0])
    with pytest.raises(ValueError, match="num_microbatches is 3 but data_iterator gave 2"):
        call(graphs, items, num_microbatches=3)
    with pytest.raises(ValueError, match="5 microbatches but the step has 4 slots"):
        call(graphs, iteration(rng, [0] * 5))
    with pytest.raises(TypeError, match="seq_length"):
        graphs(forward_step_func=forward_step, data_iterator=iter(items), model=[None],
               num_microbatches=2, micro_batch_size=1)
    with pytest.raises(TypeError, match="batch dict"):
        call(graphs, [(items[0][0]["tokens"], 0)])
    with pytest.raises(IndexError, match="rung 3"):
        call(graphs, [(items[0][0], 3)])
    assert graphs.stats["eager"] == 0  # nothing ran


def test_a_step_on_the_cpu_cannot_be_captured():
    """The real capture (no stand-in) refuses a CPU step by name once a shape
    is warm; the eager warm-up before it runs."""
    rng = np.random.default_rng(23)
    graphs = tm.IterationGraphs(schedule, make_step(), warmup=1)
    call(graphs, iteration(rng, [0]))
    assert graphs.last_kind == "eager"
    with pytest.raises(RuntimeError, match="CPU"):
        call(graphs, iteration(rng, [0]))


def test_a_pack_of_n_sequences_filling_every_row():
    """The packing loader's batch of exactly N sequences filling all C*cp
    rows has cu arrays of N+1 entries and no num_seqs, as its cu arrays
    always hold num_seqs + 1 offsets: the wrapper takes it, as the drop-in
    batch function does (it refused it: 'cu arrays of N+1 entries need
    num_seqs'), and trains all N sequences."""
    rng = np.random.default_rng(12)
    graphs = StandInGraphs(schedule, make_step(), warmup=1)
    lengths = np.full(N, C // N, np.int64)
    cu = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    full = {"tokens": torch.from_numpy(rng.integers(0, 1000, C)),
            "labels": torch.from_numpy(rng.integers(0, 1000, C)),
            "loss_mask": torch.ones(C), "position_ids": torch.from_numpy(rng.integers(0, 64, C)),
            "cu_seqlens": cu, "cu_seqlens_padded": cu.clone(), "max_seqlen": C // N}
    items = [(full, 2), microbatch(rng, 0)]
    result = call(graphs, items)
    order = graphs.last_order
    got = result[order.index(0)]
    assert torch.equal(got["cu_seqlens_padded"], cu) and torch.equal(got["cu_seqlens"], cu)
    assert int(graphs.step.slot(order.index(0)).rung(2).status[0]) == 0
    check(result, expected([({**full, "num_seqs": N}, 2), items[1]], order))
