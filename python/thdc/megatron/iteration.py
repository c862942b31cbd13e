"""Whole training iterations in CUDA graphs: megatron-core's
forward_backward_func captured once per iteration shape, the step's slots
as its static inputs.

megatron-core dev's full-iteration graphs (FullCudaGraphWrapper,
megatron/core/full_cuda_graph.py:134-241 on d48bd6be0a) capture the
schedule's forward and backward of every microbatch as one graph and,
before each replay, copy each microbatch's batch dict into static buffers
(StaticBufferLoader, :96-131). One graph holds one set of shapes, so every
iteration must have the same microbatch count and every microbatch the same
tensor shapes: THD packing gives neither, and dev leaves that to the user
(it refuses THD CP layout conversion under full-iteration graphs outright,
context_parallel_layout/conversion.py:48-56).

IterationGraphs keeps that wrapper's call (forward_backward_func's keyword
arguments) and replaces its two assumptions:

- The static buffers are the step's slots. Microbatch i of an iteration is
  loaded into `step.slot(i)` (StepSlot.load_inputs: one copy per tensor,
  queued on the current stream, nothing waits), and the schedule's data
  iterator is the slots' views at the microbatches' rungs (IterationViews):
  inside the schedule the user's forward_step calls
  get_batch_on_this_rank_for_sequence_packing(data_iterator) as in every
  other mode, and it runs slot i's step at its rung. The graph's inputs are
  the slots' inputs; forward_step and get_batch stay the user's, as dev's
  wrapper leaves them.
- One graph per iteration shape: the microbatch count and each
  microbatch's rung. The microbatches are put in rung order, largest first
  (`last_order` has the permutation); the gradients are their sum, so the
  order changes only the rounding of that sum, and a shape becomes a
  multiset, which halves the graphs a stream needs.

When a shape is captured. Every rung a shape holds must first have run in
`warmup` eager iterations, so that the per-shape setup of the libraries
below (attention plans, workspaces) happens outside a capture; until then
the iteration runs eagerly, at the rungs of the shape it will replay. A
shape seen once its rungs are warm is captured at once and replayed.

Which shape an iteration runs. A larger shape holds a smaller one of the
same microbatch count when, both in load order, each rung is at least the
other's: microbatch i then fits its rung in the larger shape too (a ladder's
rungs hold more rows and sequences as they go up, planner's check_ladder),
and the rows between are padding, masked as the step's padding always is.
An iteration runs its own shape, captured when first met, while at most
`max_graphs` are captured. Past that budget it replays the captured shape
that holds it at the fewest rows (counted in `stats` as promoted, with the
rows it added), or runs eagerly when none holds it. `shapes=` plans ahead
instead: the shapes to capture, as `thdc.planner.choose_shapes` picks them from the
plans of the coming iterations (what the planner knows before they run):
an iteration runs the planned or captured shape that holds it at the fewest
rows, and one that none holds is captured itself while the budget allows.

Memory. Every capture uses one memory pool of its own and megatron-core's
capture stream (full_cuda_graph.get_shared_capture_stream) where it is
installed. The graphs replay one at a time on one stream, so their
temporaries can share memory; what one returns (the schedule's loss
reports) is the graph's own static output, overwritten by its next replay,
as with dev's wrapper: copy what you keep before the next iteration. The
pool is not megatron-core's shared one on purpose: a graph captured after
another in the same pool may place its outputs in memory the other uses as
scratch, so replaying that other graph before the outputs are read (the
optimizer's graph, OptimizerCudaGraphWrapper, between the forward-backward
and the loss report) would overwrite them. dev's wrapper, which captures
one graph before the optimizer's, never meets this; a graph per shape
does. Pass `pool=` to share a pool where nothing replays in between.
"""
from __future__ import annotations

import gc
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .._shapes import _extra_rows
from ._views import IterationViews
from .loader import packing_batch_inputs
from .step import GraphStep

