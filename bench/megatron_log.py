#!/usr/bin/env python3
"""Megatron-LM's own training log as figures: what a Megatron user reads,
parsed instead of re-measured.

Megatron-LM prints one line per log interval (training_log,
megatron/training/training.py:3403-3456 on dev d48bd6be0a):

  [2026-12-07 10:00:00.000000] iteration       20/     300 | consumed samples: 640 |
  elapsed time per iteration (ms): 142.7 | throughput per GPU (TFLOP/s/GPU): 91.3 |
  learning rate: 1.000000E-04 | global batch size:    32 | lm loss: 6.123456E+00 |
  loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 |
  number of nan iterations:   0 |

(one line; `elapsed time per iteration` is the mean over the iterations
since the line before), and its memory reports as

  [Rank 0] (after 10 iterations) memory (MB) | allocated: ... | max allocated: ...
  | reserved: ... | max reserved: ...

(report_memory, megatron/training/utils/common_utils.py:296-317). A run of
bench/megatron_pretrain.py --count-syncs adds, at exit,

  [Rank 0] (at exit) host synchronisations | iterations: 30 | per iteration
  median: 4 | max: 6 | total: 130 | forward backward median: 0 | forward
  backward max: 2 | forward backward none: 28

(one line: the synchronizing calls inside each of Megatron's train_step, and
within it in its forward_backward_func),
and thdc's launcher (thdc.megatron.run) says at exit how many microbatches
ran at each rung of its ladder and how its whole-iteration graphs ran:

  thdc.megatron.run: microbatches by rung (rows: count): 2048: 700, 4096: 300,
  8192: 50; 38.1% of the rows at the top rung alone
  thdc.megatron.run: whole-iteration graphs (training): 2 eager, 31 captured,
  267 replayed iterations (40 shapes met; 12 run at a larger shape, 4096 rows
  added; capture 20.5 s)

  python3 bench/megatron_log.py LOG[.xz] [--steady-from ITERATION] [--json OUT]

prints the whole run (every logged iteration: the mean time per iteration
over them, captures and warm-up included) beside the steady state (the
median of the intervals that start at or after --steady-from, default: the
second half of the run), the losses at each logged iteration, the peak
memory, and the skipped and NaN iterations."""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from typing import Dict, List, Optional

_ITERATION = re.compile(r"iteration\s+(\d+)/\s*(\d+)\s*\|")
_FIELD = re.compile(r"\|?\s*([A-Za-z][A-Za-z0-9 /()_.-]*?):\s*([-+0-9.eE]+|nan|inf)\s*\|")
_MEMORY = re.compile(r"\[Rank (\d+)\] (.*?) memory \(MB\)((?:\s*\|\s*[a-z ]+: [0-9.]+)+)")
_RUNGS = re.compile(r"thdc\.megatron\.run: microbatches by rung \(rows: count\): (.*?); "
                    r"([0-9.]+)% of the rows at the top rung alone")
_GRAPHS = re.compile(r"thdc\.megatron\.run: whole-iteration graphs \(training\): (\d+) eager, "
                     r"(\d+) captured, (\d+) replayed iterations \((\d+) shapes met; (\d+) run "
                     r"at a larger shape, (\d+) rows added; capture ([0-9.]+) s\)")
_SYNCS = re.compile(r"\[Rank \d+\] \(at exit\) host synchronisations((?:\s*\|\s*[a-z ]+: [0-9.]+)+)")

# The fields of a log line that are not losses (every other "name: number"
# field is a loss: total_loss_dict's keys, training.py:3435-3441).
_NOT_LOSSES = {
    "consumed samples", "skipped samples", "elapsed time per iteration (ms)",
    "throughput per GPU (TFLOP/s/GPU)", "energy per GPU (J/iter/GPU)", "power per GPU (W/GPU)",
    "learning rate", "global batch size", "loss scale", "grad norm", "num zeros",
    "params norm", "number of skipped iterations", "number of nan iterations",
}


def _fields(text: str) -> Dict[str, float]:
    """The "| name: number" fields of a report line (memory, syncs)."""
    return {k.strip(): float(v) for k, v in re.findall(r"\|\s*([a-z ]+): ([0-9.]+)", text)}


