"""examples/train with context and tensor parallelism, under torchrun:

  torchrun --standalone --nproc-per-node 4 examples/train/train.py --cp 2 --tp 2 \
      --preset tiny --steps 40 --json parallel.json

Each microbatch reaches the model through
thdc.megatron.get_batch_on_this_rank_for_sequence_packing, as the reference
framework's training script calls it: TP rank 0 of each TP group reads the
packed microbatch (its documents padded to a multiple of 2*cp, the padding
out of the loss) from a data iterator, runs the step and broadcasts it to
its TP group; every CP rank gets its C/cp zigzag rows. The model is the one
of model.py, split the way Megatron splits it:

- TP: each block's attention heads and MLP hidden units are divided among
  the TP ranks (column-parallel qkv and fc1, row-parallel proj and fc2, an
  all-reduce after each row-parallel layer and in the backward of each
  column-parallel input); embedding, norms and the output layer replicated.
- CP: every rank computes q, k, v of its own rows; they are gathered over
  the CP group (an all-gather whose backward returns each rank its rows'
  gradients, summed over the ranks), put in sequence order with the step's cp_order_index,
  attended over the global offsets, and the rank keeps its own rows' output.
  (Every CP rank computes the whole attention: a check of the data path,
  not a fast CP attention.) Gradients are summed over the CP group.

The model starts from model.py's initialisation (the same seed), so the loss
of every step equals the single-process run's (`--cp 1 --tp 1`, the
thdc-eager mode) up to rounding: `--compare single.json` prints the largest
difference and fails above --tolerance. Gloo carries every collective, so
the ranks may share one GPU or run on the CPU (a correctness run; its speed
says nothing about NCCL).
"""
import math
import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import model as gpt  # noqa: E402


