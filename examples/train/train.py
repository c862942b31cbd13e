#!/usr/bin/env python3
"""Trains a small GPT on packed variable-length documents six ways, side by
side in one process, and measures what thdc saves.

  eager        the reference framework's eager THD preparation (bench/eager.py:
               torch.cat packing, the padding mask, sizes read back with
               .item()) and the model in eager mode on the T rows of each
               microbatch
  thdc-eager   thdc.megatron.GraphStep (one slot, run eagerly) and the model in
               eager mode on the static C rows
  thdc-graphs  the step, the forward and the backward of a whole microbatch
               captured in one CUDA graph per slot of the step's ring,
               replayed after each microbatch is loaded into its slot
  thdc-layer-graphs
               the step run eagerly, each transformer block's forward and
               backward a CUDA graph (torch.cuda.make_graphed_callables, as
               the reference framework's per-layer graphs); the embedding,
               the final norm, the output layer and the loss eager
  thdc-ladder  a capacity ladder (docs/capacity-ladder.md): each microbatch
               padded to the smallest of k captured capacities that holds it
               (the rung the plan gives it), the step, forward and backward
               of each rung one CUDA graph, the graphs sharing one memory
               pool; the ladder from thdc.planner.advise over the stream's
               first global batches (--ladder K fixes k)
  thdc-exact   the step run eagerly, the model in eager mode on exactly the
               microbatch's T rows (GraphStep's exact_rows: views of its own
               rows, its n+1 offsets and its longest document, all known on
               the host from the plan): eager's work without its
               synchronisations

Every mode trains the same model from the same initialisation on the same
global batches (documents, plan and order), so their losses agree up to
rounding. Per mode: the loss of every step, time per iteration, tokens/s
(real tokens only), peak memory and host synchronisations per iteration.

  python3 examples/train/train.py --preset small --steps 300 --json small.json
  python3 examples/train/report.py small.json > examples/train/RESULTS.md
"""
import argparse
import contextlib
import functools
import gc
import importlib.util
import json
import math
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import model as gpt  # noqa: E402
import preparation  # noqa: E402

MODES = ("eager", "thdc-eager", "thdc-graphs", "thdc-layer-graphs", "thdc-ladder",
         "thdc-exact")
GRAPH_MODES = ("thdc-graphs", "thdc-layer-graphs", "thdc-ladder")  # CUDA only


class Trainer:
    """Runs the forward and backward of every microbatch of a global batch;
    gradients accumulate in the parameters' .grad, the loss in `loss_sum`
    (both on the device). `scale` is one over the global batch's loss
    tokens, so the microbatches add up to its per-token mean."""

    def __init__(self, model, autocast, device):
        self.model, self.autocast = model, autocast
        self.loss_sum = torch.zeros(1, device=device)
        self.scale = torch.zeros(1, device=device)

    def backward(self, tokens, rope_rows, labels, loss_mask, cu_seqlens, max_seqlen):
        with self.autocast():
            loss = self.model.loss(tokens, rope_rows, labels, loss_mask, cu_seqlens,
                                   max_seqlen, self.scale)
        loss.backward()
        self.loss_sum.add_(loss.detach())


class EagerTrainer(Trainer):
    """The reference framework's preparation, the model on T rows."""

    def __init__(self, model, autocast, device):
        super().__init__(model, autocast, device)
        self.eager = preparation.load_eager_module()

    def run(self, batch, plan, pools):
        for m in range(plan.num_microbatches):
            self.backward(*preparation.eager_microbatch(self.eager, pools, batch, plan, m))


class StepTrainer(Trainer):
    """thdc's step, run eagerly, the model on the static C rows."""

    def __init__(self, model, autocast, device, step):
        super().__init__(model, autocast, device)
        self.step = step

    def microbatch(self, slot):
        batch, params = slot.run()
        self.backward(batch["tokens"][0], slot.rope_rows, batch["labels"][0],
                      batch["loss_mask"][0], params.cu_seqlens_q, params.max_seqlen_q)

    def run(self, batch, plan, pools):
        slot = self.step.slot(0)
        for m in range(plan.num_microbatches):
            preparation.load_microbatch(slot, pools, plan, m)
            self.microbatch(slot)