def parse(lines) -> Dict[str, list]:
    """{"intervals": one dict per log line, "memory": one per memory
    report, "syncs": the host synchronisations' line as a dict, "thdc":
    the launcher's lines at exit (rungs, iteration_graphs)}; other lines are
    ignored."""
    intervals, memory, syncs, thdc = [], [], None, {}
    for line in lines:
        found = _ITERATION.search(line)
        if found:
            record = {"iteration": int(found.group(1)), "train_iters": int(found.group(2)),
                      "losses": {}}
            for name, value in _FIELD.findall(line[found.end() - 1:]):
                name = name.strip()
                number = float(value)
                if name in _NOT_LOSSES:
                    record[name] = number
                else:
                    record["losses"][name] = number
            intervals.append(record)
            continue
        found = _MEMORY.search(line)
        if found:
            fields = _fields(found.group(3))
            memory.append({"rank": int(found.group(1)), "when": found.group(2).strip(), **fields})
            continue
        found = _SYNCS.search(line)
        if found:
            syncs = _fields(found.group(1))
            continue
        found = _RUNGS.search(line)
        if found:
            thdc["rungs"] = {int(rows): int(count) for rows, count in
                             re.findall(r"(\d+): (\d+)", found.group(1))}
            thdc["rows_of_top_rung"] = float(found.group(2)) / 100.0
            continue
        found = _GRAPHS.search(line)
        if found:
            keys = ("eager", "captured", "replayed", "shapes", "promoted", "promoted_rows")
            thdc["iteration_graphs"] = dict(zip(keys, map(int, found.groups()[:6])),
                                            capture_s=float(found.group(7)))
    return {"intervals": intervals, "memory": memory, "syncs": syncs, "thdc": thdc}


def summarise(parsed: Dict[str, list], steady_from: Optional[int] = None) -> dict:
    """The run's figures from parse()'s records: ValueError when the log has
    no iteration line."""
    intervals = parsed["intervals"]
    if not intervals:
        raise ValueError("the log has no 'iteration N/M |' line of Megatron's training_log")
    spans, previous = [], 0
    for record in intervals:
        ms = record.get("elapsed time per iteration (ms)")
        if ms is not None and record["iteration"] > previous:
            spans.append((previous, record["iteration"], ms))
        previous = record["iteration"]
    last = intervals[-1]["iteration"]
    if steady_from is None:
        steady_from = last // 2
    total_ms = sum((end - start) * ms for start, end, ms in spans)
    timed = sum(end - start for start, end, _ in spans)
    steady = [ms for start, _, ms in spans if start >= steady_from]
    losses: Dict[str, List[list]] = {}
    for record in intervals:
        for name, value in record["losses"].items():
            losses.setdefault(name, []).append([record["iteration"], value])
    result = {
        "iterations": last,
        "whole_run_ms_per_iteration": total_ms / timed if timed else None,
        "whole_run_seconds": total_ms / 1000.0,
        "steady_from": steady_from,
        "steady_ms_per_iteration": statistics.median(steady) if steady else None,
        "steady_intervals": len(steady),
        "steady_min_max_ms": [min(steady), max(steady)] if steady else None,
        "losses": losses,
        "skipped_iterations": sum(r.get("number of skipped iterations", 0) for r in intervals),
        "nan_iterations": sum(r.get("number of nan iterations", 0) for r in intervals),
    }
    tflops = [r["throughput per GPU (TFLOP/s/GPU)"] for r in intervals
              if "throughput per GPU (TFLOP/s/GPU)" in r and r["iteration"] > steady_from]
    result["steady_tflops_per_gpu"] = statistics.median(tflops) if tflops else None
    for key in ("max allocated", "max reserved"):
        values = [m[key] for m in parsed["memory"] if key in m]
        result[f"peak_{key.replace(' ', '_')}_mb"] = max(values) if values else None
    result.update(parsed.get("thdc") or {})
    syncs = parsed.get("syncs")
    result["syncs_per_iteration"] = None if syncs is None else {
        "median": syncs.get("per iteration median"), "max": syncs.get("max"),
        "iterations": syncs.get("iterations"),
        "forward_backward_median": syncs.get("forward backward median"),
        "forward_backward_max": syncs.get("forward backward max"),
        # the iterations whose forward_backward_func made none
        "forward_backward_none": syncs.get("forward backward none")}
    return result


def _open(path: str):
    """A log as text, xz-compressed (LOG.xz, as bench results keep them) or not."""
    if path.endswith(".xz"):
        import lzma
        return lzma.open(path, "rt", errors="replace")
    return open(path, errors="replace")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", help="Megatron-LM's training output (stdout of rank last)")
    parser.add_argument("--steady-from", type=int, metavar="ITERATION",
                        help="the steady state's first iteration (default: half the run)")
    parser.add_argument("--json", metavar="OUT", help="write the figures here")
    args = parser.parse_args(argv)
    with _open(args.log) as f:
        try:
            result = summarise(parse(f), args.steady_from)
        except ValueError as error:
            parser.error(f"{args.log}: {error}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    whole, steady = result["whole_run_ms_per_iteration"], result["steady_ms_per_iteration"]
    print(f"{result['iterations']} iterations: whole run "
          f"{whole:.1f} ms/iter ({result['whole_run_seconds']:.1f} s), steady state "
          + (f"{steady:.1f} ms/iter (median of {result['steady_intervals']} intervals from "
             f"iteration {result['steady_from']})" if steady is not None else "none"))
    for name, points in result["losses"].items():
        print(f"{name}: {points[0][1]:.4f} at {points[0][0]} -> {points[-1][1]:.4f} at "
              f"{points[-1][0]}")
    print(f"skipped {result['skipped_iterations']:.0f}, NaN {result['nan_iterations']:.0f}; "
          f"peak max allocated {result['peak_max_allocated_mb']} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
