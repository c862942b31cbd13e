#!/usr/bin/env python3
"""What dynamic CP saves against fixed CP, from the plans alone: for a
preset's stream of global batches over W ranks of C/W rows each, the
planner's fixed-CP plan (every microbatch over all W ranks, the next-fit
scheduler) beside its dynamic-CP plan (thdc.planner.dynamic_cp_plan, the
reference framework's scheduler: sub-groups of 1, 2, 4, ... ranks).

Per global batch (parallel.plan_figures): the microbatches, the rows every
rank computes, the attention work of the busiest rank (row pairs of every
causal block, the dummy sequence's over the tail included, divided over the
sub-group) and the k and v rows a rank gathers from its sub-group per
layer. These are counts, the same on any machine; the training run itself
(train.py --cp W [--dynamic-cp]) checks that both give the single-process
losses.

  python3 examples/train/compare_cp.py --preset small --ranks 4 --batches 200
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import model as gpt  # noqa: E402
import parallel  # noqa: E402


def compare(preset, ranks, batches, seed=0, min_cp_size=1):
    C_rank = preset.C // ranks
    fixed, dynamic = [], []
    for it in range(batches):
        batch = data.global_batch(seed, it, preset.documents, preset.C, preset.model.vocab)
        fixed.append(parallel.padded_microbatches(batch, C_rank, ranks, preset.N)[1])
        dynamic.append(parallel.dynamic_microbatches(batch, C_rank, ranks, preset.N,
                                                     min_cp_size, 0)[1])
    return parallel.summarize_plans(fixed), parallel.summarize_plans(dynamic)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=gpt.PRESET_NAMES, default="small")
    parser.add_argument("--ranks", type=int, nargs="+", default=[4])
    parser.add_argument("--C", type=int, help="tokens per microbatch (default: the preset's)")
    parser.add_argument("--N", type=int, help="sequences per microbatch, the dummy included")
    parser.add_argument("--documents", type=int, help="documents per global batch")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--min-cp-size", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    preset = gpt.preset(args.preset, args.C, args.N, args.documents)
    results = {}
    print(f"{args.preset}: C = {preset.C} tokens per microbatch over W ranks (C/W rows each), "
          f"N = {preset.N}, {preset.documents} documents per global batch, {args.batches} "
          f"global batches; every figure summed over the batches")
    print("| W | plan | microbatches | valid rows / computed | attention pairs of the busiest "
          "rank | k, v rows a rank gathers per layer | sub-groups by size |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for W in args.ranks:
        fixed, dynamic = compare(preset, W, args.batches, args.seed, args.min_cp_size)
        results[str(W)] = {"fixed": fixed, "dynamic": dynamic}
        for name, f in (("fixed CP", fixed), ("dynamic CP", dynamic)):
            ratio = lambda k: ("" if f is fixed else
                               f" ({f[k] / fixed[k]:.2f}x)" if fixed[k] else "")
            print(f"| {W} | {name} | {f['microbatches']}{ratio('microbatches')} | "
                  f"{100 * f['valid_fraction']:.1f}% | "
                  f"{f['attention_pairs_busiest_rank']:.3g}{ratio('attention_pairs_busiest_rank')}"
                  f" | {f['kv_rows_gathered_per_rank']:,}{ratio('kv_rows_gathered_per_rank')} | "
                  + ", ".join(f"{k}: {v}" for k, v in f["sub_groups_per_cp_size"].items()) + " |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"preset": args.preset, "C": preset.C, "N": preset.N,
                       "documents": preset.documents, "batches": args.batches,
                       "seed": args.seed, "min_cp_size": args.min_cp_size,
                       "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
