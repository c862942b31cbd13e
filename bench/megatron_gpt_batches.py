"""bench/megatron_gpt.py's part that runs without TransformerEngine or a GPU:
the presets, the mode registry, the command line and the batch dicts
megatron-core's packing loader yields, built from examples/train's synthetic
stream and planner (imported from there, not copied).

A batch dict is what `get_batch_on_this_rank_for_sequence_packing`
(megatron/core/datasets/data_schedule.py:564 on dev d48bd6be0a) reads from
its iterator: tokens, labels, position_ids int64 and loss_mask float32, one
packed row of T rows (the function views them as [1, T], :744-745, after
asserting the dtypes, :729-742); cu_seqlens and cu_seqlens_padded int32 1-D
(asserted at :763-766); max_seqlen an int (:767-768 turns an int into a
tensor). Documents are padded to the alignment the mode needs: with cp = 1
nothing (get_cp_slice_for_thd is then the identity), else 2*cp (each CP rank
holds an equal share of every sequence under zigzag).
"""
import argparse
import os
import sys
import dataclasses
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_DIR = os.path.join(HERE, "..", "examples", "train")
if TRAIN_DIR not in sys.path:
    sys.path.insert(0, TRAIN_DIR)
import data  # noqa: E402  examples/train/data.py: the stream and the planner


@dataclass(frozen=True)
class Preset:
    hidden: int
    layers: int
    heads: int
    vocab: int
    documents: int  # per global batch
    lr: float


# GPT-2 small / medium / xl-ish, vocab 32768 (parameters with untied embeddings).
PRESETS = {
    "125m": Preset(hidden=768, layers=12, heads=12, vocab=32768, documents=40, lr=3e-4),
    "370m": Preset(hidden=1024, layers=24, heads=16, vocab=32768, documents=40, lr=3e-4),
    "1.3b": Preset(hidden=2048, layers=24, heads=16, vocab=32768, documents=40, lr=2e-4),
    # CPU tests only: the batch code at a size that runs in a second.
    "tiny": Preset(hidden=64, layers=2, heads=4, vocab=512, documents=8, lr=1e-3),
}


def parameter_count(p: Preset) -> int:
    """GPTModel with TE layers, no biases, untied output layer, LayerNorm."""
    h = p.hidden
    per_layer = 4 * h * h + 8 * h * h + 4 * h  # qkv+proj, fc1+fc2, two norms
    return 2 * p.vocab * h + p.layers * per_layer + 2 * h


@dataclass(frozen=True)
class Mode:
    """One way of training. `batches`: who prepares each microbatch
    ("megatron": dev's get_batch_on_this_rank_for_sequence_packing; "thdc":
    thdc.megatron's drop-in; "thdc-ladder": a GraphStep with capacities;
    "thdc-exact": a GraphStep's exact_rows). `graphs`: "none", "layers" (dev's
    TECudaGraphHelper at C), "layers-per-rung" (one TECudaGraphHelper capture
    per rung), "iteration" (the whole forward and backward of an iteration,
    one graph per iteration shape). `padded`: rows the model runs over: "T"
    (the microbatch's own), "C", "rung". A new mode is one more entry here
    and one more runner in megatron_gpt.py's RUNNERS."""

    name: str
    batches: str
    graphs: str
    padded: str
    thdc: bool
    doc: str = ""


MODES = {m.name: m for m in (
    Mode("megatron-eager", "megatron", "none", "T", False,
         "dev's function, pad_packed_seq_alignment None: the T rows, no graphs"),
    Mode("megatron-graphs", "megatron", "layers", "C", False,
         "dev's function padded to C (alignment 'max'), TECudaGraphHelper's per-layer graphs"),
    Mode("thdc-graphs", "thdc", "layers", "C", True,
         "thdc.megatron's function (same 7-tuple), the same per-layer graphs"),
    Mode("thdc-ladder", "thdc-ladder", "layers-per-rung", "rung", True,
         "GraphStep(capacities=...), per-layer graphs captured once per rung"),
    Mode("thdc-exact", "thdc-exact", "none", "T", True,
         "GraphStep run eagerly, the model on slot.exact_rows (no graphs)"),
    Mode("thdc-full-iteration", "thdc-full-iteration", "iteration", "rung", True,
         "GraphStep(capacities=..., slots=M), megatron-core's schedule captured once per "
         "iteration shape (thdc.megatron.IterationGraphs), the optimizer in megatron-core's "
         "optimizer graph"),
)}


