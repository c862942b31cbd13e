#!/usr/bin/env python3
"""What the static metadata of a captured microbatch costs its attention, and
what the dummy sequence over the tail costs (docs/capacity-ladder.md).

For the microbatches of examples/train's data stream (its first global
batches, planned as its modes plan them), PyTorch's varlen FlashAttention
forward and backward (causal, bf16, the preset's heads and head size) is
timed on the same rows with the metadata each mode gives it:

  exact        the microbatch's own T rows, its n+1 offsets and its longest
               document as max_seqlen (what eager and thdc-exact pass)
  exact@C      the same rows and offsets, max_seqlen C: the launch grid
               alone grown to C
  C, n+2       C rows: the documents, then one dummy sequence to C; n+2
               offsets, max_seqlen C (no spare entries)
  C, N+1       the same with the offsets padded to N+1 entries (the
               single-capacity graph mode, thdc-graphs)
  C, no dummy  C rows, N+1 entries, but the tail in no sequence (what the
               dummy itself costs: the difference to "C, N+1")
  rung, N_i+1  the rows, offsets and max_seqlen of the microbatch's rung of
               the advised ladder (thdc-ladder)
  rung, no dummy  the same without the dummy sequence: what the tail costs
               at the rung
  ..., dummies L  the tail in dummy sequences of L rows over the spare
               entries (GraphStep(dummy_length=L)), at C and at the rung

Per variant: the mean time per microbatch (CUDA events around a loop of
every microbatch, after a warm-up), and the ratio to "exact".

  python3 bench/attention_tax.py --preset medium --C 16384 --json out.json
"""
import argparse
import json
import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "examples", "train"))
import data  # noqa: E402
import model as gpt  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
import timing  # noqa: E402

import thdc.planner  # noqa: E402


def causal_keyword():
    import inspect
    from torch.nn.attention.varlen import varlen_attn

    parameters = inspect.signature(varlen_attn).parameters
    return {"window_size": (-1, 0)} if "window_size" in parameters else {"is_causal": True}


DUMMY_LENGTHS = (512, 2048)


def split(cu, end, length, N):
    """cu with the tail to `end` in dummy sequences of `length` rows over the
    spare entries of N+1 (policy split_dummy_sequences)."""
    tail = end - cu[-1]
    if tail <= 0:
        return list(cu)
    count = min(-(-tail // length), N - (len(cu) - 1))
    return list(cu) + [cu[-1] + t * length for t in range(1, count)] + [end]


def variants(plan, m, C, N, ladder):
    """(name, rows, offsets, max_seqlen) of microbatch m for each variant."""
    n = int(plan.num_seqs[m])
    real = [int(v) for v in plan.cu[m, :n + 1]]
    T, longest = real[-1], int(plan.max_lengths[m])
    pad = lambda cu, entries: cu + [cu[-1]] * (entries - len(cu))
    dummy = real + ([C] if C > T else [])
    out = [("exact", T, real, longest), ("exact@C", T, real, C),
           ("C, n+2", C, dummy, C), ("C, N+1", C, pad(dummy, N + 1), C),
           ("C, no dummy", C, pad(real, N + 1), C)]
    if ladder is not None:
        r = int(plan.rungs[m])
        B, N_r = ladder[0][r], ladder[1][r]
        rung = real + ([B] if B > T else [])
        out.append(("rung, N_i+1", B, pad(rung, N_r + 1), B))
        out.append(("rung, no dummy", B, pad(real, N_r + 1), B))
        for L in DUMMY_LENGTHS:
            out.append((f"rung, dummies {L}", B, pad(split(real, B, L, N_r), N_r + 1), B))
    for L in DUMMY_LENGTHS:
        out.append((f"C, N+1, dummies {L}", C, pad(split(real, C, L, N), N + 1), C))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=gpt.PRESET_NAMES, default="medium")
    parser.add_argument("--C", type=int)
    parser.add_argument("--N", type=int)
    parser.add_argument("--batches", type=int, default=8, help="global batches to time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    from torch.nn.attention.varlen import varlen_attn

    preset = gpt.preset(args.preset, args.C, args.N)
    C, N = preset.C, preset.N
    heads, head_dim = preset.model.heads, preset.model.dim // preset.model.heads
    advice = thdc.planner.advise(data.sample_lengths(0, preset.documents, C), C=C, N=N)
    ladder = (advice.capacities, advice.sequence_capacities)
    causal = causal_keyword()
    device = torch.device("cuda")
    cases = {}
    for step in range(args.batches):
        batch = data.global_batch(0, 100 + step, preset.documents, C, preset.model.vocab)
        plan = data.plan_microbatches(batch, C, N, "next_fit", ladder)
        for m in range(plan.num_microbatches):
            for name, rows, cu, max_seqlen in variants(plan, m, C, N, ladder):
                cases.setdefault(name, []).append(
                    (rows, torch.tensor(cu, dtype=torch.int32, device=device), max_seqlen))
    q = torch.randn(C, heads, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn_like(q, requires_grad=True)
    v = torch.randn_like(q, requires_grad=True)
    grad = torch.randn_like(q)

    def run(case):
        rows, cu, max_seqlen = case
        out = varlen_attn(q[:rows], k[:rows], v[:rows], cu, cu, max_seqlen, max_seqlen, **causal)
        out.backward(grad[:rows])

    results = {}
    for name, todo in cases.items():
        for case in todo[:4]:
            run(case)
        best = None
        for _ in range(args.repeats):
            with timing.device_window() as window:
                for case in todo:
                    run(case)
            ms = window.millis / len(todo)
            best = ms if best is None else min(best, ms)
        results[name] = best
    base = results["exact"]
    print(f"{args.preset}: C={C}, N={N}, {heads} heads x {head_dim}, "
          f"{len(cases['exact'])} microbatches; ladder {list(ladder[0])}, N {list(ladder[1])}")
    print(f"{'variant':<14} {'ms/microbatch':>14} {'vs exact':>9}")
    for name, ms in results.items():
        print(f"{name:<14} {ms:>14.3f} {ms / base:>9.2f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"preset": args.preset, "C": C, "N": N, "heads": heads,
                       "head_dim": head_dim, "microbatches": len(cases["exact"]),
                       "ladder": {"capacities": list(ladder[0]),
                                  "sequence_capacities": list(ladder[1])},
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "ms_per_microbatch": results}, out, indent=1)


if __name__ == "__main__":
    main()
