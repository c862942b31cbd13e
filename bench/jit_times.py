#!/usr/bin/env python3
"""How long thdc.compile takes: cold, disk-cache hit, memory-cache hit.

Each cold compile and each disk-cache hit runs in a new Python process (the
JIT's one-time costs, such as touching the compiler's code, are part of a
cold compile in a training job too); the time is the JIT's own
(`compile_info["micros"]`: from the call to a loaded module), plus the wall
time of the whole call. After each disk-cache hit on the GPU it times the
first launch + synchronize against the fastest later one: work that a lazy
module load leaves to the first launch is part of a hit's real cost. Cold compiles use an empty cache folder each and
CUDA_CACHE_DISABLE=1, so that neither thdc nor the driver has the kernel.

    PYTHONPATH=build/python python3 bench/jit_times.py --json out.json
    python3 bench/jit_times.py --backend host        # without a GPU

Environment switches of the JIT (THDC_PTX_COMPILER, THDC_PTX_OPT_LEVEL, see
README "JIT environment variables") pass through to the child processes, so
`THDC_PTX_COMPILER=driver python3 bench/jit_times.py` times the driver's
PTX compile against the default.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import ctypes, json, sys
import thdc
args = json.loads(sys.argv[1])
sys.path.append(args["bench"])
from timing import host_window
text = open(args["pipeline"]).read()
cuda = args["backend"] == "cuda"
driver = ctypes.CDLL("libcuda.so.1") if cuda else None

def check(result, call):
    if result != 0:
        raise RuntimeError(f"{call}: CUDA error {result}")

def make_context_current():
    # The device's primary context (PyTorch's), made current on this thread.
    check(driver.cuInit(0), "cuInit")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    check(driver.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
          "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")

# A training process has its CUDA context before it compiles: create it
# first (through PyTorch where it is installed, else the driver's primary
# context) and time it apart.
context = None
if cuda and args["warm_context"]:
    with host_window() as window:
        try:
            import torch
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
        except ImportError:
            make_context_current()
    context = window.micros
with host_window() as window:
    kernel = thdc.compile(text, args["params"], backend=args["backend"],
                          cache_dir=args["cache_dir"], chip=args["chip"])
first = window.micros
info = dict(kernel.compile_info)
with host_window() as window:
    again = thdc.compile(text, args["params"], backend=args["backend"],
                         cache_dir=args["cache_dir"], chip=args["chip"])
memory = window.micros

# The first launch (+ synchronize) after the compile, against later ones: a
# module load that left work for the first launch (lazy loading) shows up as
# the difference. Zeroed buffers (empty sequences), allocated and written
# before the timing.
launches = None
if cuda and args["launches"]:
    make_context_current()  # thdc leaves the caller's context as it was
    itemsize = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
                "float32": 4, "float64": 8}
    pointers = []
    for name, dtype, shape, direction in kernel.signature:
        size = max(itemsize[dtype] * shape[0], 1)
        pointer = ctypes.c_uint64()
        check(driver.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)),
              "cuMemAlloc")
        check(driver.cuMemsetD8_v2(pointer, ctypes.c_ubyte(0),
                                   ctypes.c_size_t(size)), "cuMemsetD8")
        pointers.append(pointer.value)
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    launches = []
    for _ in range(args["launches"]):
        with host_window() as window:
            kernel.launch_pointers(pointers)
            check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        launches.append(window.micros)
    for pointer in pointers:
        driver.cuMemFree_v2(ctypes.c_uint64(pointer))
print(json.dumps({"info": info, "call_micros": first, "context_micros": context,
                  "memory": dict(again.compile_info),
                  "memory_call_micros": memory, "launch_micros": launches}))
"""


