#!/usr/bin/env python3
"""Turns the JSON results of train.py (one file per preset and C) into a
Markdown table and an SVG plot of the loss curves: one panel per run, drawn
with matplotlib where it is installed, else by a small SVG writer of its own.

  python3 examples/train/report.py small.json medium.json \
      --svg examples/train/loss.svg > examples/train/RESULTS.md
"""
import argparse
import html
import json
import math
import os
import sys

MODE_ORDER = ("eager", "thdc-eager", "thdc-graphs", "thdc-layer-graphs", "thdc-ladder",
              "thdc-exact", "eager-again")
FIRST = 5  # steps whose losses are compared one by one
SMOOTHING = 10  # steps in the moving mean of the smoothed difference
COLOURS = {"eager": "#d62728", "thdc-eager": "#1f77b4", "thdc-graphs": "#2ca02c",
           "thdc-layer-graphs": "#9467bd", "thdc-ladder": "#ff7f0e",
           "thdc-exact": "#17becf", "eager-again": "#7f7f7f"}
DASHES = {"thdc-graphs": "6 4", "thdc-layer-graphs": "2 3"}  # curves that lie on others


def moving_mean(values, width=SMOOTHING):
    """The mean of each window of `width` consecutive values."""
    return [sum(values[i:i + width]) / width for i in range(len(values) - width + 1)] or values


def fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def on_cpu(result):
    """Whether the run was on the CPU (train.py's --device cpu)."""
    return str(result.get("device", "")).lower() == "cpu"


def rows(result):
    """The table's rows of one result file: a dict per mode. A run on the CPU
    has no speedup: what thdc saves is GPU launches and host
    synchronisations, which its timings do not measure."""
    modes = result["modes"]
    eager = modes.get("eager")
    cpu = on_cpu(result)
    out = []
    for mode in sorted(modes, key=lambda m: MODE_ORDER.index(m) if m in MODE_ORDER else 99):
        figures = modes[mode]
        speedup = 1.0 if mode == "eager" and not cpu else None
        difference = smoothed = first = None
        if eager is not None and mode != "eager":
            if not cpu and eager["time_per_iter_ms"] and figures["time_per_iter_ms"]:
                speedup = eager["time_per_iter_ms"] / figures["time_per_iter_ms"]
            difference = max(abs(a - b) for a, b in zip(figures["loss"], eager["loss"]))
            first = max(abs(a - b) for a, b in zip(figures["loss"][:FIRST],
                                                   eager["loss"][:FIRST]))
            smoothed = max(abs(a - b) for a, b in zip(moving_mean(figures["loss"]),
                                                       moving_mean(eager["loss"])))
        memory = figures["max_memory_bytes"]
        out.append({
            "mode": mode, "preset": result["preset"], "C": result["C"], "N": result["N"],
            "time": figures["time_per_iter_ms"], "tokens": figures["tokens_per_s"],
            "speedup": speedup, "memory": memory / 2**30 if memory is not None else None,
            "syncs": figures["syncs_per_iter"], "final": figures["final_loss"],
            "difference": difference, "smoothed": smoothed, "first": first,
            "padded": figures.get("padded_fraction"), "graphs": figures.get("graphs"),
            "capture": figures.get("capture_s"),
            "microbatches": figures["microbatches_per_step"],
            "setup": figures["setup_s"], "cpu": cpu,
        })
    return out


def markdown(results, svg_name=None):
    lines = ["# examples/train: results", ""]
    for index, result in enumerate(results, 1):
        lines.append(
            f"- run {index}: `{result['preset']}`, C={result['C']}, N={result['N']}, "
            f"{result.get('algorithm', 'next_fit')} packing: "
            f"{result['parameters'] / 1e6:.1f}M parameters, {result['documents']} documents "
            f"per global batch, {result['steps']} steps, {result['precision']}, "
            f"{result['device']}, torch {result['torch']}")
    lines += ["", "| run | mode | preset | C | time/iter (ms) | tokens/s | speedup vs eager | "
              "peak memory (GiB) | syncs/iter | padded rows | final loss | "
              f"max \\|Δloss\\| first {FIRST} steps | max \\|Δloss\\| vs eager | "
              f"max \\|Δ\\| of {SMOOTHING}-step means | microbatches/step | graphs | "
              "capture (s) | setup (s) |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
              "---:|---:|"]
    for index, result in enumerate(results, 1):
        for r in rows(result):
            lines.append(
                f"| {index} | {r['mode']} | {r['preset']} | {r['C']} | {fmt(r['time'], '.2f')} | "
                f"{fmt(r['tokens'], ',.0f')} | "
                f"{'—' if r['cpu'] else fmt(r['speedup'], '.2f')} | "
                f"{fmt(r['memory'], '.2f')} | {fmt(r['syncs'], '.1f')} | "
                f"{fmt(None if r['padded'] is None else 100 * r['padded'], '.1f')}% | "
                f"{r['final']:.4f} | {fmt(r['first'], '.1e')} | "
                f"{fmt(r['difference'], '.2e')} | {fmt(r['smoothed'], '.2e')} | "
                f"{r['microbatches']:.2f} | {fmt(r['graphs'], 'd')} | "
                f"{fmt(r['capture'], '.1f')} | {r['setup']:.1f} |")
    lines += ["", "time/iter and tokens/s: the steps after the warm-up, real tokens only; "
              "syncs/iter: synchronising CUDA operations PyTorch reports per iteration "
              "(torch.cuda.set_sync_debug_mode), counted in the warm-up steps after the "
              "first; padded rows: the rows the model computes that hold no token; "
              "graphs: captured graphs (capture: their warm-up and capture time, part of "
              "setup); final loss: the mean of the last 10 steps; max |Δloss| first "
              f"{FIRST} steps: step by step against eager; max |Δloss|: over every "
              "step, against the eager mode of the same run; the smoothed one between "
              f"moving means over {SMOOTHING} steps; eager-again: the eager mode run a second "
              "time, the drift between two runs of one mode."]
    if any(on_cpu(result) for result in results):
        lines += ["", "speedup vs eager: — for a run on the CPU, whose timings do not "
                  "measure what thdc saves on a GPU (kernel launches and host "
                  "synchronisations); the CPU run checks that the modes learn alike."]
    if svg_name:
        lines += ["", f"![loss curves]({svg_name})"]
    return "\n".join(lines) + "\n"


