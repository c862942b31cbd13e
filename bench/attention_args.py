#!/usr/bin/env python3
"""What thdc.attention's argument functions cost per microbatch, side by side
in one process: host time per call from Python (wall time of REPS calls
queued back to back, then one synchronize) and device time (CUDA events over
REPS replays of a graph holding only those calls), beside the step's own
run, for one CP rank of a (C, cp, N) step. host_padded_offsets is host work
only (FlashInfer's plan input).

  python3 bench/attention_args.py --C 8192 --cp 2 --N 64 --json out.json
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402

import thdc.attention as attention  # noqa: E402
import thdc.megatron  # noqa: E402

REPS = 1000


def host_us(fn):
    return timing.host_time(fn, REPS, warmup=1)


def device_us(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return timing.replay_time(graph.replay, REPS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--C", type=int, default=8192)
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--json")
    a = parser.parse_args()
    step = thdc.megatron.GraphStep(a.C, a.N, a.cp, 0)
    rows = a.C * a.cp
    n = a.N // 2
    cup = np.arange(n + 1, dtype=np.int32) * (rows // (2 * a.cp * n)) * 2 * a.cp
    cu = cup.copy()
    cu[1:] -= 2
    step.load_inputs(cu_seqlens=torch.from_numpy(cu).cuda(), cu_seqlens_padded=torch.from_numpy(cup).cuda(),
                     tokens=torch.zeros(1, int(cup[-1]), dtype=torch.int64, device="cuda"),
                     labels=torch.zeros(1, int(cup[-1]), dtype=torch.int64, device="cuda"),
                     loss_mask=torch.ones(1, int(cup[-1]), device="cuda"),
                     position_ids=torch.zeros(1, int(cup[-1]), dtype=torch.int64, device="cuda"))
    step.run()
    cases = {
        "step.run": (step.run, True),
        "varlen_attn_args": (lambda: attention.varlen_attn_args(step), True),
        "flash_attn_4_args (seqused)": (lambda: attention.flash_attn_4_args(step), True),
        "cudnn_args (compact, 16 heads x 128)": (lambda: attention.cudnn_args(step, 16, 128), True),
        "computed_rows (seqused)": (lambda: attention.computed_rows(step, "seqused"), True),
        "host_padded_offsets": (lambda: attention.host_padded_offsets(cu, cup, n, a.C, a.cp, a.N),
                                False),
    }
    results = {}
    for name, (fn, on_device) in cases.items():
        results[name] = dict(host_us=host_us(fn), device_us=device_us(fn) if on_device else None)
        r = results[name]
        dev = f"{r['device_us']:8.2f} us device" if on_device else "   (host only)"
        print(f"{name:40s} {r['host_us']:8.2f} us host {dev}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(C=a.C, cp=a.cp, N=a.N, reps=REPS, results=results), f, indent=1)


if __name__ == "__main__":
    main()
