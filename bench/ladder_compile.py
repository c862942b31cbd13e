#!/usr/bin/env python3
"""What a capacity ladder costs to set up (docs/capacity-ladder.md): a
GraphStep with the advised ladder of examples/train's data, compiled by
thdc's JIT into an empty cache (cold) and again from the cache (warm), and
one whole-microbatch-sized step graph per rung captured: seconds, kernels,
graphs, and the step's own device memory (inputs and output buffer per
slot) beside the single-capacity step's.

  python3 bench/ladder_compile.py --C 16384 --json out.json
"""
import argparse
import json
import os
import sys
import tempfile

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "examples", "train"))
import data  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
import timing  # noqa: E402

import thdc.megatron  # noqa: E402
import thdc.planner  # noqa: E402


def build(C, N, R, ladder, cache):
    torch.cuda.synchronize()
    with timing.host_window() as window:
        step = thdc.megatron.GraphStep(C, N, 1, 0, rope_table_rows=R, cache_dir=cache,
                                       capacities=ladder[0], sequence_capacities=ladder[1])
        torch.cuda.synchronize()
    return step, window.seconds


def step_bytes(step):
    slot = step.slot(0)
    inputs = sum(t.numel() * t.element_size() for t in vars(slot.inputs).values())
    return inputs + slot.buffer.numel()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--C", type=int, default=16384)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    C, N = args.C, args.N
    advice = thdc.planner.advise(data.sample_lengths(0, args.documents, C), C=C, N=N)
    ladder = (list(advice.capacities), list(advice.sequence_capacities))
    results = {"C": C, "N": N, "ladder": {"capacities": ladder[0],
                                          "sequence_capacities": ladder[1]},
               "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as cache:
        single, results["single_cold_s"] = build(C, N, C, ([C], [N]), cache)
        cold, results["ladder_cold_s"] = build(C, N, C, ladder, cache)  # C's kernel cached
        step, results["ladder_warm_s"] = build(C, N, C, ladder, cache)
    results["kernels"] = len(step.kernels)
    # The cold build's kernels (C's came from the cache the single step filled).
    results["compile_ms_per_kernel"] = [round(k.compile_info["compile_micros"] / 1e3, 1)
                                        for k in cold.kernels]
    results["sources"] = [k.compile_info["source"] for k in cold.kernels]
    results["step_bytes_single"] = step_bytes(single)
    results["step_bytes_ladder"] = step_bytes(step)
    with timing.host_window() as window:
        graphs = []
        for r in reversed(range(len(step.kernels))):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step.rung(r).run()
            graphs.append(graph)
        torch.cuda.synchronize()
        results["step_graphs"] = len(graphs)
    results["step_capture_s"] = window.seconds
    for name, value in results.items():
        print(f"{name}: {value}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
