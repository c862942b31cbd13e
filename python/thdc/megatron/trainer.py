"""Megatron-LM's trainer with thdc's ladder and exact rows, its files
unedited: what the launcher (thdc.megatron.run) puts in place before the
training script imports it.

- `leave_plan_figures(data_schedule)`: megatron-core's dp_balanced scheduler plans
  every global batch on the host (DpBalancedScheduler.get_groups_and_
  subsamples, megatron/core/datasets/data_schedule.py:165-217 on dev
  d48bd6be0a, from the lengths it gathered and read back once per global
  batch, data_schedule_utils.py:176-229) and then builds the packed
  microbatches on the device (build_packed_microbatches, :475-539). Each
  microbatch dict it yields gets the plan's own figures as host ints
  (PLAN_KEYS: its packed rows, its sequences, its longest padded sequence),
  so thdc's batch function picks a rung, or cuts exact rows, without reading
  the device.
- `ladder_graph_helper(base, capacities, sequence_capacities)`: a subclass
  of megatron-core's TECudaGraphHelper (the per-layer graphs training.py
  makes for --cuda-graph-impl transformer_engine, training.py:4244-4252,
  :4320-4331) that captures every layer once per rung of the ladder,
  largest first, all rungs in one memory pool, and puts a rung's graphs on
  the layers whenever thdc's batch function runs a microbatch at that rung
  (GraphableMegatronModule replays layer.cuda_graphs, module.py:366-385).
  The helper holds one shape per capture (transformer_layer.py:1256-1278
  sizes the static inputs from the config's max_seqlen_per_dp_cp_rank and
  thd_max_packed_sequences), hence one inner helper per rung, made with the
  rung's sizes in the config while it captures.

Both are for one GPU's ranks layout (tp = pp = cp = 1, no virtual stages);
thdc.megatron.run refuses the others by name."""
from __future__ import annotations

import functools
from typing import Callable, List, Optional, Sequence

from .loader import PLAN_KEYS

SCHEDULER = "dp_balanced"


def leave_plan_figures(data_schedule) -> None:
    """Makes megatron-core's dp_balanced scheduler (data_schedule.scheduler_map)
    leave PLAN_KEYS in every microbatch dict it builds on this rank. Once
    per module: a second call changes nothing. AttributeError where the
    module lacks the scheduler or the build function (another megatron-core
    release)."""
    schedulers = data_schedule.scheduler_map
    base = schedulers[SCHEDULER]
    if getattr(base, "_thdc_plan_figures", False):
        return
    build = data_schedule.build_packed_microbatches
    planned: dict = {}

    class PlanFigures(base):
        _thdc_plan_figures = True

        def get_groups_and_subsamples(self, sample_id_seqlens):
            groups = super().get_groups_and_subsamples(sample_id_seqlens)
            # (global id, padded length) pairs, the id the list index
            # (data_schedule_utils.py:220-221 on dev).
            planned["lengths"] = {int(i): int(n) for i, n in sample_id_seqlens}
            return groups

    PlanFigures.__name__ = PlanFigures.__qualname__ = base.__name__

    @functools.wraps(build)
    def build_with_figures(samples_this_rank_with_id, sample_id_groups, dcp_rank, *args,
                           **kwargs):
        samples = build(samples_this_rank_with_id, sample_id_groups, dcp_rank, *args, **kwargs)
        lengths = planned.pop("lengths", None)
        if lengths is not None:  # the plan of this very global batch
            for sample, group in zip(samples, sample_id_groups):
                pack = [lengths[int(i)] for i in group[dcp_rank]]
                # rows, sequences, longest: loader.PLAN_KEYS's order
                for key, value in zip(PLAN_KEYS, (sum(pack), len(pack), max(pack, default=0))):
                    sample[key] = value
        return samples

    schedulers[SCHEDULER] = PlanFigures
    data_schedule.build_packed_microbatches = build_with_figures