class GraphTrainer(StepTrainer):
    """thdc's step, forward and backward of a microbatch in one CUDA graph per
    slot of the step's ring. Graph k reads slot k's static buffers; the
    graphs share one memory pool, as they replay one after another."""

    def __init__(self, model, autocast, device, step, slots):
        super().__init__(model, autocast, device, step)
        # PyTorch captures after a few eager iterations on a side stream (lazy
        # initialisation: cuBLAS workspaces, autograd's buffers). Slot 0 holds
        # the empty microbatch GraphStep starts with: its loss mask is zero,
        # so the warm-up adds nothing to the gradients or the loss.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self.microbatch(step.slot(0))
        torch.cuda.current_stream(device).wait_stream(side)
        self.graphs, pool = [], None
        for k in range(slots):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.microbatch(step.slot(k))
            pool = graph.pool()
            self.graphs.append(graph)
        self.loss_sum.zero_()

    def run(self, batch, plan, pools):
        for m in range(plan.num_microbatches):
            preparation.load_microbatch(self.step.slot(m), pools, plan, m)
            self.graphs[m % len(self.graphs)].replay()


class LadderTrainer(StepTrainer):
    """thdc's step on a capacity ladder: one CUDA graph per rung (step,
    forward and backward of a microbatch padded to that rung's B rows),
    each replayed for the microbatches the plan puts at its rung. One slot:
    the microbatches replay one after another on one stream, so each is
    loaded after the last graph has read the slot (slots are for
    microbatches in flight, under pipeline parallelism).

    The graphs share one memory pool, captured from the largest rung down:
    every tensor a graph allocates is freed before its capture ends (the
    loss goes into loss_sum, the gradients into the static .grad), so each
    capture reuses the blocks the one before left, the pool is as large as
    the largest rung needs, and any replay order is safe."""

    def __init__(self, model, autocast, device, step):
        super().__init__(model, autocast, device, step)
        slot = step.slot(0)
        start = time.perf_counter()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # the empty microbatch: no loss, no gradient
            for r in reversed(range(len(slot.rungs))):
                for _ in range(2 if r else 3):
                    self.microbatch(slot.rung(r))
        torch.cuda.current_stream(device).wait_stream(side)
        self.graphs, pool = [None] * len(slot.rungs), None
        for r in reversed(range(len(slot.rungs))):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.microbatch(slot.rung(r))
            pool = graph.pool()
            self.graphs[r] = graph
        synchronize(device)
        self.capture_s = time.perf_counter() - start
        self.loss_sum.zero_()

    def run(self, batch, plan, pools):
        slot = self.step.slot(0)
        for m in range(plan.num_microbatches):
            preparation.load_microbatch(slot, pools, plan, m)
            self.graphs[plan.rungs[m]].replay()


class ExactTrainer(StepTrainer):
    """thdc's step run eagerly (no synchronisation), the model eagerly on the
    microbatch's own T rows: exact_rows gives views of them, offsets of its
    n+1 documents and its longest document as max_seqlen, from the plan."""

    def run(self, batch, plan, pools):
        slot = self.step.slot(0)
        for m in range(plan.num_microbatches):
            preparation.load_microbatch(slot, pools, plan, m)
            slot.run()
            rows = plan.num_rows(m)
            exact, params = slot.exact_rows(rows, int(plan.num_seqs[m]),
                                            int(plan.max_lengths[m]))
            self.backward(exact["tokens"][0], slot.rope_rows[:rows], exact["labels"][0],
                          exact["loss_mask"][0], params.cu_seqlens_q, params.max_seqlen_q)


class BlockCall(torch.nn.Module):
    """One transformer block as make_graphed_callables takes it: tensors only
    (max_seqlen, a Python int, is the constant C), and the block a submodule,
    so that its parameters are part of the graph's inputs and get gradients.
    The forward enters autocast itself: make_graphed_callables is called
    outside autocast, so the forward is captured in bf16 while the backward
    is captured without autocast, as loss.backward() runs in every other mode
    (pytorch/pytorch#120930: a capture under autocast would run the backward
    under it too)."""

    def __init__(self, block, max_seqlen, autocast):
        super().__init__()
        self.block, self.max_seqlen, self.autocast = block, max_seqlen, autocast

    def forward(self, x, cos, sin, cu_seqlens):
        with self.autocast():
            return self.block(x, cos, sin, cu_seqlens, self.max_seqlen)


