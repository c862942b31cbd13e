"""thdc.megatron.trainer and the batch function's ladder and exact rows, on
the CPU: megatron-core's scheduler made to leave the plan's figures in each
microbatch (a stand-in scheduler and build function with dev's signatures,
data_schedule.py:165-217 and data_schedule_utils.py:475-539 on d48bd6be0a),
the per-layer graph helper captured once per rung (a stand-in helper with
TECudaGraphHelper's constructor and methods, cuda_graphs.py:1704-2760), and
the batch function choosing each microbatch's rung from those figures, its
outputs the rung's own, or the microbatch's exact rows."""
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
from thdc.megatron import loader, trainer  # noqa: E402
from microbatches import LocalGroup, random_microbatch, step_inputs  # noqa: E402


# -- the plan's figures ------------------------------------------------------

class StandInScheduler:
    """dp_balanced's planning step: packs (id, length) pairs in order up to
    `budget` rows, one pack per microbatch (dp = cp = 1)."""

    budget = 100

    def get_groups_and_subsamples(self, sample_id_seqlens):
        groups, pack, rows = [], [], 0
        for i, n in sample_id_seqlens:
            if pack and rows + n > self.budget:
                groups.append([pack])
                pack, rows = [], 0
            pack.append(i)
            rows += n
        return groups + [[pack]] if pack else groups


def stand_in_schedule():
    def build_packed_microbatches(samples_this_rank_with_id, sample_id_groups, dcp_rank, dev,
                                  is_dynamic_cp=False):
        return [{"tokens": ("packed", tuple(group[dcp_rank]))} for group in sample_id_groups]

    return types.SimpleNamespace(scheduler_map={"dp_balanced": StandInScheduler},
                                 build_packed_microbatches=build_packed_microbatches)


def plan_and_build(module, lengths):
    scheduler = module.scheduler_map["dp_balanced"]()
    groups = scheduler.get_groups_and_subsamples(list(enumerate(lengths)))
    return module.build_packed_microbatches({}, groups, 0, "cpu")


def test_each_microbatch_gets_its_plans_figures():
    module = stand_in_schedule()
    trainer.leave_plan_figures(module)
    built = plan_and_build(module, [30, 50, 40, 100, 7, 8, 9])
    assert [b["tokens"][1] for b in built] == [(0, 1), (2,), (3,), (4, 5, 6)]
    assert [loader.plan_figures(b) for b in built] == [(80, 2, 50), (40, 1, 40),
                                                      (100, 1, 100), (24, 3, 9)]
    # The next global batch's figures are its own.
    built = plan_and_build(module, [60, 60])
    assert [loader.plan_figures(b) for b in built] == [(60, 1, 60), (60, 1, 60)]


def test_leaving_figures_twice_changes_nothing():
    module = stand_in_schedule()
    trainer.leave_plan_figures(module)
    scheduler, build = module.scheduler_map["dp_balanced"], module.build_packed_microbatches
    trainer.leave_plan_figures(module)
    assert module.scheduler_map["dp_balanced"] is scheduler
    assert module.build_packed_microbatches is build
    assert issubclass(scheduler, StandInScheduler) and scheduler.__name__ == "StandInScheduler"


def test_a_build_without_a_plan_leaves_no_figures():
    """A build the patched scheduler did not plan (another scheduler of the
    map) carries no figures, rather than another batch's."""
    module = stand_in_schedule()
    trainer.leave_plan_figures(module)
    built = module.build_packed_microbatches({}, [[[0]]], 0, "cpu")
    assert loader.plan_figures(built[0]) is None


def test_figures_of_a_batch_without_them():
    assert loader.plan_figures({"tokens": 1}) is None
    assert loader.plan_figures(dict(zip(loader.PLAN_KEYS, (np.int64(5), 2, 3)))) == (5, 2, 3)


# -- the graph helper, once per rung -------------------------------------------

class Layer:
    def __init__(self):
        self.cuda_graphs = []


