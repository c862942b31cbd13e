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
are counted by torch.cuda.set_sync_debug_mode("warn") over 5 calls (timed()
says why the first call in that mode is not counted).

  python3 bench/get_batch.py --C 8192 --cp 2 --N 64 --json out.json

With --dynamic-cp W the same for dynamic CP over W DP x CP ranks (rank 1),
every CP size of dynamic_cp_sizes(W) in turn, each with a microbatch of its
own size: get_batch with dynamic_cp=True (the batch's local_cp_size a host
int), the step's own `step(**batch, local_cp_size=s)` and the variant's
load_inputs + run; beside them the fixed-CP get_batch and step at W.

  python3 bench/get_batch.py --C 8192 --N 64 --dynamic-cp 4 --json out.json
"""
import argparse
import json
import statistics
import os
import sys
import warnings
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager  # noqa: E402
import inputs as thd_inputs  # noqa: E402
import timing  # noqa: E402

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402


class _Group:
    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


ROUNDS = 5  # --dynamic-cp: rounds of every path, interleaved
SYNC_CALLS = 5  # calls whose synchronisations are counted, after one uncounted


def timed(call, calls):
    """(host µs per call, syncs per call) of `calls` calls queued back to back;
    the syncs counted over SYNC_CALLS calls under sync-debug "warn", after
    one call in that mode that is not counted (the first call there can
    report a synchronisation once per process, whichever path it is: that is
    not the path's per-call cost). A path that synchronises is called once
    more under "error" and the traceback printed, to say where."""
    call()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
            torch.cuda.synchronize()
            caught.clear()
            for _ in range(SYNC_CALLS):
                call()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught) / SYNC_CALLS
    torch.cuda.synchronize()
    if syncs:
        import traceback

        torch.cuda.set_sync_debug_mode("error")
        try:
            call()
        except RuntimeError:
            print("a synchronising call:\n" + traceback.format_exc(limit=-6), file=sys.stderr)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    return host_time(call, calls), syncs


def host_time(call, calls):
    """Host µs per call of `calls` calls queued back to back (the window
    closes when the last call returns; the synchronize follows it)."""
    return timing.host_time(call, calls, sync_inside=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--C", type=int, default=8192)
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json")
    parser.add_argument("--dynamic-cp", type=int, metavar="W",
                        help="measure dynamic CP over W DP x CP ranks instead")
    args = parser.parse_args(argv)
    if args.dynamic_cp:
        return dynamic_cp(args)
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
              f"{figures['syncs_per_call']:g} syncs/call")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"C": C, "cp": cp, "N": N, "calls": args.calls,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": results}, out, indent=1)


def dynamic_cp(args):
    """--dynamic-cp W: host time per call of each dynamic-CP path beside the
    fixed-CP ones, cycling through the sizes."""
    import thdc.planner

    C, N, W, rank = args.C, args.N, args.dynamic_cp, 1
    sizes = thdc.planner.dynamic_cp_sizes(W, rank=rank)
    batches_of = {s: eager.framework_batch(thd_inputs.generate(C, s, N, "long", s), "cuda")
                  for s in sizes}
    config = SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                             pad_packed_seq_alignment="max", cuda_graph_impl="local",
                             context_parallel_size=1)
    dynamic_config = SimpleNamespace(**vars(config), dynamic_context_parallel=True,
                                     min_dynamic_context_parallel_size=1)
    pg = SimpleNamespace(tp=_Group(0, 1), cp=_Group(0, 1), pp=_Group(0, 1),
                         dp_cp=_Group(rank, W))
    fixed_pg = SimpleNamespace(tp=_Group(0, 1), cp=_Group(rank, W), pp=_Group(0, 1))
    dynamic = thdc.megatron.SequencePackingBatches(convention="graph",
                                                   cp_groups={s: None for s in sizes})
    fixed = thdc.megatron.SequencePackingBatches(convention="graph")
    fixed_config = SimpleNamespace(**dict(vars(config), context_parallel_size=W))

    class Cycle:  # each size's batch dict in turn, its local_cp_size a host int
        def __init__(self):
            self.i = 0
            self.dicts = [dict(batches_of[s], local_cp_size=s) for s in sizes]

        def __next__(self):
            item = self.dicts[self.i % len(sizes)]
            self.i += 1
            return item

    cycle = Cycle()
    top = batches_of[W]

    class Repeat:
        def __next__(self):
            return top

    repeat = Repeat()
    get_dynamic = lambda: dynamic(cycle, dynamic_cp=True, pg_collection=pg,
                                  config=dynamic_config)
    get_fixed = lambda: fixed(repeat, pg_collection=fixed_pg, config=fixed_config)
    get_dynamic(), get_fixed()
    step, fixed_step = dynamic.last.step, fixed.last.step
    slot, fixed_slot = step.slot(0), fixed_step.slot(0)
    turn = [0]

    def step_call():
        s = sizes[turn[0] % len(sizes)]
        turn[0] += 1
        step(**batches_of[s], local_cp_size=s)

    def variant_call():
        s = sizes[turn[0] % len(sizes)]
        turn[0] += 1
        variant = slot.variant(s)
        variant.load_inputs(**batches_of[s])
        variant.run()

    # The paths interleaved over ROUNDS rounds, each the median of its
    # rounds: the host's speed drifts between rounds (and machines), the
    # side-by-side ratio less.
    paths = (("get_batch_fixed", get_fixed), ("get_batch_dynamic", get_dynamic),
             ("step_fixed", lambda: (fixed_slot.load_inputs(**top), fixed_slot.run())),
             ("step_dynamic", step_call), ("variant_dynamic", variant_call))
    results = {}
    for name, call in paths:
        host_us, syncs = timed(call, args.calls)
        results[name] = {"syncs_per_call": syncs, "rounds_us": [host_us]}
    for _ in range(ROUNDS - 1):
        for name, call in paths:
            results[name]["rounds_us"].append(host_time(call, args.calls))
    for figures in results.values():
        figures["host_us_per_call"] = statistics.median(figures["rounds_us"])
    # Device time of one replay of each size's variant, captured alone.
    device_us = {}
    for s in sizes:
        variant = slot.variant(s)
        variant.load_inputs(**batches_of[s])
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            variant.run()
            torch.cuda.synchronize()
            with torch.cuda.graph(graph, stream=side):
                variant.run()
        torch.cuda.current_stream().wait_stream(side)
        device_us[str(s)] = timing.replay_time(graph.replay, args.calls, settle=True)
    print(f"dynamic CP over W={W} ranks (rank {rank}, sizes {list(sizes)}), C={C} N={N}, "
          f"{args.calls} calls, {torch.cuda.get_device_name()}")
    base = results["get_batch_fixed"]["host_us_per_call"]
    for name, figures in results.items():
        print(f"{name:>18}: {figures['host_us_per_call']:8.1f} µs/call host, median of "
              f"{ROUNDS} rounds ({min(figures['rounds_us']):.1f}-"
              f"{max(figures['rounds_us']):.1f}; {figures['host_us_per_call'] / base:.2f}x "
              f"get_batch_fixed's), {figures['syncs_per_call']:g} syncs/call")
    print("one replay of each size's variant (graph, device time): " +
          ", ".join(f"size {s}: {t:.2f} µs" for s, t in device_us.items()))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"C": C, "N": N, "W": W, "rank": rank, "sizes": list(sizes),
                       "calls": args.calls, "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "results": results,
                       "replay_device_us": device_us}, out, indent=1)


if __name__ == "__main__":
    main()
