#!/usr/bin/env python3
"""Turns one benchmark run into bench/RESULTS.md.

    report.py BENCH.jsonl EAGER.json MACHINE.txt [--output RESULTS.md]

BENCH.jsonl comes from bench/thdc_bench (one JSON object per variant and
configuration), EAGER.json from `bench/eager.py --time --json`, MACHINE.txt
from scripts/gpu-suite.sh (date, GPU, driver, CUDA). The targets checked are
those of the benchmark: graph replay no slower than the hand-written kernel,
>= 85% of the device-to-device copy bandwidth at C = 1,048,576, >= 50x faster
than eager at (32768, 2, 64), <= 5 us of host time per plain launch.
"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bench")
    parser.add_argument("eager")
    parser.add_argument("machine")
    parser.add_argument("--output", default="-")
    args = parser.parse_args()

    rows = [json.loads(line) for line in open(args.bench) if line.strip().startswith("{")]
    eager = {}
    with open(args.eager) as f:
        eager_doc = json.load(f)
    for r in eager_doc["results"]:
        eager[(r["C"], r["cp"], r["N"], r["mix"])] = r["median_ms"] * 1000.0
    machine = open(args.machine).read().strip().splitlines()

    by_key = {}
    for r in rows:
        by_key.setdefault((r["C"], r["cp"], r["N"], r["mix"]), {})[r["variant"]] = r

    out = []
    out.append("# Benchmark results\n")
    out.append("Measured in one run on " + "; ".join(machine) + ".\n")
    out.append("Per microbatch for one CP rank (the last). Device times are the median of "
               "CUDA events around each of 200 launches; host submit is the time of the "
               "submit call alone; round trip is submit plus stream synchronisation. "
               "Bandwidth counts the rows the rank keeps (read) and its outputs (written). "
               "Eager is the project's PyTorch eager implementation of the same steps with "
               "the reference framework's host synchronisations (median of timed runs). "
               "The copy is a 1 GiB device-to-device cudaMemcpy in the same run.\n")
    header = ("| C | cp | N | mix | seqs | thdc launch µs | thdc graph µs | hand-written graph µs "
              "| graph / hand-written | thdc GB/s | % of copy | eager µs | eager / thdc graph "
              "| submit µs | round trip µs |")
    out.append(header)
    out.append("|" + "---|" * header.count("|")[:-1] if False else
               "|" + "|".join(["---"] * (header.count("|") - 1)) + "|")
    verdicts = []
    copy_gbs = None
    for key in sorted(by_key):
        v = by_key[key]
        if "thdc_graph" not in v or "handwritten_graph" not in v:
            continue
        g, l, h = v["thdc_graph"], v["thdc_launch"], v["handwritten_graph"]
        copy_gbs = g["copy_gbs"]
        e = eager.get(key)
        ratio = g["device_us"] / h["device_us"]
        pct = 100.0 * g["bandwidth_gbs"] / g["copy_gbs"]
        speedup = (e / g["device_us"]) if e else None
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {g['num_seqs']} | "
                   f"{l['device_us']:.2f} | {g['device_us']:.2f} | {h['device_us']:.2f} | "
                   f"{ratio:.2f} | {g['bandwidth_gbs']:.0f} | {pct:.0f}% | "
                   f"{(f'{e:.0f}' if e else 'n/a')} | {(f'{speedup:.0f}x' if speedup else 'n/a')} | "
                   f"{l['submit_us']:.2f} | {l['round_trip_us']:.2f} |")
        verdicts.append(("graph replay <= hand-written", key, ratio <= 1.0, f"{ratio:.2f}x"))
        if key[0] == 1048576:
            verdicts.append((">= 85% of copy bandwidth", key, pct >= 85.0, f"{pct:.0f}%"))
        if key[:3] == (32768, 2, 64) and speedup:
            verdicts.append((">= 50x faster than eager", key, speedup >= 50.0, f"{speedup:.0f}x"))
        verdicts.append(("<= 5 us host time per plain launch", key, l["submit_us"] <= 5.0,
                         f"{l['submit_us']:.2f} us"))
    if copy_gbs:
        out.append(f"\nDevice-to-device copy in this run: {copy_gbs:.0f} GB/s (bytes read + written).\n")
    out.append("\n## Targets\n")
    out.append("| target | configuration | met | measured |")
    out.append("|---|---|---|---|")
    for name, key, ok, measured in verdicts:
        out.append(f"| {name} | C={key[0]} cp={key[1]} N={key[2]} {key[3]} | "
                   f"{'yes' if ok else 'NO'} | {measured} |")
    text = "\n".join(out) + "\n"
    if args.output == "-":
        print(text, end="")
    else:
        with open(args.output, "w") as f:
            f.write(text)
        print(text, end="")


if __name__ == "__main__":
    main()
