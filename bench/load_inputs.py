#!/usr/bin/env python3
"""Host cost of one microbatch through thdc.megatron.GraphStep in CUDA-graph
mode: load_inputs (the one-launch gather, and the per-tensor path it replaced:
one copy_ per tensor; since the load contract moved into the module, its
stores (num_rows, num_seqs, the -1 entries) go in one gather rather than a
fill_ each) followed by the replay of the step's captured graph, beside the
bare replay, at C = 4096 and 32768 (cp = 1, N = 64).

On a machine with thdc's compiler (build/bin/thdc), write the two bundles:

    python3 bench/load_inputs.py --write-bundles build-gpu-bundles/load-inputs

On the GPU host (the Python package built there, PyTorch installed):

    PYTHONPATH=build-gpu/python python3 bench/load_inputs.py \\
        --bundles build-gpu-bundles/load-inputs [--microbatches 1000] [--repeats 7] \\
        [--json load_inputs.json]

(without --bundles the steps are compiled by the JIT where thdc has one).

Host time: `repeats` runs of `microbatches` iterations each (16 distinct
microbatches of C rows cycled, already on the GPU), timed with a host clock
around the whole run; nothing synchronises inside a run (one
torch.cuda.synchronize after it). The median run's time per microbatch is
reported. The device keeps up (its time per microbatch is printed beside),
so the launch queue never holds the host back. Device time of the gather:
events around `microbatches` back-to-back load_inputs queued behind a
sleeping kernel, in batches of 200. Prints one table; with --json FILE
also writes it there (one object per row, times in µs), for committing."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402  (bench/timing.py)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CONFIGS = [(4096, 1, 64), (32768, 1, 64)]


def write_bundles(out):
    """The step's pipeline (python/thdc/stages.py, default options) compiled
    for CONFIGS into `out`, folders named as GraphStep's tests name them."""
    build = os.environ.get("THDC_BUILD_DIR", os.path.join(ROOT, "build"))
    stages = [sys.executable, os.path.join(ROOT, "python", "thdc", "stages.py")]
    os.makedirs(out, exist_ok=True)
    source = os.path.join(out, "megatron_step.mlir")
    with open(source, "w") as f:
        subprocess.run(stages, stdout=f, check=True)
    for C, cp, N in CONFIGS:
        name = subprocess.run(stages + ["--bundle-name", f"{C},{cp},{N}"], check=True,
                              capture_output=True, text=True).stdout.strip()
        target = os.path.join(out, name)
        subprocess.run([os.path.join(build, "bin", "thdc"), source, "--param", f"C={C}",
                        "--param", f"cp={cp}", "--param", f"N={N}", "-o", target], check=True)
        print(f"wrote {target}")


