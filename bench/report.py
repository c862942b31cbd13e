#!/usr/bin/env python3
"""Turns one benchmark run into bench/RESULTS.md, and a scaling run into a plot.

    report.py BENCH.jsonl EAGER.json MACHINE [--output RESULTS.md]
              [--scaling SCALING.jsonl EAGER_SCALING.json --plot PLOT.svg]

BENCH.jsonl comes from bench/thdc_bench (one JSON object per variant and
configuration), EAGER.json from `bench/eager.py --time --json`, MACHINE.txt
from scripts/gpu-suite.sh (date, GPU, driver, CUDA; or MACHINE.json, as a
run kept under bench/results/TOPIC/runs/ holds it: those lines, by the name
of the file they came from). The targets checked:
graph replay at most 0.9x the hand-written kernel, >= 90% of the faster
copy of the same bytes (cudaMemcpy or the copy kernel, bench/copy_kernel.h)
at C = 1,048,576 (and at 4,194,304 in the scaling run; both also reported
against the 1 GiB copy rate), >= 50x faster than eager at (32768, 2, 64),
<= 5 us of host time per plain launch.

The scaling run is thdc_bench and eager.py over bundles from 8K to 4M rows
per rank; the plot (matplotlib; SVG or PNG by the file's extension) shows
device time and bandwidth against C for thdc, the hand-written kernel,
eager and a copy of the same bytes.
"""
import argparse
import json


def load_bench(path, rates=None):
    """{(C, cp, N, mix): {variant: row}} and the empty kernel's row; the 1 GiB
    copy rates of the run go into `rates` when given."""
    by_key, floor = {}, None
    for line in open(path):
        if not line.strip().startswith("{"):
            continue
        r = json.loads(line)
        if r["variant"] == "empty_graph":
            floor = r
            continue
        if r["variant"] == "copy_1gib":
            if rates is not None:
                rates.update(r)
            continue
        by_key.setdefault((r["C"], r["cp"], r["N"], r["mix"]), {})[r["variant"]] = r
    return by_key, floor


def faster_copy(v):
    """The faster of the two copies of the same bytes (cudaMemcpy, the copy
    kernel) for one configuration, or None."""
    copies = [v[name] for name in ("copy", "copy_kernel") if name in v]
    return min(copies, key=lambda r: r["device_us"]) if copies else None


def load_eager(path):
    with open(path) as f:
        doc = json.load(f)
    return {(r["C"], r["cp"], r["N"], r["mix"]): r["median_ms"] * 1000.0 for r in doc["results"]}


def fmt(row, field, spec):
    return format(row[field], spec) if row else "n/a"


def mean(row):
    return f"{row['device_mean_us']:.2f}" if "device_mean_us" in row else "n/a"