class StandInHelper:
    """TECudaGraphHelper's surface: each capture records the config's sizes
    and the keyword arguments make_graphed_callables got."""

    made = []

    def __init__(self, model, config, seq_length, micro_batch_size, optimizers=[],
                 pg_collection=None, thd_sequence_length_upper_bound=None):
        self.model, self.config, self.seq_length = model, config, seq_length
        self.upper = thd_sequence_length_upper_bound
        self.flattened_callables = model  # the stand-in model is its layers
        self._capture_finished = self._graphs_created = False
        StandInHelper.made.append(self)

    def create_cudagraphs(self):
        from megatron.core.transformer import cuda_graphs

        kwargs = cuda_graphs.make_graphed_callables()
        sizes = (self.config.max_seqlen_per_dp_cp_rank, self.config.thd_max_packed_sequences,
                 self.seq_length, self.upper)
        for i, layer in enumerate(self.flattened_callables):
            layer.cuda_graphs = [SimpleNamespace(sizes=sizes, layer=i, pool=kwargs.get("pool"),
                                                 reset_calls=[])]
            layer.cuda_graphs[0].reset = lambda g=layer.cuda_graphs[0]: g.reset_calls.append(1)
        self._capture_finished = self._graphs_created = True

    def capture_finished(self):
        return self._capture_finished

    def graphs_created(self):
        return self._graphs_created

    def delete_cuda_graphs(self):
        assert self._graphs_created
        for layer in self.flattened_callables:
            for graph in layer.cuda_graphs:
                graph.reset()
            layer.cuda_graphs = []
        self._graphs_created = False


@pytest.fixture
def cuda_graphs_module(monkeypatch):
    module = types.ModuleType("megatron.core.transformer.cuda_graphs")
    module.make_graphed_callables = lambda *args, **kwargs: kwargs
    for name in ("megatron", "megatron.core", "megatron.core.transformer"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "megatron.core.transformer.cuda_graphs", module)
    sys.modules["megatron.core.transformer"].cuda_graphs = module
    StandInHelper.made = []
    return module


def test_every_rung_is_captured_largest_first_in_one_pool(cuda_graphs_module):
    listeners = []
    Helper = trainer.ladder_graph_helper(StandInHelper, [16, 32, 64], [5, 9, 9], listeners,
                                         graph_pool=lambda: "the pool")
    config = SimpleNamespace(max_seqlen_per_dp_cp_rank=64, thd_max_packed_sequences=9)
    layers = [Layer(), Layer()]
    helper = Helper(layers, config, 64, 1, [], None, 64)
    assert isinstance(helper, StandInHelper) and listeners == [helper.select]
    helper.select(0)  # before the capture: nothing to put on the layers
    assert layers[0].cuda_graphs == []
    helper.create_cudagraphs()
    inner = StandInHelper.made[1:]
    assert [(h.seq_length, h.upper) for h in inner] == [(64, 64), (32, 32), (16, 16)]
    # The config back to the top rung; make_graphed_callables back too.
    assert (config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences) == (64, 9)
    assert "pool" not in cuda_graphs_module.make_graphed_callables()
    assert helper.capture_finished() and helper.graphs_created()
    # The top rung on the layers; each rung's graphs captured at its sizes.
    assert [g.sizes for g in layers[1].cuda_graphs] == [(64, 9, 64, 64)]
    for rung, sizes in ((0, (16, 5, 16, 16)), (2, (64, 9, 64, 64)), (1, (32, 9, 32, 32))):
        helper.select(rung)
        assert [(g.sizes, g.layer, g.pool) for g in layers[0].cuda_graphs] == [
            (sizes, 0, "the pool")]
        assert [g.layer for g in layers[1].cuda_graphs] == [1]
    graphs = [helper._thdc_rungs[r][1][0][0] for r in range(3)]
    helper.delete_cuda_graphs()
    assert [len(g.reset_calls) for g in graphs] == [1, 1, 1]
    assert not helper.graphs_created() and layers[0].cuda_graphs == [] and listeners == []


