#!/usr/bin/env python3
"""How fast does megatron-core's own GPTModel (TransformerEngine layers,
bf16) train on packed variable-length documents in each of six modes, side by
side in one process, from the same initial weights on the same global
batches:

  megatron-eager   dev's get_batch_on_this_rank_for_sequence_packing
                   (data_schedule.py:564) without graph padding, no graphs
  megatron-graphs  dev's function in graph mode (alignment 'max', C, N) and
                   dev's per-layer TE graphs (TECudaGraphHelper)
  thdc-graphs      thdc.megatron's function of the same name in its place,
                   the same per-layer graphs
  thdc-ladder      a capacity ladder: GraphStep(capacities=...), each rung's
                   layer graphs captured by TECudaGraphHelper, the plan
                   choosing the rung of each microbatch
  thdc-exact       GraphStep run eagerly, the model on exact_rows, no graphs
  thdc-full-iteration
                   megatron-core's schedule (every microbatch's forward and
                   backward) captured in one CUDA graph per iteration shape
                   (thdc.megatron.IterationGraphs), each microbatch loaded
                   into its own slot of a GraphStep with a ladder; the
                   optimizer step in megatron-core's optimizer graph

megatron_gpt.md says how to run it and what each figure is; the figures are
in results/megatron-gpt/RESULTS.md. examples/megatron is the short path:
one mode, in the shape of Megatron-LM's examples/run_simple_mcore_train_loop.py.
"""
import collections
import contextlib
import functools
import gc
import json
import math
import os
import statistics
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import megatron_gpt_batches as batches  # noqa: E402
import timing  # noqa: E402
import torch_trace  # noqa: E402


# ---------------------------------------------------------------- the loss

def loss_func(loss_mask, output_tensor):
    """pretrain_gpt.py:318-323: the masked sum of the per-token losses
    GPTModel returns ([1, T] under THD packing: one packed row), the
    microbatch's loss tokens, and the report [loss, tokens]. With
    calculate_per_token_loss the schedule keeps the sum and the gradients are
    divided by the global batch's tokens (megatron_gpt_model.py)."""
    import torch

    losses = output_tensor.view(-1).float()
    mask = loss_mask.view(-1).float()
    loss = torch.sum(losses * mask)
    num_tokens = mask.sum().to(torch.int)
    report = torch.stack([loss.detach(), mask.sum().detach()])
    return loss, num_tokens, {"lm loss": report}


# ---------------------------------------------------------------- runners

class Runner:
    """What a mode changes: the config (graphs or not), how a microbatch's
    batch is made from the loader's dict (`get_batch`, pretrain_gpt.py's
    get_batch on the packing path, :133-145), and what is captured before
    training (`capture`). A new mode is a subclass and an entry in RUNNERS."""

    graphs = False
    finalize = True  # pretrain_gpt.py:144 finalize_packed_seq_params(batch[5])
    optimizer_graph = False  # gpt.build_training's
    device = "cuda"  # where batches.make_microbatches puts the batches
    ladder = None  # the rungs the plan gives (the ladder modes)

    def __init__(self, ctx):
        self.ctx = ctx
        self.capture_s = None
        self.graph_count = 0

    def wrap(self, forward_backward):
        """The forward_backward_func the loop calls."""
        return forward_backward

    def items(self, microbatches):
        """What the loop's data_iterator yields: dev's and thdc's functions
        read the dict; the step runners the Microbatch (its host figures)."""
        mode = self.ctx.mode
        return [mb.batch if mode.batches in ("megatron", "thdc") else mb for mb in microbatches]

    def order(self, count):
        """The order the last iteration's loss reports come in."""
        return list(range(count))

    def strict(self, microbatches) -> bool:
        """Whether the iteration runs under set_sync_debug_mode("error")."""
        return False

    def rungs(self, microbatches):
        """The rung each microbatch of the last iteration ran (a ladder
        mode's): the plan's."""
        return [mb.rung for mb in microbatches]

    def kind(self):
        """What the last iteration did where that varies ("eager", "capture",
        "replay"), else None."""
        return None

    def optimizer_step(self, optimizer):
        optimizer.step()

    def config(self):
        from megatron_gpt_model import transformer_config
        return transformer_config(self.ctx.preset, self.ctx.args.C, self.ctx.args.N, self.graphs)

    def get_batch(self, data_iterator, config):
        raise NotImplementedError

    def capture(self, ddp, optimizer, config):
        pass

    def release(self):
        pass