def write_plot(scaling, eager, machine, path):
    """Two log-log panels, device time and bandwidth against C, with
    matplotlib (the format from the file's extension: .svg, .png, ...).
    False where matplotlib is not installed or there is nothing to plot."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series = [("thdc (graph replay)", "thdc_graph"),
              ("hand-written kernel (graph)", "handwritten_graph"),
              ("cudaMemcpy of the same bytes", "copy"),
              ("copy kernel, same bytes", "copy_kernel"),
              ("PyTorch eager", None)]
    mixes = sorted({k[3] for k in scaling})
    styles = {"long": "-", "short": "--"}
    figure, panels = plt.subplots(1, 2, figsize=(11, 4.2))
    plotted = False
    for index, (name, variant) in enumerate(series):
        for mix in mixes:
            points = []
            for key in sorted(scaling):
                if key[3] != mix:
                    continue
                row = scaling[key].get(variant) if variant else None
                us = row["device_us"] if row else (None if variant else eager.get(key))
                if not us:
                    continue
                reference = scaling[key].get("thdc_graph")
                gbs = reference["bytes"] / (us * 1e-6) / 1e9 if reference else None
                points.append((key[0], us, gbs))
            if len(points) < 2:
                continue
            plotted = True
            for panel, column in zip(panels, (1, 2)):
                xy = [(p[0], p[column]) for p in points if p[column]]
                panel.plot([x for x, _ in xy], [y for _, y in xy], styles.get(mix, ":"),
                           color=f"C{index}", label=name if mix == mixes[0] else None)
    if not plotted:
        plt.close(figure)
        return False
    for panel, title in zip(panels, ("device time per microbatch (µs)", "bandwidth (GB/s)")):
        panel.set_xscale("log", base=2)
        panel.set_yscale("log")
        panel.set_xlabel("C (rows per rank)")
        panel.set_title(title, fontsize=10)
        panel.grid(True, which="major", color="0.9")
    panels[0].legend(fontsize=8)
    figure.suptitle("thdc scaling, cp = 2, N = 1024 (solid: long mix, dashed: short mix); "
                    + " ".join(machine[:2]), fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True


def read_machine(path):
    """The machine's lines: MACHINE.txt's, or from a kept run's
    machine.json ({"machine.txt": [lines]}, or a list of lines)."""
    if not path.endswith(".json"):
        return open(path).read().strip().splitlines()
    with open(path) as f:
        kept = json.load(f)
    if isinstance(kept, dict):
        kept = kept.get("machine.txt") or next(iter(kept.values()), [])
    return list(kept)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bench")
    parser.add_argument("eager")
    parser.add_argument("machine")
    parser.add_argument("--output", default="-")
    parser.add_argument("--scaling", nargs=2, metavar=("SCALING_JSONL", "EAGER_JSON"))
    parser.add_argument("--plot", default="scaling.svg")
    args = parser.parse_args()

    rates = {}
    by_key, floor = load_bench(args.bench, rates)
    eager = load_eager(args.eager)
    machine = read_machine(args.machine)

    out = []
    out.append("# Benchmark results\n")
    out.append("Measured in one run on " + "; ".join(machine) + ".\n")
    out.append("Per microbatch for one CP rank (the last). Device times are the median of "
               "CUDA events around each of 200 launches; host submit is the time of the "
               "submit call alone; round trip is submit plus stream synchronisation. "
               "Bandwidth counts the rows the rank keeps (read) and its outputs (written). "
               "Eager is the project's PyTorch eager implementation of the same steps with "
               "the reference framework's host synchronisations (median of timed runs). "
               "The 1 GiB copy is a device-to-device cudaMemcpy in the same run; "
               "the size-matched copies move the same bytes as the step: cudaMemcpy, and "
               "the copy kernel (bench/copy_kernel.h: 16-byte accesses, four in flight "
               "per thread, coalesced); the faster of the two is the bar. "
               "Back-to-back is the mean of 200 replays enqueued together (events around "
               "all of them): what the step costs inside a longer stream of work.\n")
    if floor:
        out.append(f"An empty kernel replayed from a graph, timed the same way (the floor): "
                   f"{floor['device_us']:.2f} µs per replay, {floor['device_mean_us']:.2f} µs "
                   f"back-to-back.\n")
    header = ("| C | cp | N | mix | seqs | thdc launch µs | thdc graph µs | hand-written graph µs "
              "| graph / hand-written | back-to-back thdc / hand-written µs "
              "| thdc GB/s | % of 1 GiB copy | cudaMemcpy same bytes µs | copy kernel µs "
              "| % of faster copy "
              "| eager µs | eager / thdc graph | submit µs | round trip µs |")
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
        matched = faster_copy(v)
        matched_pct = (100.0 * matched["device_us"] / g["device_us"]) if matched else None
        speedup = (e / g["device_us"]) if e else None
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {g['num_seqs']} | "
                   f"{l['device_us']:.2f} | {g['device_us']:.2f} | {h['device_us']:.2f} | "
                   f"{ratio:.2f} | {mean(g)} / {mean(h)} | "
                   f"{g['bandwidth_gbs']:.0f} | {pct:.0f}% | "
                   f"{fmt(v.get('copy'), 'device_us', '.2f')} | "
                   f"{fmt(v.get('copy_kernel'), 'device_us', '.2f')} | "
                   f"{(f'{matched_pct:.0f}%' if matched_pct else 'n/a')} | "
                   f"{(f'{e:.0f}' if e else 'n/a')} | {(f'{speedup:.0f}x' if speedup else 'n/a')} | "
                   f"{l['submit_us']:.2f} | {l['round_trip_us']:.2f} |")
        verdicts.append(("graph replay <= 0.9x hand-written", key, ratio <= 0.9, f"{ratio:.2f}x"))
        if key[0] == 1048576 and matched_pct:
            verdicts.append((">= 90% of the faster copy of the same bytes", key,
                             matched_pct >= 90.0,
                             f"{matched_pct:.0f}% ({g['device_us']:.2f} against "
                             f"{matched['device_us']:.2f} µs; {pct:.0f}% of the 1 GiB copy rate)"))
        if key[:3] == (32768, 2, 64) and speedup:
            verdicts.append((">= 50x faster than eager", key, speedup >= 50.0, f"{speedup:.0f}x"))
        verdicts.append(("<= 5 us host time per plain launch", key, l["submit_us"] <= 5.0,
                         f"{l['submit_us']:.2f} us"))
    if copy_gbs:
        out.append(f"\nDevice-to-device copy of 1 GiB in this run: {copy_gbs:.0f} GB/s by "
                   f"cudaMemcpy" + (f", {rates['copy_kernel_gbs']:.0f} GB/s by the copy kernel"
                                    if "copy_kernel_gbs" in rates else "") +
                   " (bytes read + written).\n")
    out.append("\n## Targets\n")
    out.append("| target | configuration | met | measured |")
    out.append("|---|---|---|---|")
    for name, key, ok, measured in verdicts:
        out.append(f"| {name} | C={key[0]} cp={key[1]} N={key[2]} {key[3]} | "
                   f"{'yes' if ok else 'NO'} | {measured} |")
    verdicts_scaling = []
    if args.scaling:
        scaling, _ = load_bench(args.scaling[0])
        scaling_eager = load_eager(args.scaling[1])
        out.append(f"\n## Scaling\n")
        if write_plot(scaling, scaling_eager, machine, args.plot):
            out.append(f"![device time and bandwidth against C]({args.plot.split('/')[-1]})\n")
        else:
            out.append("(no plot: matplotlib is not installed here)\n")
        out.append("| C | cp | N | mix | thdc graph µs | hand-written graph µs "
                   "| cudaMemcpy same bytes µs | copy kernel µs | % of faster copy "
                   "| eager µs | thdc GB/s | faster copy GB/s (same bytes) |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for key in sorted(scaling):
            v = scaling[key]
            if "thdc_graph" not in v:
                continue
            g, h, c = v["thdc_graph"], v["handwritten_graph"], faster_copy(v)
            e = scaling_eager.get(key)
            share = 100.0 * c["device_us"] / g["device_us"] if c else None
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {g['device_us']:.2f} | "
                       f"{h['device_us']:.2f} | {fmt(v.get('copy'), 'device_us', '.2f')} | "
                       f"{fmt(v.get('copy_kernel'), 'device_us', '.2f')} | "
                       f"{(f'{share:.0f}%' if share else 'n/a')} | "
                       f"{(f'{e:.0f}' if e else 'n/a')} | {g['bandwidth_gbs']:.0f} | "
                       f"{(format(g['bytes'] / (c['device_us'] * 1e-6) / 1e9, '.0f') if c else 'n/a')} |")
            if key[0] == 4194304 and share:
                verdicts_scaling.append((key, share))
    for key, share in verdicts_scaling:
        out.append(f"\nTarget >= 90% of the faster copy of the same bytes at C={key[0]} "
                   f"cp={key[1]} N={key[2]} {key[3]}: {'met' if share >= 90.0 else 'NOT met'} "
                   f"({share:.0f}%).")
    text = "\n".join(out) + "\n"
    if args.output == "-":
        print(text, end="")
    else:
        with open(args.output, "w") as f:
            f.write(text)
        print(text, end="")


if __name__ == "__main__":
    main()