def test_a_failed_capture_puts_the_config_back(cuda_graphs_module):
    class Failing(StandInHelper):
        def create_cudagraphs(self):
            if self.seq_length == 32:
                raise RuntimeError("capture failed")
            super().create_cudagraphs()

    config = SimpleNamespace(max_seqlen_per_dp_cp_rank=64, thd_max_packed_sequences=9)
    make = cuda_graphs_module.make_graphed_callables
    helper = trainer.ladder_graph_helper(Failing, [16, 32, 64], [5, 9, 9], [],
                                         graph_pool=lambda: None)([Layer()], config, 64, 1)
    with pytest.raises(RuntimeError, match="capture failed"):
        helper.create_cudagraphs()
    assert (config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences) == (64, 9)
    assert cuda_graphs_module.make_graphed_callables is make


# -- the batch function at a rung, or at exact rows ----------------------------

C, N, LADDER, SEQUENCES = 64, 9, [16, 32, 64], [5, 9, 9]


def _config():
    return SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                           pad_packed_seq_alignment="max", cuda_graph_impl="transformer_engine",
                           context_parallel_size=1)


def _groups(tp=1):
    return SimpleNamespace(tp=LocalGroup(0, tp), cp=LocalGroup(0, 1), pp=LocalGroup(0, 1))


def with_figures(mb):
    batch = step_inputs(mb, C, 1, device="cpu")
    n = int(mb["num_seqs"][0])
    lengths = np.diff(mb["cu_seqlens_padded"][:n + 1])
    rows = int(mb["cu_seqlens_padded"][n])
    batch.update(zip(loader.PLAN_KEYS, (rows, n, int(lengths.max()) if n else 0)))
    batch["max_seqlen"] = C
    return batch


def microbatches(seed, count):
    rng = np.random.default_rng(seed)
    return [random_microbatch(rng, C, 1, N, rank=0) for _ in range(count)]


def test_each_microbatch_runs_at_its_rung(cache_dir):
    batches = thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir)
    batches.configure(device="cpu", cache_dir=cache_dir, capacities=LADDER,
                      sequence_capacities=SEQUENCES)
    told = []
    batches.rung_listeners.append(told.append)
    check = thdc.megatron.GraphStep(C, N, 1, 0, device="cpu", cache_dir=cache_dir,
                                    capacities=LADDER, sequence_capacities=SEQUENCES)
    rungs = set()
    for mb in microbatches(1, 24):
        batch = with_figures(mb)
        rows, n, _ = loader.plan_figures(batch)
        expected_rung = thdc.planner.rung_index(LADDER, SEQUENCES, rows, n, 1)
        tokens, labels, loss_mask, _, position_ids, params, mask = batches(
            iter([batch]), pg_collection=_groups(), config=_config())
        assert told[-1] == expected_rung
        rungs.add(expected_rung)
        B = LADDER[expected_rung]
        assert tokens.shape == (1, B) and mask.shape == (1, B)
        assert params.max_seqlen_q == B
        assert params.cu_seqlens_q_padded.shape[0] == SEQUENCES[expected_rung] + 1
        slot = check.slot(0)
        slot.load_inputs(**{k: v for k, v in batch.items() if k not in loader.PLAN_KEYS})
        out, _ = slot.rung(expected_rung).run()
        for got, key in ((tokens, "tokens"), (labels, "labels"), (loss_mask, "loss_mask"),
                         (position_ids, "position_ids"), (mask, "padding_mask")):
            assert torch.equal(got, out[key]), key
    assert rungs == {0, 1, 2}  # the sample reaches every rung


def test_without_figures_a_microbatch_runs_at_the_top_rung(cache_dir):
    batches = thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                                   capacities=LADDER,
                                                   sequence_capacities=SEQUENCES)
    told = []
    batches.rung_listeners.append(told.append)
    batch = {k: v for k, v in with_figures(microbatches(2, 1)[0]).items()
             if k not in loader.PLAN_KEYS}
    tokens = batches(iter([batch]), pg_collection=_groups(), config=_config())[0]
    assert tokens.shape == (1, C) and told == [2]