class LayerGraphTrainer(StepTrainer):
    """thdc's step run eagerly (one slot; run() launches without a host
    synchronisation); each block's forward and backward a CUDA graph made by
    torch.cuda.make_graphed_callables, the reference framework's per-layer
    capture; the embedding, the final norm, the output layer and the loss
    eager, computed as GPT.loss computes them.

    Every tensor a block's graphs read is one of its sample arguments: the
    hidden states [C, dim] (requires_grad, as the embedding's output and
    every block's output are), and the metadata, which are static: the
    slot's cu_seqlens (the step's output buffer), and cos and sin of every
    row, gathered each microbatch into two static buffers from the step's
    rope_rows. The graphed callables copy an argument into their static
    input only where its address differs: the hidden states (a copy of
    [C, dim] per block), never the metadata. max_seqlen is the constant C."""

    def __init__(self, model, autocast, device, step):
        super().__init__(model, autocast, device, step)
        slot = step.slot(0)
        C = step.C
        # The slot holds the empty microbatch GraphStep starts with (a valid
        # cu_seqlens and rope_rows): the metadata of the warm-up and capture.
        batch, params = slot.run()
        self.cu_seqlens = params.cu_seqlens_q
        half = model.rope_cos.shape[1]
        self.cos = torch.empty(C, half, dtype=model.rope_cos.dtype, device=device)
        self.sin = torch.empty(C, half, dtype=model.rope_sin.dtype, device=device)
        self.gather_rope(slot)
        with torch.no_grad(), autocast():  # the hidden states' dtype (float32)
            dtype = model.embedding(batch["tokens"][0][:1]).dtype
        callables = tuple(BlockCall(block, C, autocast) for block in model.blocks)
        hidden = [torch.zeros(C, model.config.dim, dtype=dtype, device=device,
                              requires_grad=True) for _ in callables]
        sample_args = tuple((x, self.cos, self.sin, self.cu_seqlens) for x in hidden)
        # One call, so all 2L graphs share one memory pool: they are captured
        # in the order they replay (forward 1..L, backward L..1). Its warm-up
        # (3 iterations per block on a side stream, on the sample arguments)
        # computes gradients with torch.autograd.grad, which returns them
        # without adding them to .grad, and steps no optimizer: the weights
        # and .grad are unchanged; .grad is zeroed below all the same.
        try:
            self.blocks = torch.cuda.make_graphed_callables(callables, sample_args)
            synchronize(device)
        except Exception as error:
            raise RuntimeError(f"thdc-layer-graphs: capturing the {len(callables)} "
                               f"transformer blocks with torch.cuda.make_graphed_callables "
                               f"failed: {type(error).__name__}: {error}") from error
        self.check_capture(C, dtype)
        for parameter in model.parameters():
            parameter.grad.zero_()
        self.loss_sum.zero_()

    def gather_rope(self, slot):
        """cos and sin of every row into the static buffers: the rows
        GPT.loss reads (rope_cos[rope_rows]), gathered in place."""
        torch.index_select(self.model.rope_cos, 0, slot.rope_rows, out=self.cos)
        torch.index_select(self.model.rope_sin, 0, slot.rope_rows, out=self.sin)

    def check_capture(self, C, dtype):
        """The graphed blocks (make_graphed_callables replaced their modules'
        forward) against the same blocks run eagerly, on hidden states at
        another address than the sample's: the output and the gradient of the
        hidden states must agree (bf16 rounding and FlashAttention's atomics
        aside), else the capture is wrong. torch.autograd.grad adds nothing
        to .grad."""
        generator = torch.Generator(device=self.cos.device).manual_seed(1)
        x = torch.randn(C, self.model.config.dim, generator=generator, dtype=dtype,
                        device=self.cos.device, requires_grad=True)
        weight = torch.randn(x.shape, generator=generator, dtype=dtype, device=x.device)
        results = []
        for graphed in (True, False):
            with self.autocast():
                y = x
                for call in self.blocks:
                    y = (call(y, self.cos, self.sin, self.cu_seqlens) if graphed else
                         call.block(y, self.cos, self.sin, self.cu_seqlens, C))
            (grad,) = torch.autograd.grad((y * weight).sum(), (x,))
            # The graphed ones are views of the graphs' static buffers: copied.
            results.append((y.detach().clone(), grad.clone()))
        for name, got, want, tolerance in (("output", results[0][0], results[1][0], 2e-2),
                                           ("gradient", results[0][1], results[1][1], 1e-1)):
            difference = (got - want).abs().max().item()
            scale = want.abs().max().item()
            if not (math.isfinite(difference) and difference <= tolerance * scale):
                raise RuntimeError(f"thdc-layer-graphs: the graphed blocks' {name} differs "
                                   f"from the eager blocks' by {difference:.3g} (largest "
                                   f"value {scale:.3g}): the capture is wrong")

    def microbatch(self, slot):
        batch, params = slot.run()
        self.gather_rope(slot)
        with self.autocast():
            x = self.model.embedding(batch["tokens"][0])
            for block in self.blocks:
                x = block(x, self.cos, self.sin, params.cu_seqlens_q)
            loss = self.model.output_loss(x, batch["labels"][0], batch["loss_mask"][0],
                                          self.scale)
        loss.backward()
        self.loss_sum.add_(loss.detach())