class MegatronRunner(Runner):
    def get_batch(self, data_iterator, config):
        from megatron.core.datasets.data_schedule import get_batch_on_this_rank_for_sequence_packing
        return get_batch_on_this_rank_for_sequence_packing(
            data_iterator, vpp_size=None, mtp_on_this_rank=False, vp_stage=None,
            dynamic_cp=False, config=config)


class LayerGraphs:
    """dev's per-layer TE graphs as training.py makes them (:4244-4252: the
    helper after the model and optimizer; :4320-4328: create_cudagraphs() at
    iteration cuda_graph_warmup_steps, here 0, so before the first step:
    the capture zeroes the gradients, cuda_graphs.py _reset_after_capture,
    and changes no weight). With PP = 1 it captures one microbatch per layer
    (cuda_graphs.py:2376-2381). thd_sequence_length_upper_bound: training.py's
    _get_thd_sequence_length_upper_bound gives seq_length at cp = 1 (:5306)."""

    def capture(self, ddp, optimizer, config, pool=None):
        import torch
        from megatron.core.transformer import cuda_graphs

        helper = cuda_graphs.TECudaGraphHelper(
            model=[ddp], config=config, seq_length=config.max_seqlen_per_dp_cp_rank,
            micro_batch_size=1, optimizers=[optimizer],
            thd_sequence_length_upper_bound=config.max_seqlen_per_dp_cp_rank)
        original = cuda_graphs.make_graphed_callables
        if pool is not None:  # one memory pool for every rung (thdc-ladder)
            import inspect
            if "pool" not in inspect.signature(original).parameters:
                raise RuntimeError("thdc-ladder: this TransformerEngine's make_graphed_callables "
                                   "takes no pool=: the rungs' graphs cannot share memory")
            cuda_graphs.make_graphed_callables = functools.partial(original, pool=pool)
        try:
            helper.create_cudagraphs()
        finally:
            cuda_graphs.make_graphed_callables = original
        torch.cuda.synchronize()
        return helper


class MegatronGraphsRunner(MegatronRunner, LayerGraphs):
    graphs = True

    def capture(self, ddp, optimizer, config):
        with timing.host_window() as window:
            self.helper = LayerGraphs.capture(self, ddp, optimizer, config)
        self.capture_s = window.seconds
        self.graph_count = 2 * len(self.helper.flattened_callables)

    def release(self):
        if getattr(self, "helper", None) is not None and self.helper.graphs_created():
            self.helper.delete_cuda_graphs()


class ThdcGraphsRunner(MegatronGraphsRunner):
    """thdc.megatron's function in place of dev's: same arguments, same
    7-tuple (python/thdc/_sequence_packing.py). Its steps are kept in
    thdc.megatron.SEQUENCE_PACKING; configure() drops them per mode."""

    def __init__(self, ctx):
        super().__init__(ctx)
        import thdc.megatron
        thdc.megatron.SEQUENCE_PACKING.configure(**ctx.step_kwargs())

    def get_batch(self, data_iterator, config):
        import thdc.megatron
        return thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
            data_iterator, vpp_size=None, mtp_on_this_rank=False, vp_stage=None,
            dynamic_cp=False, config=config)


class _StepRunner(Runner):
    """A GraphStep of this mode's own (the drop-in returns the step at C
    only: SEQUENCE_PACKING.configure refuses capacities=)."""

    finalize = False  # thdc's PackedSeqParams: cp = 1, nothing to resolve

    def make_step(self, ladder=None, slots=1):
        import thdc.megatron
        C, N = self.ctx.args.C, self.ctx.args.N
        kwargs = self.ctx.step_kwargs(ladder)
        if ladder is not None:
            kwargs.update(capacities=list(ladder[0]), sequence_capacities=list(ladder[1]))
        return thdc.megatron.GraphStep(C, N, 1, 0, slots=slots, **kwargs)

    @staticmethod
    def _load(slot, microbatch):
        slot.load_inputs(**{k: v for k, v in microbatch.batch.items()})


class ThdcExactRunner(_StepRunner):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.step = self.make_step()

    def get_batch(self, data_iterator, config):
        mb = next(data_iterator)
        slot = self.step.slot(0)
        self._load(slot, mb)
        slot.run()
        batch, params = slot.exact_rows(mb.rows, mb.num_seqs, mb.max_seqlen)
        return (batch["tokens"], batch["labels"], batch["loss_mask"], None,
                batch["position_ids"], params, batch["padding_mask"])


