"""examples/train with context and tensor parallelism, under torchrun:

  torchrun --standalone --nproc-per-node 4 examples/train/train.py --cp 2 --tp 2 \
      --preset tiny --steps 40 --json parallel.json
  torchrun --standalone --nproc-per-node 4 examples/train/train.py --cp 4 --dynamic-cp \
      --preset tiny --steps 40 --json dynamic.json

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

With --dynamic-cp the cp ranks are dynamic CP's DP x CP ranks instead:
every global batch is planned by thdc.planner.dynamic_cp_plan (the
reference framework's dynamic-CP scheduler), each microbatch splits the
ranks into sub-groups of 1, 2, 4, ... ranks, and each rank's batch dict
carries its sub-group's documents and local_cp_size. The call is made with
dynamic_cp=True; q, k, v are gathered over the sub-group
(PackedSeqParams.cp_group), and the gradients summed over all ranks. The
other TP ranks get the sizes from the plan, which every rank computes.
Every run records the plan's figures (microbatches, rows computed, the
attention work of the busiest rank, the k and v rows gathered): compare a
--dynamic-cp run with a fixed --cp run of the same ranks.

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

    def attention(self, q, k, v, cu_seqlens, max_seqlen, order, mine, cp_group):
        """Causal attention of this rank's rows over every CP rank's of
        `cp_group` (None: this rank alone): q, k, v gathered rank-major, put
        in sequence order (`order`, the step's cp_order_index), attended over
        the global offsets; the rows at `mine` (this rank's rows in sequence
        order) are returned."""
        if cp_group is not None:
            q, k, v = (_GatherFromCP.apply(t, cp_group).index_select(0, order)
                       for t in (q, k, v))
        out = gpt.varlen_causal_attention(q, k, v.contiguous(), cu_seqlens, max_seqlen)
        return out.index_select(0, mine) if mine is not None else out

    def loss(self, tokens, rope_rows, labels, loss_mask, cu_seqlens, max_seqlen, order,
             mine, scale, cp_group=None):
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
            out = self.attention(q, k, v, cu_seqlens, max_seqlen, order, mine, cp_group)
            x = x + _ReduceFromTP.apply(F.linear(out.reshape(rows, -1), block.proj), tp)
            h = _CopyToTP.apply(block.norm2(x), tp)
            h = F.gelu(F.linear(h, block.fc1, block.fc1_bias), approximate="tanh")
            x = x + _ReduceFromTP.apply(F.linear(h, block.fc2), tp) + block.fc2_bias
        logits = self.head(self.norm(x)).float()
        return (F.cross_entropy(logits, labels, reduction="none") * loss_mask).sum() * scale


def packed_microbatch(batch, padded, ids):
    """Documents `ids` of the global batch, each padded to its padded length,
    as the batch dict the reference framework's packing loader yields: 1-D
    int64 data with the padding rows out of the loss, int32 valid and padded
    offsets, max_seqlen."""
    pieces = {k: [] for k in ("tokens", "labels", "loss_mask", "position_ids")}
    cu, cup = [0], [0]
    for i in ids:
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
    return item


def padded_microbatches(batch, C_rank, cp, N):
    """The global batch planned for cp ranks of C_rank rows (documents padded
    to a multiple of 2*cp, S1) by the next-fit scheduler, as the loader's
    batch dicts; and the plan's figures (plan_figures)."""
    import thdc.planner

    padded = thdc.planner.align_lengths(batch.lengths, cp)
    plan = thdc.planner.plan(padded, C_rank, cp, max_packed_sequences=N)
    groups = [[tuple(pack)] * cp for pack in plan.packs]
    sizes = [[cp] * cp for _ in plan.packs]
    return ([packed_microbatch(batch, padded, pack) for pack in plan.packs],
            plan_figures(groups, sizes, padded, batch.lengths, C_rank))


def dynamic_microbatches(batch, C_rank, ranks, N, min_cp_size, rank):
    """The global batch planned for dynamic CP over `ranks` DP x CP ranks of
    C_rank rows (thdc.planner.dynamic_cp_plan, the reference framework's
    scheduler; documents padded to a multiple of 2*ranks): DP x CP rank
    `rank`'s batch dicts, each with its sub-group's documents and
    local_cp_size, a host int; and the plan's figures."""
    import thdc.planner

    padded = thdc.planner.align_lengths(batch.lengths, cp=1, dp=ranks, dynamic_cp=True)
    plan = thdc.planner.dynamic_cp_plan(padded, C_rank, cp=1, dp=ranks,
                                        min_cp_size=min_cp_size, max_packed_sequences=N)
    items = [dict(packed_microbatch(batch, padded, plan.groups[m][rank]),
                  local_cp_size=plan.cp_sizes[m][rank]) for m in range(len(plan))]
    return items, plan_figures(plan.groups, plan.cp_sizes, padded, batch.lengths, C_rank)


def plan_figures(groups, sizes, padded, valid, C_rank):
    """What a plan costs, from its shapes alone (the same on any machine):
    `groups[m][j]` the documents DP x CP rank j holds in microbatch m, of a
    sub-group of sizes[m][j] ranks, each rank C_rank rows. Per global batch:
    microbatches; rows every rank computes and the valid ones among them;
    attention work, the row pairs of each causal block (documents and the
    dummy sequence over the tail, what graph mode computes) divided over the
    sub-group, summed over the microbatches, of the busiest rank (the one
    whose total is highest) and on average; the rows of k and v a rank
    gathers from the others of its sub-group per layer. summarize_plans
    adds them over the global batches."""
    ranks = len(sizes[0]) if sizes else 1
    work, gathered = [0.0] * ranks, [0] * ranks
    for row_groups, row_sizes in zip(groups, sizes):
        for j in range(ranks):
            s, ids = row_sizes[j], row_groups[j]
            rows = sum(int(padded[i]) for i in ids)
            tail = s * C_rank - rows
            pairs = sum(int(padded[i]) * (int(padded[i]) + 1) // 2 for i in ids)
            work[j] += (pairs + tail * (tail + 1) // 2) / s
            gathered[j] += (s - 1) * C_rank
    microbatches = len(sizes)
    computed = microbatches * ranks * C_rank
    return {"microbatches": microbatches, "rows_computed": computed,
            "valid_rows": int(np.sum(valid)),
            "attention_pairs_busiest_rank": max(work),
            "attention_pairs_mean_rank": sum(work) / ranks,
            "kv_rows_gathered_per_rank": max(gathered),
            "sub_groups_per_cp_size": {str(k): sum(row.count(k) for row in sizes) // k
                                         for k in sorted({x for row in sizes for x in row})}}


def train_parallel(args, preset):
    """The training loop on this rank; rank 0's figures as a dict. With
    args.dynamic_cp the cp ranks are DP x CP ranks of dynamic CP."""
    import thdc.megatron
    import thdc.planner

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cp, tp, dynamic = args.cp, args.tp, bool(getattr(args, "dynamic_cp", False))
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
    if preset.C % cp:
        raise SystemExit(f"C = {preset.C} tokens per microbatch must divide among cp = {cp}")
    C_rank, N = preset.C // cp, preset.N
    config = SimpleNamespace(
        max_seqlen_per_dp_cp_rank=C_rank, thd_max_packed_sequences=N,
        pad_packed_seq_alignment="max", cuda_graph_impl="none", cp_partition_mode="zigzag",
        sequence_parallel=False, tensor_model_parallel_size=tp, context_parallel_size=cp)
    step_kwargs = dict(device="cpu" if device.type == "cpu" else device,
                       rope_table_rows=preset.model.rope_rows, cp_order_index=True,
                       convention="graph")
    if dynamic:
        # The cp ranks are dynamic CP's DP x CP ranks (dp = cp here, the
        # static CP group each rank alone, as context_parallel_size=1): each
        # microbatch's sub-groups are aligned blocks of them, one process
        # group per block, made on every rank in the same order (megatron-
        # core's create_dynamic_dp_cp_groups, parallel_state.py:421-441).
        min_cp = args.min_cp_size
        sizes = thdc.planner.dynamic_cp_sizes(cp, min_cp)
        blocks = {}
        for t in range(tp):
            for size in sizes:
                for start in range(0, cp - size + 1, size):
                    group = dist.new_group([(start + i) * tp + t for i in range(size)])
                    if t == tp_rank and start <= cp_rank < start + size:
                        blocks[size] = group
        config.context_parallel_size = 1
        config.dynamic_context_parallel, config.min_dynamic_context_parallel_size = True, min_cp
        step_kwargs["cp_groups"] = blocks
        groups = SimpleNamespace(tp=tp_groups[cp_rank], cp=pp_groups[rank], pp=pp_groups[rank],
                                 dp_cp=cp_groups[tp_rank])
    else:
        groups = SimpleNamespace(tp=tp_groups[cp_rank], cp=cp_groups[tp_rank],
                                 pp=pp_groups[rank])
    thdc.megatron.SEQUENCE_PACKING.configure(**step_kwargs)

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
    # The gradients and the loss are summed over every rank that holds a
    # share of the global batch: the CP group, or dynamic CP's DP x CP group.
    everyone = cp_groups[tp_rank]
    losses, plans, start = [], [], time.perf_counter()
    for it in range(args.steps):
        batch = data.global_batch(args.seed, it, preset.documents, preset.C, preset.model.vocab)
        if dynamic:
            items, figures = dynamic_microbatches(batch, C_rank, cp, N, min_cp, cp_rank)
        else:
            items, figures = padded_microbatches(batch, C_rank, cp, N)
        plans.append(figures)
        # TP rank 0 reads the batch dicts; under dynamic CP the other TP
        # ranks read the plan's sizes, which every rank computes alike.
        iterator = (iter(items) if tp_rank == 0 else
                    iter([item["local_cp_size"] for item in items]) if dynamic else None)
        scale = torch.tensor([1.0 / float(batch.loss_mask.sum())], device=device)
        optimizer.zero_grad(set_to_none=False)
        total = torch.zeros(1, device=device)
        for _ in items:
            tokens, labels, loss_mask, _, position_ids, params, padding_mask = \
                thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
                    iterator, dynamic_cp=dynamic, pg_collection=groups, config=config)
            slot = thdc.megatron.SEQUENCE_PACKING.last
            size, group = ((params.local_cp_size, params.cp_group) if dynamic
                           else (cp, groups.cp))
            local = cp_rank % size
            order = slot.cp_order_index.long()
            mine = (torch.argsort(order)[local * C_rank:(local + 1) * C_rank]
                    if size > 1 else None)
            with autocast():
                loss = model.loss(tokens[0], slot.rope_rows, labels[0], loss_mask[0],
                                  params.cu_seqlens_q, params.max_seqlen_q, order, mine, scale,
                                  cp_group=group if size > 1 else None)
            loss.backward()
            total += loss.detach()
        # Every rank computed its rows' share: sum the gradients and the loss.
        if cp > 1:
            for parameter in model.parameters():
                if parameter.grad is not None:
                    dist.all_reduce(parameter.grad, group=everyone)
            dist.all_reduce(total, group=everyone)
        optimizer.step()
        losses.append(float(total.item()))
        if rank == 0 and ((it + 1) % args.log_every == 0 or it + 1 == args.steps):
            print(f"{'dynamic ' if dynamic else ''}cp {cp} tp {tp} step {it + 1:>5}  loss "
                  f"{losses[-1]:.4f}", flush=True)
    elapsed = time.perf_counter() - start
    dist.barrier()
    dist.destroy_process_group()
    figures = {"loss": losses, "final_loss": sum(losses[-10:]) / len(losses[-10:]),
               "time_per_iter_ms": 1e3 * elapsed / args.steps, "cp": cp, "tp": tp,
               "dynamic_cp": dynamic, "plan": summarize_plans(plans)}
    if dynamic:
        figures["min_cp_size"] = min_cp
    return figures if rank == 0 else None


def summarize_plans(plans):
    """plan_figures of every global batch: their totals, and the ratios a
    reader compares (valid rows per computed row)."""
    total = {k: sum(p[k] for p in plans) for k in plans[0] if k != "sub_groups_per_cp_size"}
    sizes = {}
    for p in plans:
        for k, v in p["sub_groups_per_cp_size"].items():
            sizes[k] = sizes.get(k, 0) + v
    total["sub_groups_per_cp_size"] = dict(sorted(sizes.items(), key=lambda kv: int(kv[0])))
    total["valid_fraction"] = total["valid_rows"] / total["rows_computed"]
    total["global_batches"] = len(plans)
    return total


def mode_name(cp, tp, dynamic):
    """The run's key in the JSON file's modes."""
    return f"thdc-eager-{'dcp' if dynamic else 'cp'}{cp}-tp{tp}"


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
    print(f"{'dynamic ' if figures.get('dynamic_cp') else ''}cp {figures['cp']} tp "
          f"{figures['tp']} against the single-process run: largest "
          f"loss difference {worst:.2e} over the first {count} steps (tolerance {tolerance:g}); "
          f"over all {len(differences)}: {max(differences):.2e}", flush=True)
    print("per step: " + " ".join(f"{d:.1e}" for d in differences), flush=True)
    figures.update(compared_steps=count, max_loss_difference=worst, tolerance=tolerance,
                   loss_differences=differences)
    return math.isfinite(worst) and worst <= tolerance