def ladder_graph_helper(base, capacities: Sequence[int], sequence_capacities: Sequence[int],
                        listeners: List[Callable[[int], None]], graph_pool=None):
    """A subclass of `base` (megatron-core's TECudaGraphHelper) that captures
    every layer at each rung (capacities[r] rows, sequence_capacities[r]
    sequences) and whose select(r) puts rung r's graphs on the layers;
    every helper made registers its select in `listeners` (the batch
    function calls them with the rung of each microbatch). graph_pool: a
    callable giving the shared pool (default torch.cuda.graph_pool_handle)."""
    capacities, sequence_capacities = list(capacities), list(sequence_capacities)

    class LadderGraphHelper(base):
        """megatron-core's per-layer graphs, one capture per rung of thdc's
        capacity ladder ({capacities})."""

        def __init__(self, model, config, seq_length, micro_batch_size, optimizers=[],
                     pg_collection=None, thd_sequence_length_upper_bound=None):
            super().__init__(model, config, seq_length, micro_batch_size, optimizers,
                             pg_collection, thd_sequence_length_upper_bound)
            self._thdc_args = dict(model=model, micro_batch_size=micro_batch_size,
                                   optimizers=optimizers, pg_collection=pg_collection)
            self._thdc_rungs: dict = {}  # rung: (inner helper, every layer's graphs)
            self._thdc_selected: Optional[int] = None
            listeners.append(self.select)

        def create_cudagraphs(self):
            """Every rung captured, the largest first, in one memory pool
            (every graph of a microbatch replays before the next
            microbatch's, so the rungs may share it); the config's sizes put
            back after; the top rung's graphs on the layers."""
            from megatron.core.transformer import cuda_graphs

            config = self.config
            saved = (config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences)
            pool = (graph_pool or _default_pool)()
            make = cuda_graphs.make_graphed_callables
            cuda_graphs.make_graphed_callables = functools.partial(make, pool=pool)
            try:
                for rung in reversed(range(len(capacities))):
                    B, N = capacities[rung], sequence_capacities[rung]
                    config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences = B, N
                    inner = base(config=config, seq_length=B, thd_sequence_length_upper_bound=B,
                                 **self._thdc_args)
                    inner.create_cudagraphs()
                    layers = inner.flattened_callables
                    self._thdc_rungs[rung] = (inner, [list(layer.cuda_graphs)
                                                      for layer in layers])
                    for layer in layers:  # the next capture must run them eagerly
                        layer.cuda_graphs = []
            finally:
                cuda_graphs.make_graphed_callables = make
                config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences = saved
            self._capture_finished = True
            self._graphs_created = any(inner.graphs_created()
                                       for inner, _ in self._thdc_rungs.values())
            self.select(len(capacities) - 1)

        def select(self, rung: int) -> None:
            """Rung `rung`'s graphs on the layers (nothing before the capture)."""
            if rung == self._thdc_selected or rung not in self._thdc_rungs:
                return
            inner, graphs = self._thdc_rungs[rung]
            for layer, layer_graphs in zip(inner.flattened_callables, graphs):
                layer.cuda_graphs = layer_graphs
            self._thdc_selected = rung

        def delete_cuda_graphs(self):
            for rung, (inner, graphs) in self._thdc_rungs.items():
                if inner.graphs_created():
                    self._thdc_selected = None
                    self.select(rung)
                    inner.delete_cuda_graphs()
            self._thdc_rungs, self._thdc_selected = {}, None
            self._graphs_created = False
            if self.select in listeners:
                listeners.remove(self.select)

    LadderGraphHelper.__doc__ = LadderGraphHelper.__doc__.format(capacities=capacities)
    return LadderGraphHelper


def _default_pool():
    import torch

    return torch.cuda.graph_pool_handle()