def run_child(args, cache_dir, extra_env):
    env = dict(os.environ)
    env.update(extra_env)
    payload = json.dumps({
        "pipeline": args.pipeline,
        "params": args.params,
        "backend": args.backend,
        "cache_dir": cache_dir,
        "chip": args.chip,
        "warm_context": not args.cold_context,
        "launches": args.launches,
        "bench": os.path.dirname(os.path.abspath(__file__)),
    })
    out = subprocess.run([sys.executable, "-c", CHILD, payload], env=env,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(values):
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline",
                        default=os.path.join(ROOT, "examples",
                                             "megatron_graph_step.mlir"))
    parser.add_argument("--param", action="append", default=[],
                        help="NAME=VALUE (default C=32768 cp=2 N=64)")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--chip", default="")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--hit-runs", type=int, default=9)
    parser.add_argument("--cold-context", action="store_true",
                        help="let the JIT's module load create the process's CUDA "
                             "context (default: PyTorch creates it first, as in training)")
    parser.add_argument("--launches", type=int, default=5,
                        help="launches (+ synchronize) timed after each "
                             "disk-cache hit on the GPU, the first apart from "
                             "the others (0: none)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    args.params = {"C": 32768, "cp": 2, "N": 64}
    for item in args.param:
        name, _, value = item.partition("=")
        args.params[name] = int(value)

    rows = {}
    cold_env = {"CUDA_CACHE_DISABLE": "1"}
    cold, cold_calls, compile_part, load_part, contexts = [], [], [], [], []
    keep = tempfile.mkdtemp(prefix="thdc-jit-times-")
    os.chmod(keep, 0o700)
    try:
        for i in range(args.cold_runs):
            folder = os.path.join(keep, f"cold-{i}")
            result = run_child(args, folder, cold_env)
            info = result["info"]
            if info["source"] != "compiled":
                sys.exit(f"expected a compile, got {info['source']}")
            if result["context_micros"] is not None:
                contexts.append(result["context_micros"])
            cold.append(info["micros"])
            cold_calls.append(result["call_micros"])
            compile_part.append(info["compile_micros"])
            load_part.append(info["load_micros"])
        warm_folder = os.path.join(keep, "cold-0")
        hits, hit_calls, memory = [], [], []
        first_launch, later_launch = [], []
        for _ in range(args.hit_runs):
            result = run_child(args, warm_folder, {})
            info = result["info"]
            if info["source"] != "disk-cache":
                sys.exit(f"expected a disk-cache hit, got {info['source']} "
                         f"({info.get('cache_note', '')})")
            hits.append(info["micros"])
            hit_calls.append(result["call_micros"])
            memory.append(result["memory"]["micros"])
            if result["launch_micros"]:
                first_launch.append(result["launch_micros"][0])
                if len(result["launch_micros"]) > 1:
                    later_launch.append(min(result["launch_micros"][1:]))
    finally:
        shutil.rmtree(keep, ignore_errors=True)

    if contexts:
        rows["CUDA context, before (not in)"] = summary(contexts)
    rows["cold compile (JIT)"] = summary(cold)
    rows["  of which compiler"] = summary(compile_part)
    rows["  of which module load"] = summary(load_part)
    rows["cold compile (Python call)"] = summary(cold_calls)
    rows["disk-cache hit (JIT)"] = summary(hits)
    rows["disk-cache hit (Python call)"] = summary(hit_calls)
    if first_launch:
        rows["  then first launch+sync"] = summary(first_launch)
    if later_launch:
        rows["  then later launch+sync"] = summary(later_launch)
    rows["memory-cache hit (JIT)"] = summary(memory)

    print(f"{args.pipeline} {args.params} backend={args.backend}")
    print(f"{'':32} {'median ms':>10} {'min ms':>9} {'max ms':>9} {'runs':>5}")
    for name, row in rows.items():
        print(f"{name:32} {row['median'] / 1e3:10.3f} {row['min'] / 1e3:9.3f} "
              f"{row['max'] / 1e3:9.3f} {row['runs']:5d}")
    if args.json:
        report = {
            "pipeline": args.pipeline,
            "params": args.params,
            "backend": args.backend,
            "environment": {k: v for k, v in os.environ.items()
                            if k.startswith("THDC_") or k.startswith("CUDA_")},
            "micros": rows,
        }
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)


if __name__ == "__main__":
    main()