@contextlib.contextmanager
def count_syncs(device, enabled):
    """Counts the synchronising CUDA operations PyTorch reports inside the
    block (torch.cuda.set_sync_debug_mode("warn")); yields a list that holds
    the count afterwards (None on the CPU or when not enabled)."""
    result = [None]
    if not enabled or device.type != "cuda":
        yield result
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield result
        finally:
            torch.cuda.set_sync_debug_mode("default")
    result[0] = sum("synchroniz" in str(w.message) for w in caught)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(mode, args, preset, device):
    """One mode's run; its figures as a dict."""
    setup_start = time.perf_counter()
    torch.manual_seed(args.seed)
    model = gpt.GPT(preset.model).to(device)  # initialised on the CPU: equal in every mode
    fused = {"fused": True} if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(gpt.parameter_groups(model), lr=preset.lr,
                                  betas=(0.9, 0.95), **fused)
    for parameter in model.parameters():  # static gradients, zeroed in place every step
        parameter.grad = torch.zeros_like(parameter)
    if args.precision == "bf16":
        autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)
    else:
        autocast = contextlib.nullcontext

    C, N, R = preset.C, preset.N, preset.model.rope_rows
    slots = 1
    ladder = getattr(args, "ladder_rungs", None)  # (capacities, sequence_capacities)
    make_step = functools.partial(preparation.make_step, device, C, N, R,
                                  bundle_dir=args.bundle_dir,
                                  dummy_length=getattr(args, "dummy_length", None))
    if mode == "eager":
        trainer = EagerTrainer(model, autocast, device)
    elif mode == "thdc-eager":
        step = make_step()
        trainer = StepTrainer(model, autocast, device, step)
    elif mode == "thdc-layer-graphs":
        step = make_step()
        trainer = LayerGraphTrainer(model, autocast, device, step)
    elif mode == "thdc-exact":
        step = make_step()
        trainer = ExactTrainer(model, autocast, device, step)
    elif mode == "thdc-ladder":
        step = make_step(ladder=ladder)
        trainer = LadderTrainer(model, autocast, device, step)
    else:
        slots = args.slots or data.max_microbatches(preset.documents, C, N)
        step = make_step(slots=slots)
        trainer = GraphTrainer(model, autocast, device, step, slots)
    synchronize(device)
    setup_s = time.perf_counter() - setup_start
    rows_computed = []  # rows the model runs over per step (padding included)

    losses = torch.zeros(args.steps, device=device)
    warmup = min(args.warmup, args.steps // 2)
    syncs, microbatches, tokens = [], [], []
    log_tokens, log_time = 0, None
    timed_start = None
    for it in range(args.steps):
        if it == warmup:  # the timed part starts here
            synchronize(device)
            timed_start = log_time = time.perf_counter()
            log_tokens = 0
        batch = data.global_batch(args.seed, it, preset.documents, C, preset.model.vocab)
        plan = data.plan_microbatches(batch, C, N, args.algorithm, ladder)
        # Host synchronisations are counted in the warm-up steps after the
        # first (whose lazy initialisation is not per iteration), which are
        # not timed.
        with count_syncs(device, 0 < it < warmup) as counted:
            pools = preparation.upload(batch, plan, device)
            optimizer.zero_grad(set_to_none=False)
            trainer.loss_sum.zero_()
            trainer.scale.fill_(1.0 / float(batch.loss_mask.sum()))
            trainer.run(batch, plan, pools)
            optimizer.step()
            losses[it:it + 1].copy_(trainer.loss_sum)
        if counted[0] is not None:
            syncs.append(counted[0])
        microbatches.append(plan.num_microbatches)
        if mode in ("eager", "thdc-exact"):
            rows_computed.append(batch.num_tokens)
        elif mode == "thdc-ladder":
            rows_computed.append(sum(ladder[0][r] for r in plan.rungs))
        else:
            rows_computed.append(C * plan.num_microbatches)
        tokens.append(batch.num_tokens)
        log_tokens += batch.num_tokens
        if (it + 1) % args.log_every == 0 or it + 1 == args.steps:  # the logging point
            loss = losses[it].item()  # synchronises
            now = time.perf_counter()
            rate = (f"{log_tokens / (now - log_time):,.0f} tokens/s" if log_time is not None
                    and it >= warmup else "warm-up")
            print(f"{mode:>17} step {it + 1:>5}  loss {loss:.4f}  {rate}", flush=True)
            if it >= warmup:
                log_tokens, log_time = 0, now
    synchronize(device)
    elapsed = time.perf_counter() - timed_start if timed_start is not None else float("nan")
    timed = args.steps - warmup
    loss_values = losses.tolist()
    figures = {
        "loss": loss_values,
        "final_loss": sum(loss_values[-10:]) / len(loss_values[-10:]),
        "setup_s": setup_s,
        "warmup_steps": warmup,
        "timed_steps": timed,
        "time_per_iter_ms": 1e3 * elapsed / timed if timed else None,
        "tokens_per_s": sum(tokens[warmup:]) / elapsed if timed else None,
        "microbatches_per_step": sum(microbatches) / len(microbatches),
        "tokens_per_step": sum(tokens) / len(tokens),
        "syncs_per_iter": sum(syncs) / len(syncs) if syncs else None,
        "sync_counted_steps": len(syncs),
        "slots": slots,
        "padded_fraction": 1 - sum(tokens) / sum(rows_computed),
        "graphs": (len(trainer.graphs) if hasattr(trainer, "graphs") else
                   2 * preset.model.layers if mode == "thdc-layer-graphs" else 0),
        "capture_s": getattr(trainer, "capture_s", None),
        "ladder": (None if ladder is None or mode != "thdc-ladder" else
                   {"capacities": list(ladder[0]), "sequence_capacities": list(ladder[1])}),
        "max_memory_bytes": (torch.cuda.max_memory_allocated(device)
                             if device.type == "cuda" else None),
    }
    if not all(math.isfinite(v) for v in loss_values):
        print(f"{mode}: the loss is not finite", file=sys.stderr)
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="all",
                        help="a mode, several separated by commas, or all: "
                             + ", ".join(MODES))
    parser.add_argument("--preset", choices=gpt.PRESET_NAMES, default="small")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--C", type=int, help="tokens per microbatch (default: the preset's)")
    parser.add_argument("--N", type=int,
                        help="sequences per microbatch, the dummy included (default: the "
                             "preset's)")
    parser.add_argument("--documents", type=int,
                        help="documents per global batch (default: the preset's)")
    parser.add_argument("--slots", type=int,
                        help="thdc-graphs: graphs captured (default: the planner's bound on "
                             "the microbatches of a global batch; thdc-layer-graphs captures "
                             "one forward and one backward per block, whatever the slots)")
    parser.add_argument("--algorithm", choices=("next_fit", "balanced", "ladder"),
                        default="next_fit",
                        help="the packing of every mode: next_fit (the reference "
                             "framework's), balanced, or ladder (the fewer rows at the "
                             "ladder's rungs of the two; thdc.planner.ladder_plan)")
    parser.add_argument("--ladder", type=int, metavar="K",
                        help="thdc-ladder: K rungs (default: thdc.planner.advise's choice "
                             "over the stream's first 20 global batches)")
    parser.add_argument("--dummy-length", type=int, metavar="L",
                        help="thdc modes: the tail in dummy sequences of L rows over the "
                             "spare offsets (GraphStep's dummy_length) instead of one")
    parser.add_argument("--bundle-dir", metavar="DIR",
                        help="where the step's bundles are (scripts/make-gpu-bundles.sh's "
                             "python/ folder); without it thdc's JIT compiles the step")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=("bf16", "fp32"),
                        help="bf16 autocast (the default on a GPU; FlashAttention needs it) "
                             "or fp32 (the default on the CPU)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="steps run before timing (host synchronisations are counted in "
                             "them)")
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat-eager", action="store_true",
                        help="run the eager mode a second time (\"eager-again\"): how far two "
                             "runs of one mode drift apart, the yardstick for the others")
    parser.add_argument("--json", metavar="OUT", help="write the figures here")
    parser.add_argument("--cp", type=int, default=1,
                        help="context-parallel ranks (under torchrun, with --tp: "
                             "examples/train/parallel.py; the thdc-eager mode over gloo)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (--cp)")
    parser.add_argument("--dynamic-cp", action="store_true",
                        help="--cp K: the K ranks are dynamic CP's DP x CP ranks, each "
                             "microbatch on a sub-group of its own size "
                             "(thdc.planner.dynamic_cp_plan)")
    parser.add_argument("--min-cp-size", type=int, default=1,
                        help="--dynamic-cp: the smallest sub-group "
                             "(min_dynamic_context_parallel_size)")
    parser.add_argument("--compare", metavar="SINGLE_JSON",
                        help="--cp/--tp: compare every step's loss with a single-process "
                             "run's (its thdc-eager mode)")
    parser.add_argument("--compare-steps", type=int,
                        help="--compare: the steps compared (default: every step in fp32, "
                             "the first 6 in bf16, where two runs of one single-process mode "
                             "already drift 8.6e-3 apart by step 10 on an H200)")
    parser.add_argument("--tolerance", type=float,
                        help="--compare: the largest loss difference allowed (default 1e-4 "
                             "in fp32, 2e-3 in bf16)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if args.precision is None:
        args.precision = "bf16" if device.type == "cuda" else "fp32"
    if device.type == "cuda" and args.precision != "bf16":
        parser.error("FlashAttention runs in bf16: --precision bf16 on a GPU")
    if device.type == "cuda" and importlib.util.find_spec("torch.nn.attention.varlen") is None:
        parser.error(f"torch {torch.__version__} has no torch.nn.attention.varlen (PyTorch 2.10 "
                     "or newer): the GPU modes need its variable-length FlashAttention")
    preset = gpt.preset(args.preset, args.C, args.N, args.documents)
    if args.dynamic_cp and args.cp < 2:
        parser.error("--dynamic-cp needs --cp 2 or more DP x CP ranks")
    if args.cp > 1 or args.tp > 1:
        return train_parallel(args, preset)
    chosen = MODES if args.mode == "all" else tuple(args.mode.split(","))
    for mode in chosen:
        if mode not in MODES:
            parser.error(f"--mode: {mode!r} is not one of {', '.join(MODES)} (or all)")
    modes = chosen
    if device.type == "cpu" and args.mode != "all" and set(modes) & set(GRAPH_MODES):
        parser.error(f"{', '.join(m for m in modes if m in GRAPH_MODES)} needs a GPU")
    if device.type == "cpu":
        left_out = [mode for mode in modes if mode in GRAPH_MODES]
        modes = tuple(mode for mode in modes if mode not in GRAPH_MODES)
        if left_out:
            print(f"on the CPU: {', '.join(left_out)} left out (CUDA graphs need a GPU); "
                  f"running {', '.join(modes)}", flush=True)
        print("on the CPU the timings say nothing about a GPU run (the model's kernels, "
              "not the host, dominate there); compare losses, not speed", flush=True)
    args.ladder_rungs = None
    if "thdc-ladder" in modes or args.algorithm == "ladder":
        import thdc.planner
        advice = thdc.planner.advise(data.sample_lengths(args.seed, preset.documents, preset.C),
                                     C=preset.C, N=preset.N, multiple=128, rungs=args.ladder)
        args.ladder_rungs = (advice.capacities, advice.sequence_capacities)
        print(f"ladder: {list(advice.capacities)}, N {list(advice.sequence_capacities)}; "
              f"expected padding {100 * advice.padded_fraction:.1f}% "
              f"(C alone {100 * advice.single_padded_fraction:.1f}%)", flush=True)

    parameters = sum(p.numel() for p in gpt.GPT(preset.model).parameters())
    config = preset.model
    print(f"{args.preset}: {parameters / 1e6:.1f}M parameters ({config.layers} layers, dim "
          f"{config.dim}, {config.heads} heads, vocab {config.vocab}); C={preset.C}, "
          f"N={preset.N}, {preset.documents} documents per global batch; {args.steps} steps "
          f"on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'the CPU'}",
          flush=True)
    results = {}
    output = {
        "preset": args.preset, "C": preset.C, "N": preset.N, "R": config.rope_rows,
        "documents": preset.documents, "steps": args.steps, "seed": args.seed,
        "algorithm": args.algorithm, "parameters": parameters,
        "dummy_length": getattr(args, "dummy_length", None),
        "ladder": (None if args.ladder_rungs is None else
                   {"capacities": list(args.ladder_rungs[0]),
                    "sequence_capacities": list(args.ladder_rungs[1])}),
        "model": {"vocab": config.vocab, "dim": config.dim, "layers": config.layers,
                  "heads": config.heads},
        "precision": args.precision, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "modes": results,
    }
    runs = [(mode, mode) for mode in modes]
    if args.repeat_eager and "eager" in modes:
        runs.append(("eager-again", "eager"))
    for key, mode in runs:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        results[key] = train(mode, args, preset, device)
        figures = results[key]
        syncs = figures["syncs_per_iter"]
        syncs = "not counted (CUDA only)" if syncs is None else f"{syncs:.1f}"
        print(f"{key:>17}: {figures['time_per_iter_ms']:.2f} ms/iter, "
              f"{figures['tokens_per_s']:,.0f} tokens/s, syncs/iter {syncs}, final loss "
              f"{figures['final_loss']:.4f}", flush=True)
        if args.json:  # after every mode: a mode that fails keeps the others' figures
            with open(args.json, "w") as out:
                json.dump(output, out, indent=1)
    return output


def train_parallel(args, preset):
    """--cp/--tp: examples/train/parallel.py on this rank (thdc-eager only)."""
    import parallel

    if args.mode not in ("all", "thdc-eager"):
        raise SystemExit("--cp/--tp runs the thdc-eager mode only (the step through "
                         "get_batch_on_this_rank_for_sequence_packing, the model eager)")
    figures = parallel.train_parallel(args, preset)
    if figures is None:  # not rank 0
        return None
    within = True
    if args.compare:
        bf16 = args.precision == "bf16"
        tolerance = args.tolerance if args.tolerance is not None else (2e-3 if bf16 else 1e-4)
        steps = args.compare_steps or (6 if bf16 else args.steps)
        within = parallel.compare(figures, args.compare, tolerance, steps)
    output = {"preset": args.preset, "C": preset.C, "N": preset.N, "steps": args.steps,
              "seed": args.seed, "precision": args.precision, "torch": torch.__version__,
              "modes": {parallel.mode_name(args.cp, args.tp, args.dynamic_cp): figures}}
    if args.json:  # written either way: a failed comparison keeps its figures
        with open(args.json, "w") as out:
            json.dump(output, out, indent=1)
    if not within:
        raise SystemExit(f"the losses differ by {figures['max_loss_difference']:.3g} > "
                         f"{figures['tolerance']:g} over the first {figures['compared_steps']} "
                         "steps")
    return output


if __name__ == "__main__":
    main()