class ThdcLadderRunner(_StepRunner, LayerGraphs):
    """One TECudaGraphHelper capture per rung, largest first, all in one
    memory pool: the config's max_seqlen_per_dp_cp_rank and
    thd_max_packed_sequences set to the rung's (B, N_r) while it captures
    (the layers' static inputs come from them, transformer_layer.py:1256-1278,
    module.py:302-307, and the captured PackedSeqParams' max_seqlen,
    transformer_layer.py:1367-1396); each rung's graphs kept
    (layer.cuda_graphs, cuda_graphs.py:2690-2705) and put back on the layers
    before the microbatches of that rung (GraphableMegatronModule replays
    layer.cuda_graphs, module.py:366-385). The helper holds one shape per
    capture (one static input set per layer and microbatch), hence one
    capture per rung. Every graph of a rung's microbatch replays before the
    next microbatch's, so the shared pool is safe in any rung order
    (docs/capacity-ladder.md, "Graphs")."""

    graphs = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.ladder = ctx.ladder
        self.step = self.make_step(self.ladder)
        self.rung_graphs = {}

    def capture(self, ddp, optimizer, config):
        import torch

        pool = torch.cuda.graph_pool_handle()
        layers = None
        C, N = config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences
        with timing.host_window() as window:
            try:
                for r in reversed(range(len(self.ladder[0]))):
                    config.max_seqlen_per_dp_cp_rank = int(self.ladder[0][r])
                    config.thd_max_packed_sequences = int(self.ladder[1][r])
                    helper = LayerGraphs.capture(self, ddp, optimizer, config, pool=pool)
                    layers = helper.flattened_callables
                    self.rung_graphs[r] = [layer.cuda_graphs for layer in layers]
                    for layer in layers:  # empty: the next capture must not replay
                        layer.cuda_graphs = []
            finally:
                config.max_seqlen_per_dp_cp_rank, config.thd_max_packed_sequences = C, N
        self.layers = layers
        self.capture_s = window.seconds
        self.graph_count = 2 * len(layers) * len(self.rung_graphs)

    def get_batch(self, data_iterator, config):
        mb = next(data_iterator)
        slot = self.step.slot(0)
        self._load(slot, mb)
        view = slot.rung(mb.rung)
        batch, params = view.run()
        for layer, graphs in zip(self.layers, self.rung_graphs[mb.rung]):
            layer.cuda_graphs = graphs
        return (batch["tokens"], batch["labels"], batch["loss_mask"], None,
                batch["position_ids"], params, batch["padding_mask"])

    def release(self):
        for r, per_layer in self.rung_graphs.items():
            for graphs in per_layer:
                for graph in graphs:
                    if hasattr(graph, "reset"):
                        graph.reset()
        for layer in getattr(self, "layers", None) or ():
            layer.cuda_graphs = []
        self.rung_graphs = {}


