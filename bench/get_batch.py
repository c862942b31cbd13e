#!/usr/bin/env python3
"""What one call of the batch function costs the caller, side by side in one
process: host time per call from Python and host synchronisations per call,
for

  eager      bench/eager.py's eager_step: the reference framework's per-
             microbatch preparation restated (mask, sanitise, TE-style CP
             index, sizes read back, tail and cu padding), one CP rank;
  get_batch  thdc.megatron.get_batch_on_this_rank_for_sequence_packing with
             the reference framework's arguments (tp = 1: one process, no
             collective), through a data iterator of the same batch dicts;
  step       GraphStep's load_inputs + run, the function's own work.

The microbatches are bench/inputs.py's ("long" mix) for (C, cp, N); the
eager path synchronises on every microbatch, thdc's never. Host time is the
wall time of N calls queued back to back divided by N, then one
synchronize (so a path that never waits is timed by its launches); syncs
are counted by torch.cuda.set_sync_debug_mode("warn").

  python3 bench/get_batch.py --C 8192 --cp 2 --N 64 --json out.json
"""
import argparse
import json
import os
import sys
import time
import warnings
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager  # noqa: E402
import inputs as thd_inputs  # noqa: E402

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402


class _Group:
    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


def timed(call, calls):
    """(host µs per call, syncs per call) of `calls` calls queued back to back."""
    call()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    host = time.perf_counter() - start
    torch.cuda.synchronize()
    return 1e6 * host / calls, syncs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--C", type=int, default=8192)
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    C, cp, N, rank = args.C, args.cp, args.N, 1 % args.cp
    mb = thd_inputs.generate(C, cp, N, "long", 1)
    batch = eager.framework_batch(mb, "cuda")
    config = SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                             pad_packed_seq_alignment="max", cuda_graph_impl="local")
    pg = SimpleNamespace(tp=_Group(0, 1), cp=_Group(rank, cp), pp=_Group(0, 1))
    batches = thdc.megatron.SequencePackingBatches(convention="graph")

    class Repeat:  # the same batch dict on every next(): the loader's part is not timed
        def __next__(self):
            return batch

    loader = Repeat()
    get_batch = lambda: batches(loader, pg_collection=pg, config=config)
    get_batch()
    step = batches.last.step
    slot = step.slot(0)
    results = {}
    for name, call in (("eager", lambda: eager.eager_step(batch, C, cp, N, rank)),
                       ("get_batch", get_batch),
                       ("step", lambda: (slot.load_inputs(**batch), slot.run()))):
        host_us, syncs = timed(call, args.calls)
        results[name] = {"host_us_per_call": host_us, "syncs_per_call": syncs}
    print(f"C={C} cp={cp} N={N}, {args.calls} calls, {torch.cuda.get_device_name()}")
    base = results["eager"]["host_us_per_call"]
    for name, figures in results.items():
        print(f"{name:>10}: {figures['host_us_per_call']:8.1f} µs/call host "
              f"({base / figures['host_us_per_call']:.1f}x eager's), "
              f"{figures['syncs_per_call']} syncs/call")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"C": C, "cp": cp, "N": N, "calls": args.calls,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
