#!/usr/bin/env python3
"""Where one training iteration's time goes, from the Chrome trace that
PyTorch's profiler writes: what the GPU was busy with, and how long it sat
idle waiting for the host.

Megatron-LM writes the trace itself with `--profile --use-pytorch-profiler
--profile-step-start K --profile-step-end K+1 --tensorboard-dir DIR`
(training.py:4190-4222 on dev d48bd6be0a: DIR/../torch_profile/
rank-0.json.gz); bench/megatron_pretrain.py --profile K adds those flags.

    python3 bench/torch_trace.py TRACE.json[.gz] [--json OUT]

The figures, over the profiled steps (the `ProfilerStep#N` annotations):

- wall: from the first step's start on the host to the end of the last
  device activity (the GPU runs behind the host; the trace holds only the
  active steps);
- busy: the union of every kernel, copy and set on the device, and idle the
  rest of the wall: the time the GPU waited for the host (launches, Python,
  synchronisations), its longest waits with what ran before and after;
- per kind of kernel (KINDS: the first pattern its name holds), the summed
  time and count; a kernel that runs inside a replayed CUDA graph counts
  as any other (CUPTI traces graph nodes);
- on the host: the number of kernel launches and of graph launches, and
  the time in synchronising calls (cudaStreamSynchronize,
  cudaDeviceSynchronize, cudaEventSynchronize, cudaMemcpy without Async)."""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from typing import Dict, Iterable, List, Tuple

# Kinds of device work by name, the bench's one list (bench/megatron_gpt.py's
# profiles use it too): (kind, patterns in the name, lower case), the first
# kind whose pattern a name holds; "other" where none does.
KINDS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("attention", ("fmha", "flash", "fused_attn", "cudnn", "sdpa", "attn")),
    ("gemm", ("gemm", "sm90_xmma", "cutlass", "nvjet", "matmul", "wgmma", "cublas")),
    ("optimizer", ("adam", "multi_tensor", "l2norm")),
    # TE's THD-format kernels (fused RoPE, partition, ...) and thdc's step
    ("thd kernels", ("thd_", "thdc", "gather_segments")),
    ("copy", ("memcpy", "memset", "copy")),
    ("nccl", ("nccl",)),
    ("norm, softmax, cross entropy", ("norm", "softmax", "cross_entropy", "xentropy")),
    ("elementwise, reduce", ("elementwise", "vectorized", "reduce", "unrolled", "fill", "cast",
                             "transpose", "cat", "index", "gather", "scatter")),
)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
SYNCHRONISING = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                 "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


def kind_of(name: str) -> str:
    lower = name.lower()
    for kind, patterns in KINDS:
        if any(p in lower for p in patterns):
            return kind
    return "other"


def device_timeline(intervals: Iterable[Tuple[float, float, str]]):
    """Device work as (start, end, name): its busy time (the union of the
    intervals), its span (first start to last end; span - busy is the
    device waiting between kernels: launches, host work, syncs) and each
    wait as (length, name before, name after)."""
    intervals = sorted(intervals)
    busy, end, last, gaps = 0.0, None, None, []
    for a, b, name in intervals:
        if end is None or a > end:
            if end is not None:
                gaps.append((a - end, last, name))
            busy += b - a
            end, last = b, name
        elif b > end:
            busy += b - end
            end, last = b, name
    span = max(i[1] for i in intervals) - intervals[0][0] if intervals else 0.0
    return busy, span, gaps


def load(path: str) -> List[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def summarise(events: List[dict]) -> dict:
    """The figures of the module's docstring (times in ms). ValueError
    where the trace has no profiler step or no device activity."""
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    steps = [e for e in complete if str(e.get("name", "")).startswith("ProfilerStep#")]
    device = [e for e in complete if e.get("cat") in DEVICE_CATEGORIES]
    if not steps:
        raise ValueError("the trace has no ProfilerStep# annotation (was it written by "
                         "torch.profiler with a schedule?)")
    if not device:
        raise ValueError("the trace has no kernel, copy or set on the device (CUDA activity "
                         "not recorded)")
    start = min(e["ts"] for e in steps)
    end = max(max(e["ts"] + e["dur"] for e in steps), max(e["ts"] + e["dur"] for e in device))
    busy, _, gaps = device_timeline((e["ts"], e["ts"] + e["dur"], e["name"]) for e in device)
    kinds: Dict[str, List[float]] = {}
    for e in device:
        kind = kind_of(e["name"])
        figures = kinds.setdefault(kind, [0.0, 0])
        figures[0] += e["dur"] / 1000.0
        figures[1] += 1
    host = [e for e in complete if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    wall = (end - start) / 1000.0
    return {
        "steps": len(steps),
        "wall_ms": wall,
        "busy_ms": busy / 1000.0,
        "idle_ms": wall - busy / 1000.0,
        "busy_share": busy / 1000.0 / wall if wall else None,
        "kinds": {k: {"ms": round(v[0], 3), "count": v[1]}
                  for k, v in sorted(kinds.items(), key=lambda item: -item[1][0])},
        "kernel_launches": sum(1 for e in host if e["name"] in LAUNCHES),
        "graph_launches": sum(1 for e in host if e["name"] in GRAPH_LAUNCHES),
        "synchronising_ms": sum(e["dur"] for e in host if e["name"] in SYNCHRONISING) / 1000.0,
        "synchronising_calls": sum(1 for e in host if e["name"] in SYNCHRONISING),
        # the longest waits between device work: (ms, before, after)
        "longest_gaps": [[round(g / 1000.0, 3), before, after]
                         for g, before, after in sorted(gaps, reverse=True)[:5]],
    }


def lines(summary: dict) -> List[str]:
    out = [f"{summary['steps']} step(s): wall {summary['wall_ms']:.1f} ms, GPU busy "
           f"{summary['busy_ms']:.1f} ms ({100 * summary['busy_share']:.0f}%), idle "
           f"{summary['idle_ms']:.1f} ms; {summary['kernel_launches']} kernel launches, "
           f"{summary['graph_launches']} graph launches, {summary['synchronising_calls']} "
           f"synchronising calls ({summary['synchronising_ms']:.1f} ms)",
           "| kind | ms | count |", "|---|---:|---:|"]
    out += [f"| {k} | {v['ms']:.1f} | {v['count']} |" for k, v in summary["kinds"].items()]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a Chrome trace of torch.profiler (.json or .json.gz)")
    parser.add_argument("--json", metavar="OUT", help="write the figures here")
    args = parser.parse_args(argv)
    try:
        summary = summarise(load(args.trace))
    except (OSError, ValueError, KeyError) as error:
        parser.error(f"{args.trace}: {error}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print("\n".join(lines(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