def test_exact_rows_are_the_microbatchs_own(cache_dir):
    batches = thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir, exact=True)
    config = _config()
    config.cuda_graph_impl = "none"
    check = thdc.megatron.GraphStep(C, N, 1, 0, device="cpu", cache_dir=cache_dir)
    for mb in microbatches(3, 12):
        batch = with_figures(mb)
        rows, n, _ = loader.plan_figures(batch)
        tokens, _, loss_mask, _, _, params, mask = batches(iter([batch]), pg_collection=_groups(),
                                                           config=config)
        assert tokens.shape == (1, max(rows, 1)) and mask.shape == tokens.shape
        # An empty microbatch: one padding row, as one sequence.
        assert params.cu_seqlens_q_padded.shape[0] == (n + 1 if rows else 2)
        if rows:  # the step's own rows (padded slots sanitised), cut
            slot = check.slot(0)
            slot.load_inputs(**{k: v for k, v in batch.items() if k not in loader.PLAN_KEYS})
            out, _ = slot.run()
            assert torch.equal(tokens, out["tokens"][:, :rows])
            assert torch.equal(loss_mask, out["loss_mask"][:, :rows])
    batch = {k: v for k, v in batch.items() if k not in loader.PLAN_KEYS}
    with pytest.raises(ValueError, match="exact rows need the plan's figures"):
        batches(iter([batch]), pg_collection=_groups(), config=config)


def test_a_ladder_with_tensor_parallelism_is_refused(cache_dir):
    batches = thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                                   capacities=LADDER,
                                                   sequence_capacities=SEQUENCES)
    with pytest.raises(thdc.megatron.ConfigError, match="tp = 2: the rung of a microbatch"):
        batches(iter([]), pg_collection=_groups(tp=2), config=_config())


@pytest.mark.parametrize("kwargs, message", [
    (dict(capacities=[16, 64]), "capacities and sequence_capacities go together"),
    (dict(capacities=[32, 16, 64], sequence_capacities=[9, 9, 9]), "configure\\(capacities"),
    (dict(stage="first"), "configure\\(stage=...\\): it comes from the config"),
])
def test_bad_configurations_are_refused(kwargs, message):
    with pytest.raises(thdc.megatron.ConfigError, match=message):
        thdc.megatron.SequencePackingBatches(device="cpu", **kwargs)


def test_a_ladder_whose_top_is_not_the_config_is_refused(cache_dir):
    batches = thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                                   capacities=[16, 32],
                                                   sequence_capacities=[5, 9])
    batch = with_figures(microbatches(4, 1)[0])
    with pytest.raises(thdc.megatron.ConfigError, match="top rung"):
        batches(iter([batch]), pg_collection=_groups(), config=_config())


# -- whole-iteration graphs in megatron-core's wrapper's place ------------------

def _schedule(forward_step_func, data_iterator, model, num_microbatches, seq_length,
              micro_batch_size, forward_only=False, **rest):
    """megatron-core's forward_backward_func, stood in: every microbatch
    through forward_step_func."""
    return [forward_step_func(data_iterator, model) for _ in range(num_microbatches)]


def _users_forward_step(data_iterator, model):
    """pretrain_gpt.py's forward_step as far as the batch goes: its get_batch
    calls the sequence-packing function (thdc's, the launcher's)."""
    tokens, labels, loss_mask, _, position_ids, params, mask = \
        thdc.megatron.get_batch_on_this_rank_for_sequence_packing(data_iterator)
    return {"tokens": tokens.clone(), "loss_mask": loss_mask.clone(), "mask": mask.clone(),
            "padded": params.cu_seqlens_q_padded.clone(), "rows": int(tokens.shape[1])}