def nice_ticks(low, high, count=5):
    """About `count` round tick values whose first is <= low and last >= high."""
    if high <= low:
        high = low + 1.0
    step = 10 ** math.floor(math.log10((high - low) / count))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= count:
            step *= factor
            break
    first = math.floor(low / step)
    last = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def title(index, result):
    """A panel's title: the run's number and what sets it apart."""
    return (f"run {index + 1}: {result['preset']}, C={result['C']}, N={result['N']}, "
            f"{result.get('algorithm', 'next_fit')} packing ({result['device']})")


def ordered_modes(curves):
    return [m for m in MODE_ORDER if m in curves] + [m for m in curves if m not in MODE_ORDER]


def plot(results, path):
    """The loss curves with matplotlib, one panel per result, as an SVG
    file; False where matplotlib is not installed."""
    try:
        figure = loss_figure(results)
    except ImportError:
        return False
    import matplotlib.pyplot as plt

    figure.savefig(path, format="svg")
    plt.close(figure)
    return True


def loss_figure(results):
    """matplotlib's figure of the loss curves (ImportError without it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(results), 1, figsize=(9, 3.2 * len(results)),
                                squeeze=False)
    for index, (result, ax) in enumerate(zip(results, axes[:, 0])):
        curves = {m: f["loss"] for m, f in result["modes"].items()}
        for mode in ordered_modes(curves):
            steps = [s + 1 for s, v in enumerate(curves[mode]) if math.isfinite(v)]
            values = [v for v in curves[mode] if math.isfinite(v)]
            ax.plot(steps, values, label=mode, color=COLOURS.get(mode, "#555"), linewidth=1.2,
                    linestyle=(0, tuple(map(float, DASHES[mode].split())))
                    if mode in DASHES else "-")
        ax.set_title(title(index, result), fontsize=10, loc="left")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.grid(color="#eee")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    figure.tight_layout()
    return figure


def svg(results, width=760, panel_height=280):
    """One panel per result: loss against step, a line per mode."""
    left, right, top, bottom = 60, 150, 30, 40
    height = panel_height * len(results)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    for index, result in enumerate(results):
        y0 = index * panel_height
        plot_w, plot_h = width - left - right, panel_height - top - bottom
        curves = {m: f["loss"] for m, f in result["modes"].items()}
        values = [v for curve in curves.values() for v in curve if math.isfinite(v)]
        steps = max(len(c) for c in curves.values())
        yticks = nice_ticks(min(values), max(values))
        y_low, y_high = yticks[0], yticks[-1]
        xticks = nice_ticks(1, steps)
        x = lambda s: left + plot_w * (s - 1) / max(steps - 1, 1)
        y = lambda v: y0 + top + plot_h * (1 - (v - y_low) / (y_high - y_low or 1))
        parts.append(f'<text x="{left}" y="{y0 + 18}" font-weight="bold">'
                     f'{html.escape(title(index, result))}: loss per step</text>')
        parts.append(f'<rect x="{left}" y="{y0 + top}" width="{plot_w}" height="{plot_h}" '
                     f'fill="none" stroke="#888"/>')
        for t in yticks:
            parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(t):.1f}" '
                         f'y2="{y(t):.1f}" stroke="#eee"/>')
            parts.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">'
                         f'{t:g}</text>')
        for t in xticks:
            if 1 <= t <= steps:
                parts.append(f'<text x="{x(t):.1f}" y="{y0 + top + plot_h + 16}" '
                             f'text-anchor="middle">{t:g}</text>')
        parts.append(f'<text x="{left + plot_w / 2}" y="{y0 + panel_height - 6}" '
                     f'text-anchor="middle">step</text>')
        for row, mode in enumerate(ordered_modes(curves)):
            colour = COLOURS.get(mode, "#555")
            dash = f' stroke-dasharray="{DASHES[mode]}"' if mode in DASHES else ""
            points = " ".join(f"{x(s + 1):.1f},{y(v):.1f}"
                              for s, v in enumerate(curves[mode]) if math.isfinite(v))
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                         f'stroke-width="1.3"{dash}/>')
            ly = y0 + top + 14 + 18 * row
            parts.append(f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 36}" '
                         f'y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"'
                         f'{dash}/>')
            parts.append(f'<text x="{left + plot_w + 42}" y="{ly}">{html.escape(mode)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="JSON files written by train.py --json")
    parser.add_argument("--svg", metavar="OUT", help="also write the loss curves here "
                        "(matplotlib's where it is installed, else the SVG writer's)")
    parser.add_argument("--markdown", metavar="OUT", help="write the table here (default: "
                        "standard output)")
    args = parser.parse_args(argv)
    results = []
    for path in args.results:
        with open(path) as f:
            results.append(json.load(f))
    svg_name = None
    if args.svg:
        if not plot(results, args.svg):
            with open(args.svg, "w") as out:
                out.write(svg(results))
        base = os.path.dirname(os.path.abspath(args.markdown)) if args.markdown else os.getcwd()
        svg_name = os.path.relpath(os.path.abspath(args.svg), base)
    text = markdown(results, svg_name)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