# What the schedule's forward_backward_func must be called with (dev's
# wrapper asserts the same, full_cuda_graph.py:186-197).
_REQUIRED = ("forward_step_func", "data_iterator", "model", "num_microbatches", "seq_length",
             "micro_batch_size")


class IterationGraphs:
    """megatron-core's forward_backward_func with each iteration shape
    captured in one CUDA graph (the module's docstring says how).

        graphs = IterationGraphs(get_forward_backward_func(), step)
        losses = graphs(forward_step_func=forward_step,
                        data_iterator=[(batch, rung), ...], model=[model],
                        num_microbatches=M, seq_length=C, micro_batch_size=1,
                        forward_only=False)

    data_iterator yields the iteration's `num_microbatches` microbatches,
    each a batch dict (the keys StepSlot.load_inputs takes: the reference
    framework's packing loader's) or a pair (batch dict, rung) with the rung
    the plan gives it (thdc.planner's assign_rungs; a dict alone runs the top
    rung). The host's rungs decide the shape: nothing is read back from the
    device. forward_step_func gets an iterator over the slots' views
    (IterationViews), which thdc.megatron's
    get_batch_on_this_rank_for_sequence_packing takes: it runs the next view
    and returns its 7-tuple (IterationGraphs.get_batch does the same).

    The step needs a slot per microbatch: GraphStep(..., slots=M) with M the
    planner's bound (thdc.megatron.slot_count). `shapes`: the shapes to
    capture, each an iteration's rungs (choose_shapes's result), else each
    shape met is captured until `max_graphs`. `last_rungs` are the rungs
    the last iteration ran, in load order (its shape's, or the larger
    shape's that held it). `stats` counts eager, captured, replayed and
    promoted iterations (those run at a larger shape, with the rows that
    added), the capture time and the shapes met."""

    def __init__(self, forward_backward_func, step: GraphStep, *, warmup: int = 1,
                 max_graphs: int = 32, shapes: Optional[Iterable[Sequence[int]]] = None,
                 pool=None, capture_stream=None):
        if not isinstance(step, GraphStep):
            raise TypeError(f"IterationGraphs takes a thdc.megatron.GraphStep; got "
                            f"{type(step).__name__}")
        for name, value, low in (("warmup", warmup, 1), ("max_graphs", max_graphs, 0)):
            if type(value) is not int or value < low:
                raise ValueError(f"IterationGraphs: {name} must be an int >= {low}; got "
                                 f"{value!r}")
        self.forward_backward_func = forward_backward_func
        self.step = step
        self.warmup = warmup
        self.max_graphs = max_graphs
        # The planned shapes, as rung indices in load order.
        self.planned: Optional[List[Tuple[int, ...]]] = None if shapes is None else [
            self._shape([self._rung_index(r) for r in rungs], False)[0][1]
            for rungs in shapes]
        self._pool, self._capture_stream = pool, capture_stream
        self._graphs: Dict[tuple, object] = {}
        self._results: Dict[tuple, object] = {}
        self._warm: Dict[Tuple[bool, int], int] = {}  # (forward_only, rung) -> eager runs
        self.last_order: List[int] = []
        self.last_rungs: List[int] = []
        self.last_kind: Optional[str] = None
        self.stats = {"eager": 0, "eager_over_budget": 0, "captured": 0, "replayed": 0,
                      "promoted": 0, "promoted_rows": 0, "capture_s": 0.0, "shapes": {}}

    # -------------------------------------------------------------- shapes

    def _rung_index(self, rung) -> int:
        if rung is None:
            return len(self.step.capacities) - 1
        return self.step.slot(0).rung(rung).index  # checks it, negative rungs included

    def order(self, rungs: Sequence[int]) -> List[int]:
        """The order the microbatches of these rungs are loaded in: largest
        rung first, ties in the given order."""
        return sorted(range(len(rungs)), key=lambda m: -rungs[m])

    def _shape(self, indices: Sequence[int], forward_only: bool) -> tuple:
        """(shape, order) of microbatches at these rung indices: the rungs in
        load order are the shape."""
        order = self.order(indices)
        return (bool(forward_only), tuple(indices[m] for m in order)), order

    def shape(self, rungs: Sequence[int], forward_only: bool = False) -> tuple:
        """The iteration shape of microbatches at these rungs: the key of its
        graph."""
        return self._shape([self._rung_index(r) for r in rungs], forward_only)[0]

    def captured(self, rungs: Sequence[int], forward_only: bool = False) -> bool:
        """Whether an iteration of microbatches at these rungs replays a graph
        (its own shape's or one that holds it)."""
        return self._target(self.shape(rungs, forward_only)) in self._graphs

    def _extra_rows(self, shape, larger) -> Optional[int]:
        """The rows `larger` adds to `shape` when it holds it, else None."""
        if shape[0] != larger[0]:  # training and forward-only never share a graph
            return None
        return _extra_rows(shape[1], larger[1], self.step.capacities)

    def _target(self, shape) -> tuple:
        """The shape an iteration of `shape` runs (the module's docstring
        says which): a captured one, a planned one, or its own."""
        if shape in self._graphs:
            return shape
        room = len(self._graphs) < self.max_graphs
        if self.planned is None:
            candidates = [] if room else list(self._graphs)
        else:
            candidates = list(self._graphs) + (
                [(shape[0], rungs) for rungs in self.planned] if room else [])
        best, fewest = None, None
        for candidate in candidates:
            extra = self._extra_rows(shape, candidate)
            if extra is not None and (fewest is None or extra < fewest):
                best, fewest = candidate, extra
        return shape if best is None else best

    def _ready(self, shape) -> bool:
        forward_only, rungs = shape
        return all(self._warm.get((forward_only, r), 0) >= self.warmup for r in rungs)

    # -------------------------------------------------------------- the call

    def __call__(self, **kwargs):
        missing = [k for k in _REQUIRED if k not in kwargs]
        if missing:
            raise TypeError(f"IterationGraphs: forward_backward_func's keyword arguments "
                            f"{', '.join(missing)} are missing")
        forward_only = bool(kwargs.get("forward_only", False))
        count = kwargs["num_microbatches"]
        items = list(kwargs["data_iterator"])
        if type(count) is not int or count != len(items):
            raise ValueError(f"IterationGraphs: num_microbatches is {count!r} but "
                             f"data_iterator gave {len(items)} microbatches")
        if count > len(self.step.slots):
            raise ValueError(f"IterationGraphs: {count} microbatches but the step has "
                             f"{len(self.step.slots)} slots: make it with slots >= the "
                             f"planner's bound on microbatches per iteration")
        batches, rungs = [], []
        for item in items:
            batch, rung = item if isinstance(item, tuple) else (item, None)
            if not isinstance(batch, dict):
                raise TypeError(f"IterationGraphs: a microbatch is a batch dict or (batch "
                                f"dict, rung); got {type(batch).__name__}")
            batches.append(batch)
            rungs.append(self._rung_index(rung))
        shape, order = self._shape(rungs, forward_only)
        target = self._target(shape)
        # The handoff: microbatch order[i] into slot i at the target's rung i,
        # queued, no wait.
        views = []
        for i, m in enumerate(order):
            slot = self.step.slot(i)
            slot.load_inputs(**packing_batch_inputs(batches[m]))
            views.append(slot.rung(target[1][i]))
        self.last_order = order
        self.last_rungs = list(target[1])

        def run():
            return self.forward_backward_func(**{**kwargs,
                                                 "data_iterator": IterationViews(views)})

        stats = self.stats
        stats["shapes"][shape] = stats["shapes"].get(shape, 0) + 1
        if target != shape:
            stats["promoted"] += 1
            stats["promoted_rows"] += self._extra_rows(shape, target)
        if target in self._graphs:
            self._graphs[target].replay()
            stats["replayed"] += 1
            self.last_kind = "replay"
            return self._results[target]
        room = len(self._graphs) < self.max_graphs
        if room and self._ready(target):
            start = time.perf_counter()
            graph, result = self._capture(run)
            self._graphs[target], self._results[target] = graph, result
            graph.replay()
            stats["capture_s"] += time.perf_counter() - start
            stats["captured"] += 1
            self.last_kind = "capture"
            return result
        if not room and self._ready(target):
            stats["eager_over_budget"] += 1
        stats["eager"] += 1
        self.last_kind = "eager"
        result = run()
        for r in set(target[1]):
            self._warm[forward_only, r] = self._warm.get((forward_only, r), 0) + 1
        return result

    @staticmethod
    def get_batch(data_iterator: IterationViews) -> tuple:
        """Runs the next microbatch's step (its slot at its rung) and returns
        the 7-tuple of get_batch_on_this_rank_for_sequence_packing, views of
        the slot's static outputs: what thdc's
        get_batch_on_this_rank_for_sequence_packing(data_iterator) returns
        for the iterator IterationGraphs hands the schedule, which a
        forward_step that calls it needs no change to use."""
        return data_iterator.run_next()

    # -------------------------------------------------------------- graphs

    def _shared(self):
        """The capture's pool and stream: the caller's, else a pool of its own
        (the module's docstring says why) and megatron-core's shared capture
        stream, else a new stream."""
        import torch

        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        if self._capture_stream is None:
            try:
                from megatron.core.full_cuda_graph import get_shared_capture_stream
                self._capture_stream = get_shared_capture_stream()
            except ImportError:
                self._capture_stream = torch.cuda.Stream()
        return self._pool, self._capture_stream

    def _capture(self, run) -> tuple:
        """Captures `run()` in a new CUDA graph as dev's wrapper does
        (full_cuda_graph.py:205-233): every RNG state megatron-core tracks
        registered with the graph, the caching allocator's spare blocks
        released first, the device idle before and after. Returns (graph,
        run's result: the graph's static outputs)."""
        import torch

        if self.step.on_host:
            raise RuntimeError("IterationGraphs: a step on the CPU cannot be captured")
        pool, stream = self._shared()
        override = getattr(torch.autograd.graph, "set_override_stale_capture_stream", None)
        if override is not None:
            override(True)
        gc.collect()
        torch.cuda.empty_cache()
        graph = torch.cuda.CUDAGraph()
        try:
            from megatron.core.tensor_parallel import random as megatron_random
        except ImportError:
            megatron_random = None
        # Only where megatron-core's tracker is set up (get_all_rng_states
        # asserts it is): a process may import megatron-core and not use it.
        if megatron_random is not None and \
                getattr(megatron_random, "_CUDA_RNG_STATE_TRACKER_INITIALIZED", True):
            for state in megatron_random.get_all_rng_states().values():
                graph.register_generator_state(state)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream, pool=pool,
                              capture_error_mode="thread_local"):
            result = run()
        torch.cuda.synchronize()
        return graph, result

    def reset(self) -> None:
        """Drops every graph (their memory returns to the pool)."""
        for graph in self._graphs.values():
            graph.reset()
        self._graphs.clear()
        self._results.clear()


def shapes_of(rung_lists: Iterable[Sequence[int]], step: GraphStep) -> Dict[tuple, int]:
    """How many iterations of each shape a stream of iterations gives (each
    item the rungs of one iteration's microbatches): the graphs
    IterationGraphs would capture, counted on the host before a run."""
    graphs = IterationGraphs(None, step)
    counts: Dict[tuple, int] = {}
    for rungs in rung_lists:
        shape = graphs.shape(rungs)
        counts[shape] = counts.get(shape, 0) + 1
    return counts