def iteration_graphs_wrapper(packing, listeners: List[Callable[[int], None]],
                             report: bool = False):
    """A class that takes the place of megatron-core's FullCudaGraphWrapper
    (training.py makes one around the schedule's forward_backward_func for
    --cuda-graph-impl full_iteration, :4148-4153 for training and :4760-4765
    for evaluation, on dev d48bd6be0a) and captures thdc's whole-iteration
    graphs instead: one per iteration shape (IterationGraphs), each
    microbatch at the rung of the ladder its plan figures give, where dev's
    one graph for every iteration cannot hold packed iterations of
    different microbatch counts and sizes.

    Each call takes the iteration's num_microbatches batch dicts from the
    data iterator (megatron-core's packed iterator, the plan's figures in
    each: leave_plan_figures), picks each one's rung on the host (the top
    rung without figures; a microbatch beyond the top rung runs there and is
    emptied and counted by the step), tells `listeners`, and runs
    IterationGraphs, whose data iterator the user's forward_step hands to
    get_batch_on_this_rank_for_sequence_packing unchanged. The step is made
    at the first call, from the model's config as `packing`
    (SEQUENCE_PACKING, configured with the ladder) makes its steps, with a
    slot for every sample of the rank's share of the global batch (a
    microbatch holds one at least), one step and one set of graphs for
    training and one for evaluation, shared by every instance. Eager
    iterations come first
    (cuda_graph_warmup_steps per rung, as dev's warm-up), then each shape is
    captured when first met; the result of a replay is the graph's static
    output, overwritten by its next replay, as with dev's wrapper. With
    `report`, each instance says at exit how its iterations ran. For one
    GPU's layout (thdc.megatron.run refuses the others)."""
    from .iteration import IterationGraphs
    from .loader import plan_figures
    from .sequence_packing import plan_rung

    class FullIterationGraphs:
        """thdc's whole-iteration graphs in megatron-core's FullCudaGraphWrapper's
        place (thdc.megatron.trainer.iteration_graphs_wrapper)."""

        # What training.py reads of the class (training.py:2872 on dev, for
        # MXFP8 parameter buffers only): dev's one graph of each kind. Ours
        # are the instances' own (`graphs`), so it stays None.
        cuda_graph = {"training": None, "validation": None}

        # The graphs of each kind, kept by the class as dev keeps its one
        # graph of each (full_cuda_graph.py:148-150): training.py makes a
        # wrapper for every evaluation (:4760), which must not capture anew.
        graphs_by_kind: dict = {}

        def __init__(self, forward_backward_func, cuda_graph_warmup_steps=1,
                     use_single_mempool=False):
            self.forward_backward_func = forward_backward_func
            self.warmup = max(int(cuda_graph_warmup_steps), 1)
            self.graphs: Optional[IterationGraphs] = None  # the last call's

        def _make_graphs(self, model) -> IterationGraphs:
            from .sequence_packing import step_options

            config, dp, global_batch_size = _megatron_context(model)
            slots = -(-global_batch_size // dp)
            step = packing.make_step(step_options(config, tp=1, cp=1), "first_last", 1, 0, 1,
                                     0, slots)
            return IterationGraphs(self.forward_backward_func, step, warmup=self.warmup)

        def __call__(self, *args, **kwargs):
            if args:
                raise TypeError("forward_backward_func takes keyword arguments only")
            kind = "validation" if kwargs.get("forward_only") else "training"
            graphs = self.graphs_by_kind.get(kind)
            if graphs is None:
                graphs = self.graphs_by_kind[kind] = self._make_graphs(kwargs["model"])
                if report:
                    _report_at_exit(graphs, kind)
            self.graphs = graphs
            step = graphs.step
            iterator = kwargs["data_iterator"]
            if isinstance(iterator, list):
                if len(iterator) != 1:
                    raise ValueError(f"thdc's whole-iteration graphs take one model chunk's "
                                     f"iterator; got {len(iterator)}")
                iterator = iterator[0]
            items = []
            for _ in range(kwargs["num_microbatches"]):
                batch = next(iterator)
                rung, _ = plan_rung(step, plan_figures(batch))  # emptied there if it won't fit
                for listener in listeners:
                    listener(rung)
                items.append((batch, rung))
            return graphs(**{**kwargs, "data_iterator": items})

    return FullIterationGraphs


def _megatron_context(model):
    """(the model's config, the data-parallel size, the global batch size)
    of the running Megatron job."""
    from megatron.core import parallel_state
    from megatron.core.utils import get_model_config
    from megatron.training import get_args

    config = get_model_config(model[0] if isinstance(model, list) else model)
    return config, parallel_state.get_data_parallel_world_size(), get_args().global_batch_size


def _report_at_exit(graphs, kind: str) -> None:
    """Says on stderr, when the process exits (rank 0 of a run with
    several), how the `kind` iterations (training, validation) ran: eager,
    captured, replayed, and those run at a larger shape, with the rows that
    added."""
    import atexit
    import os
    import sys

    def report() -> None:
        stats = graphs.stats
        if os.environ.get("RANK", "0") == "0" and stats["shapes"]:
            sys.stderr.write(
                f"thdc.megatron.run: whole-iteration graphs ({kind}): {stats['eager']} eager, "
                f"{stats['captured']} captured, {stats['replayed']} replayed iterations "
                f"({len(stats['shapes'])} shapes met; {stats['promoted']} run at a larger "
                f"shape, {stats['promoted_rows']} rows added; capture "
                f"{stats['capture_s']:.1f} s)\n")

    atexit.register(report)