class ThdcFullIterationRunner(_StepRunner):
    """The whole forward and backward of an iteration in one CUDA graph per
    iteration shape (its microbatch count and rungs): megatron-core's
    schedule wrapped by thdc.megatron.IterationGraphs, a GraphStep with
    --iteration-rungs rungs and a slot per microbatch (the planner's bound),
    the batches in page-locked host memory, copied once into the slots
    before the replay. cuda_graph_impl "full_iteration" as dev's own
    full-iteration mode sets it. The shapes captured are those
    --iteration-shapes says (by default the planned ones, Context's), each
    iteration running the one that holds it at the fewest rows. Nothing is
    captured before training: an iteration runs eagerly until each rung of
    the shape it runs has run once, and that shape is captured when next
    met. The optimizer step is
    megatron-core's OptimizerCudaGraphWrapper (captured at its second call,
    as training.py:4160-4165 wires it, in megatron-core's shared pool, which
    IterationGraphs does not use: its docstring says why), unless
    --eager-optimizer."""

    graphs = "full_iteration"
    device = "pinned"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.ladder = ctx.iteration_ladder
        self.optimizer_graph = not ctx.args.eager_optimizer
        self.step = self.make_step(self.ladder, slots=ctx.max_microbatches)
        self.iteration = None
        self.optimizer_wrapper = None
        self.optimizer_capture_s = 0.0

    def capture(self, ddp, optimizer, config):
        if self.optimizer_graph:
            from megatron.core.optimizer.optimizer_cuda_graph import OptimizerCudaGraphWrapper
            self.optimizer_wrapper = OptimizerCudaGraphWrapper(
                optimizer.step, cuda_graph_warmup_steps=1, use_single_mempool=True)
            optimizer.step = self.optimizer_wrapper

    def wrap(self, forward_backward):
        import thdc.megatron
        self.iteration = thdc.megatron.IterationGraphs(
            forward_backward, self.step, warmup=1, max_graphs=self.ctx.args.max_graphs,
            shapes=self.ctx.iteration_shapes)
        return self.iteration

    def items(self, microbatches):
        return [(mb.batch, mb.rung) for mb in microbatches]

    def get_batch(self, data_iterator, config):
        import thdc.megatron
        return thdc.megatron.IterationGraphs.get_batch(data_iterator)

    def order(self, count):
        return list(self.iteration.last_order)

    def kind(self):
        return self.iteration.last_kind

    def rungs(self, microbatches):
        """The plan's rungs, or the larger shape's that held the iteration."""
        rungs = [None] * len(microbatches)
        for m, rung in zip(self.iteration.last_order, self.iteration.last_rungs):
            rungs[m] = rung
        return rungs

    def _optimizer_captured(self):
        return self.optimizer_wrapper is None or type(self.optimizer_wrapper).cuda_graph is not None

    def strict(self, microbatches):
        return self._optimizer_captured() and \
            self.iteration.captured([mb.rung for mb in microbatches])

    def optimizer_step(self, optimizer):
        before = self._optimizer_captured()
        with timing.host_window() as window:
            optimizer.step()
        if not before and self._optimizer_captured():
            self.optimizer_capture_s = window.seconds
        stats = self.iteration.stats
        self.capture_s = stats["capture_s"] + self.optimizer_capture_s
        self.graph_count = stats["captured"] + (self.optimizer_wrapper is not None
                                                and self._optimizer_captured())

    def release(self):
        if self.iteration is not None:
            self.iteration.reset()
        wrapper = type(self.optimizer_wrapper) if self.optimizer_wrapper is not None else None
        if wrapper is not None:  # megatron-core keeps its one optimizer graph on the class
            if wrapper.cuda_graph is not None:
                wrapper.cuda_graph.reset()
            wrapper.cuda_graph, wrapper.result, wrapper.curr_iteration = None, None, 0


RUNNERS = {
    "megatron-eager": MegatronRunner,
    "megatron-graphs": MegatronGraphsRunner,
    "thdc-graphs": ThdcGraphsRunner,
    "thdc-ladder": ThdcLadderRunner,
    "thdc-exact": ThdcExactRunner,
    "thdc-full-iteration": ThdcFullIterationRunner,
}


# ---------------------------------------------------------------- measuring