def doc_alignment(cp: int) -> int:
    """Rows every document is padded to a multiple of: 2*cp under zigzag CP
    (get_cp_slice_for_thd splits each sequence into 2*cp chunks), 1 at cp = 1."""
    return 2 * cp if cp > 1 else 1


@dataclass
class Microbatch:
    """One batch dict and what the host knows of it (from the plan)."""

    batch: dict  # the keys dev's loader yields
    rows: int  # T, the packed rows (padding between documents included)
    real_tokens: int  # tokens whose loss_mask is 1
    num_seqs: int
    max_seqlen: int
    rung: Optional[int] = None


def microbatch_arrays(gb: "data.GlobalBatch", plan: "data.MicrobatchPlan", m: int,
                      align: int = 1):
    """Microbatch m of a planned global batch as numpy arrays: the documents
    in pack order, each padded to a multiple of `align` (padding rows: token
    0, label 0, loss_mask 0, positions continuing), with its cu arrays."""
    ids = plan.documents(m)
    lengths = gb.lengths[ids].astype(np.int64)
    padded = -(-lengths // align) * align
    total = int(padded.sum())
    keys = {"tokens": gb.tokens, "labels": gb.labels, "loss_mask": gb.loss_mask,
            "position_ids": gb.positions}
    out = {k: np.zeros(total, v.dtype) for k, v in keys.items()}
    start = 0
    for doc, length, width in zip(ids, lengths, padded):
        src = slice(int(gb.offsets[doc]), int(gb.offsets[doc]) + int(length))
        for k, v in keys.items():
            out[k][start:start + length] = v[src]
        out["position_ids"][start + length:start + width] = np.arange(length, width)
        start += int(width)
    cu = np.zeros(len(ids) + 1, np.int32)
    cu_padded = np.zeros(len(ids) + 1, np.int32)
    # cu_seqlens: cumulative valid lengths; cu_seqlens_padded: cumulative
    # padded lengths (what _build_thd_padding_mask reads: sequence i's valid
    # rows start at cu_seqlens_padded[i] and number cu[i+1] - cu[i]).
    cu[1:] = np.cumsum(lengths)
    cu_padded[1:] = np.cumsum(padded)
    out["cu_seqlens"], out["cu_seqlens_padded"] = cu, cu_padded
    return out, int(lengths.sum()), int(padded.max())


def make_microbatches(gb, plan, align=1, device=None):
    """Every microbatch of a planned global batch as batch dicts of torch
    tensors on `device` (pinned host copies sent without waiting on CUDA),
    or in page-locked host memory (device "pinned"), for a loader that
    copies them to the GPU itself."""
    import torch

    # page-locked host memory: one queued copy to the GPU
    pin = device == "pinned" or (device is not None and torch.device(device).type == "cuda")
    result = []
    for m in range(plan.num_microbatches):
        arrays, real, longest = microbatch_arrays(gb, plan, m, align)
        batch = {k: torch.from_numpy(v).pin_memory() if pin else torch.from_numpy(v)
                 for k, v in arrays.items()}
        batch["max_seqlen"] = longest  # an int: data_schedule.py:767-768
        result.append(Microbatch(batch=batch, rows=len(arrays["tokens"]), real_tokens=real,
                                 num_seqs=int(plan.num_seqs[m]), max_seqlen=longest,
                                 rung=None if plan.rungs is None else int(plan.rungs[m])))
    return send(result, device)


def send(microbatches, device):
    """Microbatches made in page-locked host memory (make_microbatches'
    "pinned"), sent to `device` without waiting on CUDA: the copies a loader
    that pins ahead (torch's DataLoader with pin_memory) leaves to the
    iteration. Left where they are for device "pinned" (a loader that copies
    them itself) or None."""
    if device in (None, "pinned"):
        return microbatches
    return [dataclasses.replace(mb, batch={
        k: v.to(device, non_blocking=True) if hasattr(v, "to") else v
        for k, v in mb.batch.items()}) for mb in microbatches]


def global_batch(args, preset, step, ladder=None):
    """Global batch `step` of the stream and its next-fit plan (the reference
    framework's scheduler, thdc.planner.plan): the same in every mode. With a
    ladder the plan also records each microbatch's rung (assign_rungs), which
    leaves the packs as they are."""
    gb = data.global_batch(args.seed, step, preset.documents, args.C, preset.vocab)
    plan = data.plan_microbatches(gb, args.C, args.N, "next_fit", ladder)
    return gb, plan


def advise_ladder(args, preset, rungs=None) -> Tuple[tuple, tuple, object]:
    """thdc.planner.advise over the stream's first 20 global batches (what a
    run knows before it starts), as examples/train/train.py's thdc-ladder."""
    import thdc.planner

    advice = thdc.planner.advise(data.sample_lengths(args.seed, preset.documents, args.C),
                                 C=args.C, N=args.N, multiple=128, rungs=rungs)
    return tuple(advice.capacities), tuple(advice.sequence_capacities), advice


def iteration_ladder(args, preset) -> Tuple[tuple, tuple]:
    """thdc-full-iteration's ladder: advise's with --iteration-rungs rungs,
    by default thdc-ladder's (--ladder, else advise's choice). Each iteration
    shape (a multiset of rungs) that runs is a graph; --max-graphs bounds
    them, and iteration_shapes picks which."""
    rungs = args.ladder if args.iteration_rungs is None else args.iteration_rungs
    capacities, sequences, _ = advise_ladder(args, preset, rungs)
    return capacities, sequences


def iteration_shapes(args, preset, ladder):
    """The iteration shapes thdc-full-iteration captures under
    --iteration-shapes planned: thdc.megatron.choose_shapes over the plans of
    the run's --steps global batches (the planner plans each from the
    documents' lengths, known before the run), at most --max-graphs of them.
    None under "met" (each shape captured when first met)."""
    if args.iteration_shapes != "planned":
        return None
    import thdc.megatron

    rung_lists = [[int(r) for r in global_batch(args, preset, step, ladder)[1].rungs]
                  for step in range(args.steps)]
    return thdc.megatron.choose_shapes(rung_lists, ladder[0], args.max_graphs)


def max_microbatches(args, preset) -> int:
    return data.max_microbatches(preset.documents, args.C, args.N)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="megatron-core's GPTModel with TransformerEngine on packed documents, "
                    "six ways in one process")
    parser.add_argument("--modes", default="all",
                        help="comma-separated, or all: " + ", ".join(MODES))
    parser.add_argument("--preset", choices=tuple(PRESETS), default="125m")
    parser.add_argument("--C", type=int, default=8192, help="rows per microbatch "
                        "(max_seqlen_per_dp_cp_rank)")
    parser.add_argument("--N", type=int, default=64, help="sequences per microbatch, the "
                        "dummy included (thd_max_packed_sequences)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5,
                        help="steps before timing; syncs are counted in those after the first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ladder", type=int, metavar="K",
                        help="thdc-ladder's rungs (default: thdc.planner.advise's choice)")
    parser.add_argument("--iteration-rungs", type=int, metavar="K",
                        help="thdc-full-iteration's rungs below C (advise's rungs=K; default: "
                             "thdc-ladder's)")
    parser.add_argument("--max-graphs", type=int, default=32,
                        help="thdc-full-iteration: at most this many iteration graphs")
    parser.add_argument("--iteration-shapes", choices=("planned", "met"), default="planned",
                        help="thdc-full-iteration: capture the shapes thdc.megatron."
                             "choose_shapes picks from the run's plans, each iteration running "
                             "the one that holds it at the fewest rows (planned), or each shape "
                             "when first met, then over the budget the captured one that holds "
                             "it, else eagerly (met)")
    parser.add_argument("--eager-optimizer", action="store_true",
                        help="thdc-full-iteration: the optimizer step eagerly after the "
                             "graph, not in megatron-core's optimizer graph")
    parser.add_argument("--bundle-dir", metavar="DIR",
                        help="thdc's bundles where thdc has no JIT: one per (C, N) of the "
                             "step and of every rung, named by thdc.stages.bundle_name(C, 1, N)")
    parser.add_argument("--print-bundles", action="store_true",
                        help="list the (C, N) bundles the thdc modes need, and exit")
    parser.add_argument("--repeat-eager", action="store_true",
                        help="run megatron-eager once more at the end ('megatron-eager-rerun'): "
                             "its losses against the first run's are the bf16 noise")
    parser.add_argument("--profile-dir", metavar="DIR",
                        help="profile each mode's last iteration (torch.profiler): device "
                             "time by kernel family, busy time against wall time, to DIR/MODE.json")
    parser.add_argument("--json", metavar="OUT", help="written after every mode")
    args = parser.parse_args(argv)
    args.modes = tuple(MODES) if args.modes == "all" else tuple(args.modes.split(","))
    for name in args.modes:
        if name not in MODES:
            parser.error(f"--modes: {name!r} is not one of {', '.join(MODES)} (or all)")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    if (args.iteration_rungs is not None and args.iteration_rungs < 1) or args.max_graphs < 0:
        parser.error("--iteration-rungs must be >= 1 and --max-graphs >= 0")
    if args.N < 2 or args.C < 16:
        parser.error("--N must be >= 2 and --C >= 16")
    return args