def microbatches(torch, C, N, count, seed):
    """`count` microbatches of C rows as the reference framework hands them
    over: data [1, C] on the GPU, cu arrays of n+1 entries (int32)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(1, N))
        cuts = np.sort(rng.choice(np.arange(1, C // 2), size=n - 1, replace=False)) * 2
        cu = np.concatenate([[0], cuts, [C]]).astype(np.int32)
        data = lambda dtype, high: torch.from_numpy(rng.integers(0, high, size=C)).to(dtype)
        batch = {"tokens": data(torch.int64, 50000), "labels": data(torch.int64, 50000),
                 "position_ids": data(torch.int64, C),
                 "loss_mask": data(torch.float32, 2), "cu_seqlens": torch.from_numpy(cu),
                 "cu_seqlens_padded": torch.from_numpy(cu.copy())}
        out.append({k: (v.view(1, -1) if v.numel() == C else v).cuda() for k, v in batch.items()})
    return out


def host_micros(torch, iteration, count, repeats):
    """Median over `repeats` runs of the host time per iteration of `count`
    unsynchronised iterations, and the device time per iteration of the
    median run."""
    for _ in range(min(count, 200)):
        iteration(0)
    torch.cuda.synchronize()
    runs = []
    for _ in range(repeats):
        with timing.device_window() as device:
            with timing.host_window() as host:
                for i in range(count):
                    iteration(i)
        torch.cuda.synchronize()
        runs.append((host.micros / count, device.micros / count))
    runs.sort()
    return runs[len(runs) // 2]


def gather_device_micros(torch, load, count):
    """Device time per load_inputs, back to back, queued behind a sleep."""
    times = []
    for first in range(0, count, 200):
        batch = min(200, count - first)
        window = timing.device_window()
        torch.cuda._sleep(40_000_000)  # ~20 ms: longer than queueing a batch
        with window:
            for i in range(batch):
                load(first + i)
        torch.cuda.synchronize()
        times.append(window.micros / batch)
    return statistics.median(times)


def bench(args):
    import torch

    import thdc
    import thdc.megatron
    import thdc.stages

    rows = []
    for C, cp, N in CONFIGS:
        bundle = None
        if args.bundles:
            bundle = os.path.join(args.bundles, thdc.stages.bundle_name(C, cp, N))
            if not os.path.isdir(bundle):
                sys.exit(f"no bundle {bundle}: write it with --write-bundles on a machine with "
                         "thdc's compiler")
        step = thdc.megatron.GraphStep(C, N, cp, 0, bundle=bundle)
        slot = step.slot(0)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            slot.run()
        batches = microbatches(torch, C, N, 16, seed=C)
        fast, per_tensor = slot.load_inputs, slot._per_tensor_loader.load

        # The same outputs both ways (checked once, outside the timing).
        checked = []
        for load in (fast, per_tensor):
            load(**batches[3])
            graph.replay()
            checked.append([t.clone() for t in slot.outputs])
        same = all(torch.equal(a, b) for a, b in zip(*checked))

        replay = graph.replay
        count, repeats = args.microbatches, args.repeats
        bare = host_micros(torch, lambda i: replay(), count, repeats)
        old = host_micros(torch, lambda i: (per_tensor(**batches[i % 16]), replay()), count,
                          repeats)
        new = host_micros(torch, lambda i: (fast(**batches[i % 16]), replay()), count, repeats)
        load_only = host_micros(torch, lambda i: fast(**batches[i % 16]), count, repeats)
        gather_device = gather_device_micros(torch, lambda i: fast(**batches[i % 16]), count)
        rows.append((C, cp, N, bare, old, new, load_only, gather_device, same))
        print(f"C={C}: bare {bare[0]:.2f} us, per-tensor {old[0]:.2f} us, gather {new[0]:.2f} us",
              file=sys.stderr, flush=True)

    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}; host µs per microbatch "
          f"over {args.microbatches} unsynchronised microbatches (median of {args.repeats} "
          "runs), device µs per microbatch of the same run in brackets\n")
    print("| C | cp | N | bare replay | per-tensor load_inputs + replay "
          "| gather load_inputs + replay | gather load_inputs alone "
          "| device time per gather (back to back) | same outputs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for C, cp, N, bare, old, new, load_only, gather_device, same in rows:
        cell = lambda t: f"{t[0]:.2f} [{t[1]:.2f}]"
        print(f"| {C} | {cp} | {N} | {cell(bare)} | {cell(old)} | {cell(new)} "
              f"| {cell(load_only)} | {gather_device:.2f} | {'yes' if same else 'NO'} |")
    if args.json:
        pair = lambda t: {"host_us": round(t[0], 3), "device_us": round(t[1], 3)}
        table = {
            "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "microbatches": args.microbatches, "repeats": args.repeats,
            "rows": [{"C": C, "cp": cp, "N": N, "bare_replay": pair(bare),
                      "per_tensor_load_inputs_and_replay": pair(old),
                      "gather_load_inputs_and_replay": pair(new),
                      "gather_load_inputs_alone": pair(load_only),
                      "gather_device_us_back_to_back": round(gather_device, 3),
                      "same_outputs": same}
                     for C, cp, N, bare, old, new, load_only, gather_device, same in rows]}
        with open(args.json, "w") as f:
            json.dump(table, f, indent=2)
            f.write("\n")
    return 0 if all(r[-1] for r in rows) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-bundles", metavar="DIR",
                        help="compile the steps' bundles into DIR (needs build/bin/thdc)")
    parser.add_argument("--bundles", metavar="DIR", help="bundles from --write-bundles")
    parser.add_argument("--microbatches", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", metavar="FILE", help="also write the table to FILE as JSON")
    args = parser.parse_args()
    if args.write_bundles:
        write_bundles(args.write_bundles)
        return 0
    if args.microbatches < 1000:
        parser.error("--microbatches must be >= 1000")
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