@contextlib.contextmanager
def profile_iteration(enabled, args, mode):
    """torch.profiler over one iteration (the last), written to
    --profile-dir as MODE.json: device time by kernel family, the device's
    busy time against the iteration's wall time (the gaps: where the GPU
    waits for the host), the kernel count, and the top kernels."""
    if not enabled:
        yield None
        return
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with timing.host_window() as window:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            yield prof
            torch.cuda.synchronize()
    wall_us = window.micros
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    families, names = {}, {}
    intervals = []
    for e in kernels:
        family = torch_trace.kind_of(e.name)
        families[family] = families.get(family, 0.0) + e.device_time
        names[e.name] = names.get(e.name, 0.0) + e.device_time
        intervals.append((e.time_range.start, e.time_range.end, e.name))
    busy, span, gaps = torch_trace.device_timeline(intervals)
    # the host's side: where its time went, by CPU self time (CUDA runtime
    # calls among them: a launch that blocks, a cudaFree, a synchronize)
    host_us = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            host_us[e.name] = host_us.get(e.name, 0.0) + e.self_cpu_time_total
    report = {"mode": mode, "wall_us": wall_us, "device_busy_us": busy,
              "device_span_us": span, "kernels": len(kernels),
              "by_family_us": dict(sorted(families.items(), key=lambda kv: -kv[1])),
              "top_kernels_us": dict(sorted(names.items(), key=lambda kv: -kv[1])[:15]),
              # the longest waits between kernels: (us, kernel before, kernel after)
              "longest_gaps_us": sorted(gaps, reverse=True)[:10],
              "host_self_us": dict(sorted(host_us.items(), key=lambda kv: -kv[1])[:15])}
    os.makedirs(args.profile_dir, exist_ok=True)
    with open(os.path.join(args.profile_dir, f"{mode}.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"{mode} profile: wall {wall_us / 1e3:.1f} ms, device busy {busy / 1e3:.1f} ms "
          f"of a {span / 1e3:.1f} ms span, {len(kernels)} kernels; " + ", ".join(
              f"{k} {v / 1e3:.1f} ms" for k, v in report["by_family_us"].items()), flush=True)
    print(f"{mode} profile: longest gaps " + "; ".join(
        f"{g / 1e3:.2f} ms before {after[:40]}" for g, _, after in report["longest_gaps_us"][:5]),
        flush=True)
    print(f"{mode} profile: host self time " + ", ".join(
        f"{k[:40]} {v / 1e3:.1f} ms" for k, v in list(report["host_self_us"].items())[:6]),
        flush=True)

@contextlib.contextmanager
def sync_debug(mode):
    """torch.cuda.set_sync_debug_mode(mode) inside, "default" after; None:
    nothing."""
    import torch

    if mode is None:
        yield
        return
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@contextlib.contextmanager
def count_syncs(enabled):
    """Synchronising CUDA calls PyTorch reports under
    set_sync_debug_mode("warn"), as bench/get_batch.py counts them; yields a
    two-item list that holds the count and where each came from (the Python
    line that made the call, and the warning's first line) afterwards
    (None, [] when disabled)."""
    result = [None, []]
    if not enabled:
        yield result
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with sync_debug("warn"):
            yield result
    found = [w for w in caught if "synchroniz" in str(w.message)]
    result[0] = len(found)
    result[1] = [f"{w.filename}:{w.lineno}: {str(w.message).splitlines()[0][:160]}"
                 for w in found]


class Context:
    def __init__(self, args, preset, ladder, iteration_ladder=None, max_microbatches=1,
                 iteration_shapes=None):
        self.args, self.preset, self.ladder = args, preset, ladder
        self.iteration_ladder, self.iteration_shapes = iteration_ladder, iteration_shapes
        self.max_microbatches = max_microbatches
        self.mode = None  # the mode being trained

    def step_kwargs(self, ladder=None):
        """GraphStep options common to the thdc modes: "compact", what dev's
        function gives (pad_between_seqs=True, data_schedule.py:838-850), so
        every mode runs the same attention backend; bundles where thdc has no
        JIT."""
        import thdc
        import thdc.stages

        kwargs = {"convention": "compact"}
        bundle_dir = self.args.bundle_dir
        if bundle_dir is None:
            if not thdc.has_jit:
                raise SystemExit("this build of thdc has no JIT: pass --bundle-dir "
                                 "(--print-bundles lists the shapes)")
            return kwargs
        shapes = list(zip(*ladder)) if ladder is not None else [(self.args.C, self.args.N)]
        paths = [os.path.join(bundle_dir, thdc.stages.bundle_name(B, 1, n)) for B, n in shapes]
        kwargs["bundle"] = paths if ladder is not None else paths[0]
        return kwargs


def train_mode(name, ctx, state):
    import torch
    from megatron.core.pipeline_parallel import get_forward_backward_func

    import megatron_gpt_model as mmodel

    args, preset = ctx.args, ctx.preset
    mode = batches.MODES[name]
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    retries = torch.cuda.memory_stats().get("num_alloc_retries", 0)
    ctx.mode = mode
    with timing.host_window() as setup:
        runner = RUNNERS[name](ctx)
        config = runner.config()
        ddp, optimizer = mmodel.build_training(config, preset, args.C, state, args.seed,
                                               optimizer_graph=runner.optimizer_graph)
        runner.capture(ddp, optimizer, config)
        torch.cuda.synchronize()

    def forward_step(data_iterator, model):
        out = runner.get_batch(data_iterator, config)
        tokens, labels, loss_mask, attention_mask, position_ids, params, padding_mask = out
        if runner.finalize:
            from megatron.core.context_parallel_layout import finalize_packed_seq_params
            finalize_packed_seq_params(params)
        output = model(tokens, position_ids, attention_mask, labels=labels, loss_mask=loss_mask,
                       packed_seq_params=params, padding_mask=padding_mask)
        return output, functools.partial(loss_func, loss_mask)

    def iterator(microbatches):
        yield from runner.items(microbatches)

    forward_backward = runner.wrap(get_forward_backward_func())

    def train_iteration(microbatches):
        ddp.zero_grad_buffer()
        optimizer.zero_grad()
        losses = forward_backward(forward_step_func=forward_step,
                                  data_iterator=iterator(microbatches), model=[ddp],
                                  num_microbatches=len(microbatches), seq_length=args.C,
                                  micro_batch_size=1, forward_only=False)
        runner.optimizer_step(optimizer)
        return losses

    ladder = runner.ladder  # the plan's rungs are this mode's
    align = batches.doc_alignment(1)
    reports = []  # per step, [M, 2] on the device
    times, host, cpu, syncs, expected, padded_rows, kinds = [], [], [], [], [], [], []
    sync_sites = collections.Counter()  # where the counted syncs came from
    loader = []  # the host's time to plan and pin each global batch
    strict, strict_iterations = None, 0

    def prepare(it):
        """Global batch `it`, planned and packed into page-locked host memory:
        the loader's work, done for the next iteration while the device runs
        this one (as torch's DataLoader with pin_memory does), in every mode."""
        with timing.host_window() as window:
            gb, plan = batches.global_batch(args, preset, it, ladder if ladder else ctx.ladder)
            result = batches.make_microbatches(gb, plan, align, device="pinned")
        loader.append(window.seconds)
        return result

    ddp.train()
    pending = prepare(0)
    for it in range(args.steps):
        torch.cuda.synchronize()
        counting = 0 < it < max(args.warmup, 2)
        profiling = args.profile_dir is not None and it == args.steps - 1
        # wall: the whole iteration, until the device is done; issue: until
        # the host has queued it (its CPU time beside), the loader's work after
        with timing.host_window() as wall, timing.host_window() as issue:
            with count_syncs(counting) as counted, profile_iteration(profiling, args, name):
                microbatches = batches.send(pending, runner.device)
                # Graph modes that replay the whole iteration: every replayed
                # iteration under "error" (nothing may wait for the device).
                checked = not isinstance(strict, str) and not counting and \
                    runner.strict(microbatches)
                try:
                    with sync_debug("error" if checked else None):
                        losses = train_iteration(microbatches)
                except RuntimeError as error:
                    if not checked:
                        raise
                    # Recorded; the iteration is done again without the check
                    # (the gradients zeroed first: nothing is trained twice
                    # unless the optimizer had stepped, which the error names).
                    strict = str(error).splitlines()[0][:300]
                    print(f"{name}: iteration {it} synchronised: {strict}", file=sys.stderr)
                    losses = train_iteration(microbatches)
                reports.append(torch.stack([r["lm loss"] for r in losses]))
                strict_iterations += checked
            issue.stop()
            if it + 1 < args.steps:
                pending = prepare(it + 1)
            torch.cuda.synchronize()
        kinds.append(runner.kind())
        if not profiling:  # the profiled iteration is not timed
            times.append(wall.seconds)
            host.append(issue.seconds)
            cpu.append(issue.cpu_seconds)
        if counted[0] is not None:
            syncs.append(counted[0])
            sync_sites.update(counted[1])
        order = runner.order(len(microbatches))
        expected.append([microbatches[m].real_tokens for m in order])
        rows = [mb.rows if mode.padded == "T" else
                args.C if mode.padded == "C" else ladder[0][rung]
                for mb, rung in zip(microbatches, runner.rungs(microbatches))]
        padded_rows.append(sum(rows) - sum(mb.real_tokens for mb in microbatches))
    if mode.graphs == "iteration":
        # every replayed iteration ran under "error": True, or the first error
        strict = strict if isinstance(strict, str) else strict_iterations > 0
    elif mode.thdc:  # one more global batch under "error"
        strict = check_sync_free(ctx, forward_backward, forward_step, iterator, ddp, optimizer,
                                 ladder)
    torch.cuda.synchronize()
    counts = [r[:, 1].round().long().tolist() for r in reports]
    once = all(c == e for c, e in zip(counts, expected))
    step_losses = [float(r[:, 0].sum() / r[:, 1].sum()) for r in reports]
    # Timed: the steps after --warmup; for a mode that captures during
    # training (thdc-full-iteration), its replays only, the iterations that
    # captured or ran eagerly counted apart ("ms_per_iter_all" has them).
    steady = [i for i in range(args.warmup, len(times)) if kinds[i] in (None, "replay")]
    steady = steady or list(range(len(times)))
    timed = [times[i] for i in steady]
    tokens = [sum(e) for e in expected]
    ms = 1e3 * statistics.median(timed)
    figures = {
        "ms_per_iter": ms,
        "ms_per_iter_all": 1e3 * statistics.mean(times[args.warmup:] or times),
        "timed_iterations": len(timed),
        "iteration_kinds": kinds,
        # the host's time to issue an iteration (until the closing
        # synchronize) and the process's CPU time over it, medians
        "host_ms_per_iter": 1e3 * statistics.median(host[i] for i in steady),
        "cpu_ms_per_iter": 1e3 * statistics.median(cpu[i] for i in steady),
        # planning and pinning the next global batch, overlapped with the
        # device's work on this one: the same in every mode
        "loader_ms_per_iter": 1e3 * statistics.median(loader),
        "max_reserved_bytes": torch.cuda.max_memory_reserved(),
        # the caching allocator freeing its cache to retry an allocation
        # (cudaFree: the device synchronised), over the whole mode
        "alloc_retries": torch.cuda.memory_stats().get("num_alloc_retries", 0) - retries,
        "tokens_per_s": statistics.mean(tokens[i] for i in steady) / (ms / 1e3),
        "syncs_per_iter": statistics.mean(syncs) if syncs else None,
        "sync_sites": dict(sync_sites.most_common(10)),
        "sync_free_under_error": strict,
        "max_memory_bytes": torch.cuda.max_memory_allocated(),
        "padded_rows_per_iter": statistics.mean(padded_rows),
        "microbatches_per_iter": statistics.mean(len(e) for e in expected),
        "losses": step_losses,
        "first_losses": step_losses[:6],
        "capture_s": runner.capture_s,
        "setup_s": setup.seconds,
        "graphs": runner.graph_count,
        "tokens_trained_once": once,
        "strict_iterations": strict_iterations,
        "iteration_graphs": None if mode.graphs != "iteration" else {
            k: (v if k != "shapes" else len(v)) for k, v in runner.iteration.stats.items()},
        "ladder": None if ladder is None else {"capacities": list(ladder[0]),
                                               "sequence_capacities": list(ladder[1])},
    }
    if not once:
        print(f"{name}: the loss-mask tokens differ from the stream's", file=sys.stderr)
    if not all(math.isfinite(v) for v in step_losses):
        print(f"{name}: the loss is not finite", file=sys.stderr)
    runner.release()
    del ddp, optimizer, runner
    return figures


def check_sync_free(ctx, forward_backward, forward_step, iterator, ddp, optimizer, ladder):
    """One more global batch (the one after the run's last) with
    set_sync_debug_mode("error"): True if nothing synchronised, else the
    error's text. The optimizer step is left out: it is not the data path."""
    import torch

    gb, plan = batches.global_batch(ctx.args, ctx.preset, ctx.args.steps, ctx.ladder)
    microbatches = batches.make_microbatches(gb, plan, 1, device="cuda")
    torch.cuda.synchronize()
    try:
        with sync_debug("error"):
            forward_backward(forward_step_func=forward_step,
                             data_iterator=iterator(microbatches), model=[ddp],
                             num_microbatches=len(microbatches), seq_length=ctx.args.C,
                             micro_batch_size=1, forward_only=False)
        result = True
    except RuntimeError as error:
        result = str(error).splitlines()[0][:300]
    finally:
        torch.cuda.synchronize()
        ddp.zero_grad_buffer()
        optimizer.zero_grad()
    return result


def table(results):
    head = (f"{'mode':<20} {'ms/iter':>9} {'host ms':>8} {'tokens/s':>11} {'syncs':>6} {'GiB':>6} "
            f"{'pad rows':>9} {'capture s':>9} {'once':>5} {'dloss6':>8}  first losses")
    lines = [head, "-" * len(head)]
    for name, f in results.items():
        lines.append(
            f"{name:<20} {f['ms_per_iter']:>9.1f} "
            f"{'-' if f.get('host_ms_per_iter') is None else format(f['host_ms_per_iter'], '.1f'):>8} "
            f"{f['tokens_per_s']:>11,.0f} "
            f"{'-' if f['syncs_per_iter'] is None else format(f['syncs_per_iter'], '.1f'):>6} "
            f"{f['max_memory_bytes'] / 2**30:>6.2f} {f['padded_rows_per_iter']:>9.0f} "
            f"{'-' if f['capture_s'] is None else format(f['capture_s'], '.1f'):>9} "
            f"{str(f['tokens_trained_once']):>5} "
            f"{'-' if f.get('loss_delta_vs_eager') is None else format(f['loss_delta_vs_eager'], '.1e'):>8}  "
            + " ".join(f"{v:.4f}" for v in f["first_losses"]))
    return "\n".join(lines)


def main(argv=None):
    args = batches.parse_args(argv)
    preset = batches.PRESETS[args.preset]
    ladder = None
    if "thdc-ladder" in args.modes or args.print_bundles:
        capacities, sequences, advice = batches.advise_ladder(args, preset, args.ladder)
        ladder = (capacities, sequences)
        print(f"ladder: {list(capacities)}, N {list(sequences)}; expected padding "
              f"{100 * advice.padded_fraction:.1f}% (C alone "
              f"{100 * advice.single_padded_fraction:.1f}%)", flush=True)
    iteration_ladder = shapes = None
    if "thdc-full-iteration" in args.modes or args.print_bundles:
        iteration_ladder = batches.iteration_ladder(args, preset)
        print(f"thdc-full-iteration's ladder: {list(iteration_ladder[0])}, "
              f"N {list(iteration_ladder[1])}", flush=True)
    if "thdc-full-iteration" in args.modes and not args.print_bundles:
        shapes = batches.iteration_shapes(args, preset, iteration_ladder)
        if shapes is not None:
            print(f"thdc-full-iteration's shapes: {len(shapes)} planned, "
                  f"{[list(s) for s in shapes]}", flush=True)
    if args.print_bundles:
        shapes = sorted({(args.C, args.N)} | set(zip(*ladder)) | set(zip(*iteration_ladder)))
        for B, n in shapes:
            print(f"{B},1,{n}")
        return None

    import torch
    import megatron_gpt_model as mmodel

    if not torch.cuda.is_available():
        raise SystemExit("this example needs a GPU (and TransformerEngine)")
    mmodel.initialize_distributed(args.seed)
    mmodel.init_microbatch_calculator(batches.max_microbatches(args, preset))
    ctx = Context(args, preset, ladder, iteration_ladder, batches.max_microbatches(args, preset),
                  shapes)
    state = mmodel.initial_state(mmodel.transformer_config(preset, args.C, args.N, False),
                                 preset, args.C, args.seed)
    output = {"preset": args.preset, "C": args.C, "N": args.N, "steps": args.steps,
              "warmup": args.warmup, "seed": args.seed,
              "parameters": batches.parameter_count(preset), "torch": torch.__version__,
              "device": torch.cuda.get_device_name(), "modes": {}}
    print(f"{args.preset}: {output['parameters'] / 1e6:.0f}M parameters, C={args.C}, "
          f"N={args.N}, {preset.documents} documents per global batch", flush=True)
    runs = [(name, name) for name in args.modes]
    if args.repeat_eager:
        runs.append(("megatron-eager-rerun", "megatron-eager"))
    for label, name in runs:
        figures = train_mode(name, ctx, state)
        output["modes"][label] = figures
        eager = output["modes"].get("megatron-eager")
        if eager is not None:
            figures["loss_delta_vs_eager"] = max(
                abs(a - b) for a, b in zip(figures["first_losses"], eager["first_losses"]))
        # Against the per-layer-graph modes run before it: the first 6
        # losses and every one.
        figures["loss_delta_vs"] = {
            other: {"first6": max(abs(a - b) for a, b in zip(figures["first_losses"],
                                                             o["first_losses"])),
                    "all": max(abs(a - b) for a, b in zip(figures["losses"], o["losses"]))}
            for other, o in output["modes"].items() if other != label}
        print(f"{label}: {figures['ms_per_iter']:.1f} ms/iter, "
              f"{figures['tokens_per_s']:,.0f} tokens/s, syncs/iter "
              f"{figures['syncs_per_iter']}, first losses {figures['first_losses']}", flush=True)
        for site, n in figures["sync_sites"].items():
            print(f"{label}: synchronised {n}x at {site}", flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump(output, out, indent=1)
    print(table(output["modes"]))
    return output


if __name__ == "__main__":
    main()