class _CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward. The partial sums
    are added in float32 and rounded once to their dtype, as the one
    matrix product of the single-process model rounds its float32 sum."""

    @staticmethod
    def forward(ctx, x, group):
        total = x.float()
        dist.all_reduce(total, group=group)
        return total.to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherFromCP(torch.autograd.Function):
    """All ranks' rows of a group, rank-major (all_gather); the backward sums
    every rank's gradient of the whole and returns this rank's rows (an
    all-reduce: gloo has no reduce-scatter, and torch's all_to_all fallback
    for it takes global ranks for a subgroup's)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group, ctx.rows = group, x.shape[0]
        ctx.rank = dist.get_rank(group)
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad[ctx.rank * ctx.rows:(ctx.rank + 1) * ctx.rows], None


class ParallelGPT(torch.nn.Module):
    """model.GPT's TP rank `tp_rank` of `tp` (heads and MLP units split), on
    a CP rank's rows; made from a whole GPT, so every rank starts from the
    same weights as the single-process run."""

    def __init__(self, whole: gpt.GPT, tp: int, tp_rank: int, groups):
        super().__init__()
        config = whole.config
        if config.heads % tp or (config.mlp_ratio * config.dim) % tp:
            raise SystemExit(f"--tp {tp} must divide the {config.heads} heads and the "
                             f"{config.mlp_ratio * config.dim} MLP units")
        self.config, self.tp, self.groups = config, tp, groups
        self.heads = config.heads // tp
        self.head_dim = config.dim // config.heads
        self.embedding, self.norm, self.head = whole.embedding, whole.norm, whole.head
        self.register_buffer("rope_cos", whole.rope_cos, persistent=False)
        self.register_buffer("rope_sin", whole.rope_sin, persistent=False)
        heads = slice(tp_rank * self.heads, (tp_rank + 1) * self.heads)
        hidden = config.mlp_ratio * config.dim // tp
        units = slice(tp_rank * hidden, (tp_rank + 1) * hidden)
        self.blocks = torch.nn.ModuleList()
        for block in whole.blocks:
            part = torch.nn.Module()
            part.norm1, part.norm2 = block.norm1, block.norm2
            qkv = block.attention.qkv.weight.detach().view(3, config.heads, self.head_dim,
                                                           config.dim)
            part.qkv = torch.nn.Parameter(qkv[:, heads].reshape(-1, config.dim).clone())
            proj = block.attention.proj.weight.detach().view(config.dim, config.heads,
                                                             self.head_dim)
            part.proj = torch.nn.Parameter(proj[:, heads].reshape(config.dim, -1).clone())
            fc1, fc2 = block.mlp[0], block.mlp[2]
            part.fc1 = torch.nn.Parameter(fc1.weight.detach()[units].clone())
            part.fc1_bias = torch.nn.Parameter(fc1.bias.detach()[units].clone())
            part.fc2 = torch.nn.Parameter(fc2.weight.detach()[:, units].clone())
            part.fc2_bias = fc2.bias  # replicated, added once after the all-reduce
            self.blocks.append(part)

    def attention(self, q, k, v, cu_seqlens, max_seqlen, order, mine):
        """Causal attention of this rank's rows over every CP rank's: q, k, v
        gathered rank-major, put in sequence order (`order`, the step's
        cp_order_index), attended over the global offsets; the rows at
        `mine` (this rank's rows in sequence order) are returned."""
        cp_group = self.groups.cp
        if dist.get_world_size(cp_group) > 1:
            q, k, v = (_GatherFromCP.apply(t, cp_group).index_select(0, order)
                       for t in (q, k, v))
        out = gpt.varlen_causal_attention(q, k, v.contiguous(), cu_seqlens, max_seqlen)
        return out.index_select(0, mine) if mine is not None else out

    def loss(self, tokens, rope_rows, labels, loss_mask, cu_seqlens, max_seqlen, order,
             mine, scale):
        # Rotary angles of this rank's own rows (the step's rope_rows): q and k
        # are rotated before they are gathered.
        cos, sin = self.rope_cos[rope_rows], self.rope_sin[rope_rows]
        tp = self.groups.tp
        x = self.embedding(tokens)
        rows = x.shape[0]
        for block in self.blocks:
            h = _CopyToTP.apply(block.norm1(x), tp)
            q, k, v = F.linear(h, block.qkv).view(rows, 3, self.heads, self.head_dim).unbind(1)
            q, k = gpt.apply_rotary(q, cos, sin), gpt.apply_rotary(k, cos, sin)
            out = self.attention(q, k, v, cu_seqlens, max_seqlen, order, mine)
            x = x + _ReduceFromTP.apply(F.linear(out.reshape(rows, -1), block.proj), tp)
            h = _CopyToTP.apply(block.norm2(x), tp)
            h = F.gelu(F.linear(h, block.fc1, block.fc1_bias), approximate="tanh")
            x = x + _ReduceFromTP.apply(F.linear(h, block.fc2), tp) + block.fc2_bias
        logits = self.head(self.norm(x)).float()
        return (F.cross_entropy(logits, labels, reduction="none") * loss_mask).sum() * scale


def padded_microbatches(batch, C_rank, cp, N):
    """The global batch planned for cp ranks of C_rank rows (documents padded
    to a multiple of 2*cp, S1), as the batch dicts the reference
    framework's packing loader yields: 1-D int64 data with the padding rows
    out of the loss, int32 valid and padded offsets, max_seqlen."""
    import thdc.planner

    padded = thdc.planner.align_lengths(batch.lengths, cp)
    plan = thdc.planner.plan(padded, C_rank, cp, max_packed_sequences=N)
    batches = []
    for pack in plan.packs:
        pieces = {k: [] for k in ("tokens", "labels", "loss_mask", "position_ids")}
        cu, cup = [0], [0]
        for i in pack:
            v, p = int(batch.lengths[i]), int(padded[i])
            rows = slice(int(batch.offsets[i]), int(batch.offsets[i]) + v)
            pad = p - v
            pieces["tokens"].append(np.concatenate([batch.tokens[rows], np.zeros(pad, np.int64)]))
            pieces["labels"].append(np.concatenate([batch.labels[rows], np.zeros(pad, np.int64)]))
            pieces["loss_mask"].append(np.concatenate([batch.loss_mask[rows],
                                                       np.zeros(pad, np.float32)]))
            pieces["position_ids"].append(np.arange(p, dtype=np.int64))
            cu.append(cu[-1] + v)
            cup.append(cup[-1] + p)
        item = {k: torch.from_numpy(np.concatenate(v)) for k, v in pieces.items()}
        item["cu_seqlens"] = torch.tensor(cu, dtype=torch.int32)
        item["cu_seqlens_padded"] = torch.tensor(cup, dtype=torch.int32)
        item["max_seqlen"] = torch.tensor(int(np.diff(cup).max()), dtype=torch.int32)
        batches.append(item)
    return batches


def train_parallel(args, preset):
    """The training loop on this rank; rank 0's figures as a dict."""
    import thdc.megatron

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cp, tp = args.cp, args.tp
    if world != cp * tp:
        raise SystemExit(f"--cp {cp} --tp {tp} needs {cp * tp} processes (torchrun "
                         f"--nproc-per-node {cp * tp}); got {world}")
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) %
                              torch.cuda.device_count())
        torch.cuda.set_device(device)
    tp_rank, cp_rank = rank % tp, rank // tp
    tp_groups = [dist.new_group([c * tp + t for t in range(tp)]) for c in range(cp)]
    cp_groups = [dist.new_group([c * tp + t for c in range(cp)]) for t in range(tp)]
    pp_groups = [dist.new_group([r]) for r in range(world)]
    groups = SimpleNamespace(tp=tp_groups[cp_rank], cp=cp_groups[tp_rank], pp=pp_groups[rank])
    if preset.C % cp:
        raise SystemExit(f"C = {preset.C} tokens per microbatch must divide among cp = {cp}")
    C_rank, N = preset.C // cp, preset.N
    config = SimpleNamespace(
        max_seqlen_per_dp_cp_rank=C_rank, thd_max_packed_sequences=N,
        pad_packed_seq_alignment="max", cuda_graph_impl="none", cp_partition_mode="zigzag",
        sequence_parallel=False, tensor_model_parallel_size=tp, context_parallel_size=cp)
    thdc.megatron.SEQUENCE_PACKING.configure(
        device="cpu" if device.type == "cpu" else device, rope_table_rows=preset.model.rope_rows,
        cp_order_index=True, convention="graph")

    torch.manual_seed(args.seed)
    whole = gpt.GPT(preset.model)  # initialised on the CPU, as train.py's modes
    model = ParallelGPT(whole, tp, tp_rank, groups).to(device)
    del whole
    fused = {"fused": True} if device.type == "cuda" else {}  # as train.py's modes
    optimizer = torch.optim.AdamW(gpt.parameter_groups(model), lr=preset.lr,
                                  betas=(0.9, 0.95), **fused)
    if args.precision == "bf16":
        autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)
    else:
        import contextlib
        autocast = contextlib.nullcontext
    losses, start = [], time.perf_counter()
    for it in range(args.steps):
        batch = data.global_batch(args.seed, it, preset.documents, preset.C, preset.model.vocab)
        items = padded_microbatches(batch, C_rank, cp, N)
        iterator = iter(items) if tp_rank == 0 else None
        scale = torch.tensor([1.0 / float(batch.loss_mask.sum())], device=device)
        optimizer.zero_grad(set_to_none=False)
        total = torch.zeros(1, device=device)
        for _ in items:
            tokens, labels, loss_mask, _, position_ids, params, padding_mask = \
                thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
                    iterator, pg_collection=groups, config=config)
            slot = thdc.megatron.SEQUENCE_PACKING.last
            order = slot.cp_order_index.long()
            mine = (torch.argsort(order)[cp_rank * C_rank:(cp_rank + 1) * C_rank]
                    if cp > 1 else None)
            with autocast():
                loss = model.loss(tokens[0], slot.rope_rows, labels[0], loss_mask[0],
                                  params.cu_seqlens_q, params.max_seqlen_q, order, mine, scale)
            loss.backward()
            total += loss.detach()
        # Every CP rank computed its rows' share: sum the gradients and the loss.
        for parameter in model.parameters():
            if parameter.grad is not None and cp > 1:
                dist.all_reduce(parameter.grad, group=groups.cp)
        if cp > 1:
            dist.all_reduce(total, group=groups.cp)
        optimizer.step()
        losses.append(float(total.item()))
        if rank == 0 and ((it + 1) % args.log_every == 0 or it + 1 == args.steps):
            print(f"cp {cp} tp {tp} step {it + 1:>5}  loss {losses[-1]:.4f}", flush=True)
    elapsed = time.perf_counter() - start
    dist.barrier()
    dist.destroy_process_group()
    figures = {"loss": losses, "final_loss": sum(losses[-10:]) / len(losses[-10:]),
               "time_per_iter_ms": 1e3 * elapsed / args.steps, "cp": cp, "tp": tp}
    return figures if rank == 0 else None


def compare(figures, path, tolerance, steps):
    """The largest loss difference over the first `steps` steps against the
    single-process run in `path` (its thdc-eager mode), recorded in
    `figures` with every step's difference; whether it is within the
    tolerance."""
    import json

    with open(path) as source:
        single = json.load(source)["modes"]["thdc-eager"]["loss"]
    differences = [abs(a - b) for a, b in zip(figures["loss"], single)]
    count = min(steps, len(differences))
    worst = max(differences[:count])
    print(f"cp {figures['cp']} tp {figures['tp']} against the single-process run: largest "
          f"loss difference {worst:.2e} over the first {count} steps (tolerance {tolerance:g}); "
          f"over all {len(differences)}: {max(differences):.2e}", flush=True)
    print("per step: " + " ".join(f"{d:.1e}" for d in differences), flush=True)
    figures.update(compared_steps=count, max_loss_difference=worst, tolerance=tolerance,
                   loss_differences=differences)
    return math.isfinite(worst) and worst <= tolerance