def test_whole_iteration_graphs_take_megatrons_wrappers_place(cache_dir, monkeypatch):
    """iteration_graphs_wrapper's class, called as training.py calls
    FullCudaGraphWrapper's: each microbatch at the rung its plan figures
    give (the top one without figures), the listeners told, and the user's
    forward_step's get_batch given that rung's outputs. Eager here (a step on
    the CPU cannot be captured: the warm-up outlasts the run)."""
    packing = thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                                   capacities=LADDER,
                                                   sequence_capacities=SEQUENCES)
    monkeypatch.setattr(trainer, "_megatron_context", lambda model: (_config(), 1, 6))
    told = []
    wrapper = trainer.iteration_graphs_wrapper(packing, [told.append])(
        _schedule, cuda_graph_warmup_steps=1000, use_single_mempool=False)
    check = thdc.megatron.GraphStep(C, N, 1, 0, device="cpu", cache_dir=cache_dir,
                                    capacities=LADDER, sequence_capacities=SEQUENCES)
    rungs_seen = set()
    sample = [with_figures(mb) for mb in microbatches(1, 24)]  # every rung among them
    for iteration, count in enumerate((3, 4, 5, 6, 6)):
        batches, sample = sample[:count], sample[count:]
        if iteration == 3:  # one without figures: the top rung
            batches[0] = {k: v for k, v in batches[0].items() if k not in loader.PLAN_KEYS}
        rungs = [thdc.planner.rung_index(LADDER, SEQUENCES, *loader.plan_figures(b)[:2], 1)
                 if loader.plan_figures(b) else len(LADDER) - 1 for b in batches]
        del told[:]
        result = wrapper(forward_step_func=_users_forward_step, data_iterator=[iter(batches)],
                         model=[None], num_microbatches=len(batches), seq_length=C,
                         micro_batch_size=1, forward_only=False)
        assert told == rungs
        order = wrapper.graphs.last_order
        assert [rungs[m] for m in order] == wrapper.graphs.last_rungs
        for got, m in zip(result, order):
            rung = rungs[m]
            rungs_seen.add(rung)
            slot = check.slot(0)
            slot.load_inputs(**{k: v for k, v in batches[m].items() if k not in loader.PLAN_KEYS})
            out, params = slot.rung(rung).run()
            assert got["rows"] == LADDER[rung]
            assert torch.equal(got["tokens"], out["tokens"])
            assert torch.equal(got["loss_mask"], out["loss_mask"])
            assert torch.equal(got["mask"], out["padding_mask"])
            assert torch.equal(got["padded"], params.cu_seqlens_q_padded)
    assert wrapper.graphs.stats["eager"] == 5 and len(wrapper.graphs.step.slots) == 6
    assert rungs_seen == {0, 1, 2}
    # Another instance (training.py makes one for every evaluation) keeps the
    # graphs of each kind: training's are these; evaluation gets its own.
    again = type(wrapper)(_schedule, cuda_graph_warmup_steps=1000)
    batches = [with_figures(mb) for mb in microbatches(2, 2)]
    again(forward_step_func=_users_forward_step, data_iterator=iter(batches), model=[None],
          num_microbatches=2, seq_length=C, micro_batch_size=1, forward_only=False)
    assert again.graphs is wrapper.graphs and wrapper.graphs.stats["eager"] == 6
    again(forward_step_func=_users_forward_step, data_iterator=iter(batches), model=[None],
          num_microbatches=2, seq_length=C, micro_batch_size=1, forward_only=True)
    assert again.graphs is not wrapper.graphs and again.graphs.stats["eager"] == 1
    assert type(wrapper).cuda_graph == {"training": None, "validation": None}
    with pytest.raises(TypeError, match="keyword arguments only"):
        wrapper(None)
    with pytest.raises(ValueError, match="one model chunk's iterator; got 2"):
        wrapper(forward_step_func=_users_forward_step, data_iterator=[iter([]), iter([])],
                model=[None], num_microbatches=1, seq_length=C, micro_batch_size=1,
                forward_only=False)
