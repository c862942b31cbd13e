#!/usr/bin/env python3
"""thdc from Python on a GPU: the host time of one call with the outputs
given, and the device time of a graph replay captured from Python, for the
benchmark's bundles (bench/inputs.py data, the last CP rank, as
bench/thdc_bench does for the C++ path).

    python3 bench/python_call.py BUNDLE_ROOT [--json FILE] [--cpp BENCH.jsonl]

Host time: calls are issued in bursts of 200 (well under the driver's launch
queue, so the GPU never holds the host back), each burst timed with a host
clock; the median burst's time per call is reported, for thdc's checked
call on torch tensors and for `launch_pointers` (the C++ launch path with no
argument checks). Device time: one call captured in torch.cuda.graph, and
the same launch captured by the runtime's own CapturedLaunch (the C++ path),
each timed three ways (replay_micros). With --cpp (thdc_bench's output from
the same run) the Markdown table also shows thdc_bench's graph timing.
The drop-in's per-microbatch host cost (thdc.megatron load_inputs + replay)
is bench/load_inputs.py's."""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import inputs as bench_inputs  # noqa: E402
import timing  # noqa: E402
import thdc  # noqa: E402

NAMES = ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens",
         "cu_seqlens_padded", "num_seqs", "cp_rank")


def host_micros_per_call(call, bursts=50, burst=200):
    for _ in range(5 * burst):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(bursts):
        with timing.host_window() as window:
            for _ in range(burst):
                call()
        samples.append(window.micros / burst)
        torch.cuda.synchronize()
    return statistics.median(samples)


def replay_micros(replay, iterations=1000, batch=200):
    """Three timings of a replay: `latency`, CUDA events around each replay
    issued to an idle GPU (so the host's submission is inside the pair, as
    thdc_bench's device_us); `device`, events around each replay while a
    sleeping kernel holds the GPU until every replay of a batch is queued (so
    a pair spans the replay's own device time); `mean`, back-to-back replays."""
    for _ in range(50):
        replay()
    torch.cuda.synchronize()

    windows = timing.device_windows(iterations)
    for window in windows:
        with window:
            replay()
        window.wait()
    latency = statistics.median(window.micros for window in windows)
    device = []
    for _ in range(iterations // batch):
        windows = timing.device_windows(batch)
        torch.cuda._sleep(20_000_000)  # ~10 ms at 2 GHz: longer than queueing a batch
        for window in windows:
            with window:
                replay()
        torch.cuda.synchronize()
        device += [window.micros for window in windows]
    whole = timing.device_window()
    with whole:
        for _ in range(iterations):
            replay()
    torch.cuda.synchronize()
    return {"latency": latency, "device": statistics.median(device),
            "mean": whole.micros / iterations}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle_root")
    parser.add_argument("--json", default=None)
    parser.add_argument("--cpp", default=None, help="thdc_bench output of the same run")
    args = parser.parse_args()
    rows = []
    # A stream of its own: the runtime's capture refuses the legacy default
    # stream, which is PyTorch's current stream unless one is set.
    stream_scope = torch.cuda.stream(torch.cuda.Stream())
    stream_scope.__enter__()
    for C, cp, N in bench_inputs.CONFIGS:
        path = os.path.join(args.bundle_root, f"C{C}_cp{cp}_N{N}")
        if not os.path.isdir(path):
            print(f"skipping {path}: no bundle", file=sys.stderr)
            continue
        kernel = thdc.load(path, backend="cuda")
        for mix in ("long", "short"):
            mb = bench_inputs.generate(C, cp, N, mix, 1)
            data = bench_inputs.pipeline_inputs(mb, cp - 1)
            dtypes = {"loss_mask": torch.float32, "cu_seqlens": torch.int32,
                      "cu_seqlens_padded": torch.int32, "num_seqs": torch.int32,
                      "cp_rank": torch.int32}
            ins = [torch.tensor(data[n], dtype=dtypes.get(n, torch.int64), device="cuda")
                   for n in NAMES]
            outs = list(kernel(*ins))
            expected = thdc.reference.graph_step(*(t.cpu().numpy() for t in ins[:6]),
                                                 mb.num_seqs, cp - 1, C, cp, N)
            ok = torch.equal(outs[0].cpu(), torch.from_numpy(expected["tokens"])) and \
                int(outs[8].item()) == expected["status"]
            pointers = [t.data_ptr() for t in ins + outs]
            stream = torch.cuda.current_stream().cuda_stream
            checked = host_micros_per_call(lambda: kernel(*ins, out=outs))
            raw = host_micros_per_call(lambda: kernel.launch_pointers(pointers, stream))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                kernel(*ins, out=outs)
            torch_graph = replay_micros(graph.replay)
            runtime_graph = thdc._thdc.capture_pointers(kernel, pointers, stream)
            cpp_graph = replay_micros(lambda: runtime_graph.replay(stream))
            row = {"C": C, "cp": cp, "N": N, "mix": mix, "num_seqs": mb.num_seqs,
                   "tensors": len(ins) + len(outs), "correct": ok,
                   "python_call_us": round(checked, 3),
                   "launch_pointers_us": round(raw, 3),
                   "device": torch.cuda.get_device_name()}
            for name, timing in (("torch_graph", torch_graph), ("runtime_graph", cpp_graph)):
                for key, value in timing.items():
                    row[f"{name}_{key}_us"] = round(value, 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    if args.cpp:
        cpp = {}
        with open(args.cpp) as f:
            for line in f:
                entry = json.loads(line)
                if entry.get("variant") == "thdc_graph":
                    cpp[(entry["C"], entry["cp"], entry["N"], entry["mix"])] = entry
        print("\n| C | cp | N | mix | Python call, outputs given (µs, host) "
              "| launch_pointers (µs, host) | device time of a replay: torch.cuda.graph "
              "/ runtime graph (µs) | replay, back to back: torch / runtime (µs) "
              "| events around a replay on an idle GPU: torch / runtime / thdc_bench (µs) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            c = cpp.get((r["C"], r["cp"], r["N"], r["mix"]), {})
            print(f"| {r['C']} | {r['cp']} | {r['N']} | {r['mix']} | {r['python_call_us']:.2f} "
                  f"| {r['launch_pointers_us']:.2f} "
                  f"| {r['torch_graph_device_us']:.2f} / {r['runtime_graph_device_us']:.2f} "
                  f"| {r['torch_graph_mean_us']:.2f} / {r['runtime_graph_mean_us']:.2f} "
                  f"| {r['torch_graph_latency_us']:.2f} / {r['runtime_graph_latency_us']:.2f} "
                  f"/ {c.get('device_us', float('nan')):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
