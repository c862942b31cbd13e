#!/usr/bin/env python3
"""Megatron-LM's own pretrain_gpt.py, mode against mode, timed by Megatron's
own log: the comparison a Megatron user believes.

    python3 bench/megatron_pretrain.py --megatron DIR --out DIR
        [--size 125m] [--C 8192] [--N 64] [--iters 300]
        [--modes megatron-eager,megatron-graphs,thdc-eager,thdc-graphs,thdc-ladder,thdc-exact]
        [--gdn] [--count-syncs] [--profile ITERATION]
        [--repeats 2] [--steady-from ITERATION] [--dry-run]
    python3 bench/megatron_pretrain.py --report OUT

Every run is one process, `python -m thdc.megatron.run --thdc {step|off}
pretrain_gpt.py FLAGS` (one GPU, world size 1), with the same flags for every
mode except the ones that make the mode (MODES). Modes run in rounds, the
order of one round reversed in the next (ABCD DCBA ...), so no mode always
runs first or last. Each run's log is kept (OUT/LOG) and summarised by
bench/megatron_log.py: the whole run (the mean over every iteration, the
captures and first iterations included) beside the steady state (the median
of the iterations from --steady-from on, default a fifth of the run), the
losses, and the peak memory the process reached (printed at exit in
Megatron's own memory-report format). OUT/summary.json holds every run;
the table printed at the end (OUT/table.md) gives, per mode, the median
over its repeats and its ratio to megatron-graphs (Megatron's per-layer
graph path), and the share of each run's loss curve (a moving mean of 10
iterations) inside the band the megatron-graphs runs span, their bf16
run-to-run noise; OUT/losses.png plots the curves over that band
(matplotlib). --report OUT makes both again from OUT/summary.json, or
from the summary.json of each folder in OUT (one comparison run in parts,
as separate invocations: gather), which it merges into OUT/summary.json.

The data: Megatron's variable-length mock dataset (--use-varlen-dataset
--mock-data) with the lognormal lengths of dev's own benchmark
(examples/dynamic_context_parallel/benchmark_dcp.sh on d48bd6be0a: min 128,
mean 1024, sigma 1.5), capped at C; packed by dp_balanced into microbatches of
at most C rows and N - 1 real sequences (the modes that pad append one dummy
sequence and count it in N; megatron-eager, which does not pad, is given
N - 1 so that every mode packs the same sequences into the same
microbatches). Gradient-accumulation fusion is off in every mode (it needs
APEX or a TE build with its wgrad kernels), as dev's benchmark has it; no mode
graphs its optimizer."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_log  # noqa: E402
import timing  # noqa: E402
import torch_trace  # noqa: E402

# hidden, layers, heads (GPT-3's table; megatron_gpt_batches.py's presets).
SIZES = {
    "tiny": (256, 2, 4),  # a smoke test of the modes (test_megatron_run_gpu.py)
    "125m": (768, 12, 12),
    "370m": (1024, 24, 16),
    "1.3b": (2048, 24, 16),
}
LEARNING_RATES = {"tiny": 3e-4, "125m": 3e-4, "370m": 3e-4, "1.3b": 2e-4}

# mode: (launcher's --thdc, the flags that make the mode).
MODES = {
    "megatron-eager": ("off", ["--cuda-graph-impl", "none"]),
    "megatron-graphs": ("off", ["--cuda-graph-impl", "transformer_engine",
                                "--pad-packed-seq-alignment", "max"]),
    "thdc-eager": ("step", ["--cuda-graph-impl", "none", "--pad-packed-seq-alignment", "max"]),
    "thdc-graphs": ("step", ["--cuda-graph-impl", "transformer_engine",
                             "--pad-packed-seq-alignment", "max"]),
    # The launcher's default ladder: four rungs evenly spaced up to C.
    "thdc-ladder": ("ladder", ["--cuda-graph-impl", "transformer_engine",
                               "--pad-packed-seq-alignment", "max"]),
    "thdc-exact": ("exact", ["--cuda-graph-impl", "none", "--pad-packed-seq-alignment", "max"]),
    # thdc's whole-iteration graphs over the default ladder. Megatron's parser
    # asserts --no-check-for-nan-in-loss-and-grad with full_iteration
    # (arguments.py:1328-1331 on dev): the one flag this mode drops.
    "thdc-full-iteration": ("ladder", ["--cuda-graph-impl", "full_iteration",
                                       "--pad-packed-seq-alignment", "max",
                                       "--no-check-for-nan-in-loss-and-grad"]),
}
BASELINE = "megatron-graphs"
# With Gated DeltaNet layers (--gdn) the baseline is Megatron's eager path: its
# only working one with packing (the layer reads the offsets back to the host,
# gdn.py:180-193 on dev, which no graph holds).
GDN_BASELINE = "megatron-eager"
GDN_MODES = ("megatron-eager", "thdc-graphs", "thdc-ladder", "thdc-full-iteration")


def baseline_of(summary: dict) -> str:
    """The mode a comparison's ratios and loss band are taken against."""
    return GDN_BASELINE if summary.get("gdn") else BASELINE


def gdn_flags(size: str) -> List[str]:
    """Gated DeltaNet layers three of every four (Qwen3-Next's pattern;
    --linear-attention-freq 4, megatron-core's experimental attention
    variant), half as many key heads as value heads, heads of 64: the value
    width the hidden size."""
    _, _, heads = SIZES[size]
    return ["--experimental-attention-variant", "gated_delta_net", "--linear-attention-freq", "4",
            "--linear-num-key-heads", str(max(heads // 2, 1)),
            "--linear-num-value-heads", str(heads),
            "--linear-key-head-dim", "64", "--linear-value-head-dim", "64"]


def mock_lengths(C: int, text: Optional[str] = None) -> str:
    """Megatron's variable-length mock data: dev's benchmark's lognormal
    lengths, of tokens counting up, or with `text` (the prefix of an indexed
    dataset, bench/text_corpus.py's tokens) real tokens cut to those lengths
    ("verification" mode, sft_dataset.py:225-321 on dev)."""
    config = {"mode": "distribution", "type": "lognormal", "format": "thd",
              "min_seq_len": 128, "max_seq_len": C, "mean_seq_len": 1024,
              "lognormal_sigma": 1.5}
    if text is not None:
        config.update(mode="verification", data_path=text)
        del config["type"]
    return json.dumps(config, separators=(",", ":"))


def text_vocabulary(text: str) -> int:
    """Megatron's --vocab-size for bench/text_corpus.py's tokens: its
    meta.json's, the end-of-document id the last (NullTokenizer's eod)."""
    with open(os.path.join(os.path.dirname(text), "meta.json")) as f:
        return int(json.load(f)["megatron_vocab_size"])


def megatron_flags(size: str, C: int, N: int, iters: int, cache: str,
                   global_batch: int = 32, seed: int = 1234,
                   text: Optional[str] = None, gdn: bool = False) -> List[str]:
    """The flags every mode shares (its own come from MODES); text: real
    tokens (mock_lengths); gdn: Gated DeltaNet layers (gdn_flags)."""
    hidden, layers, heads = SIZES[size]
    vocabulary = 32768 if text is None else text_vocabulary(text)
    return [
        "--num-layers", str(layers), "--hidden-size", str(hidden),
        "--ffn-hidden-size", str(4 * hidden), "--num-attention-heads", str(heads),
        "--seq-length", str(C), "--max-position-embeddings", str(C),
        "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
        "--transformer-impl", "transformer_engine",
        "--micro-batch-size", "1", "--global-batch-size", str(global_batch),
        "--train-iters", str(iters), "--lr-decay-iters", str(iters),
        "--lr", str(LEARNING_RATES[size]), "--min-lr", str(LEARNING_RATES[size] / 10),
        "--lr-decay-style", "cosine", "--lr-warmup-iters", str(max(1, iters // 100)),
        "--weight-decay", "0.1", "--clip-grad", "1.0", "--bf16", "--seed", str(seed),
        "--calculate-per-token-loss", "--no-gradient-accumulation-fusion",
        "--use-varlen-dataset", "--mock-data",
        "--varlen-mock-dataset-config-json", mock_lengths(C, text),
        "--tokenizer-type", "NullTokenizer", "--vocab-size", str(vocabulary),
        "--split", "99,1,0", "--data-cache-path", cache,
        "--dataloader-type", "single", "--num-workers", "0",
        "--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", str(C),
        "--log-interval", "1", "--log-throughput", "--timing-log-level", "0",
        "--eval-interval", "1000000", "--eval-iters", "1", "--save-interval", "1000000",
        "--distributed-backend", "nccl",
    ] + (gdn_flags(size) if gdn else [])


def mode_command(mode: str, script: str, common: Sequence[str], N: int) -> List[str]:
    thdc, flags = MODES[mode]
    # The padding modes count the dummy sequence in N; megatron-eager packs
    # the same N - 1 real sequences without one.
    capacity = N - 1 if mode == "megatron-eager" else N
    return [sys.executable, os.path.abspath(__file__), "--child", "--thdc", thdc, script,
            *common, "--thd-max-packed-sequences", str(capacity), *flags]


def order(modes: Sequence[str], repeats: int) -> List[str]:
    """ABCD DCBA ABCD ...: every mode in every position as often."""
    return timing.alternating(modes, repeats)


def child(argv: Sequence[str]) -> int:
    """The launcher, then the peak memory of the process in Megatron's
    memory-report format (bench/megatron_log.py reads both)."""
    import atexit

    def report() -> None:
        try:
            import torch
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                mb = 1024.0 * 1024.0
                print(f"[Rank 0] (at exit) memory (MB) | max allocated: "
                      f"{torch.cuda.max_memory_allocated() / mb:.1f} | max reserved: "
                      f"{torch.cuda.max_memory_reserved() / mb:.1f}", flush=True)
        except Exception as error:  # the run's own result stands
            print(f"(peak memory not read: {error})", flush=True)

    atexit.register(report)
    from thdc.megatron import run
    if os.environ.get(COUNT_SYNCS) == "1":
        script_runner = run.run_script

        def run_script(script: str, args: Sequence[str]) -> None:
            # After the launcher's own installs, as the script's imports come.
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            from megatron.training import training
            count_syncs(training)
            script_runner(script, args)

        run.run_script = run_script
    return run.main(list(argv))


# The child's switch for count_syncs (--count-syncs); PyTorch's text of the
# warning set_sync_debug_mode("warn") gives for each synchronizing call
# (c10/cuda/CUDAFunctions.cpp, warn_or_error_on_sync).
COUNT_SYNCS = "THDC_BENCH_COUNT_SYNCS"
SYNC_WARNING = "called a synchronizing CUDA operation"


def sync_line(counts: Sequence[Sequence[int]]) -> str:
    """count_syncs's line at exit (bench/megatron_log.py's _SYNCS reads it):
    counts holds (in train_step, in its forward_backward_func) per
    iteration."""
    steps = [c[0] for c in counts]
    inner = [c[1] for c in counts]
    return (f"[Rank 0] (at exit) host synchronisations | iterations: {len(counts)} | "
            f"per iteration median: {statistics.median(steps):g} | max: {max(steps)} | "
            f"total: {sum(steps)} | forward backward median: {statistics.median(inner):g} | "
            f"forward backward max: {max(inner)} | forward backward none: "
            f"{sum(1 for c in inner if c == 0)}")


def count_syncs(training) -> List[List[int]]:
    """Counts the host synchronisations of each iteration under
    torch.cuda.set_sync_debug_mode("warn"), which warns once for every
    synchronizing call: in Megatron's train_step (training.train_step: the
    batch function, forward, backward and the optimizer; Megatron's own log
    line after it is not counted), and within it in the forward_backward_func
    it is given (the schedule: the batch function, forward and backward, or
    the whole-iteration graph's replay), so that the optimizer's own reads
    (the gradient norm) stand apart. Prints them at exit (sync_line). The
    warnings themselves are swallowed: a run that counts is slower, so its
    times are not the comparison's. Returns the list it fills, one [in
    train_step, in forward_backward_func] per iteration."""
    import atexit
    import inspect
    import warnings

    import torch

    counts: List[List[int]] = []
    depth = [0]  # 0 outside, 1 in train_step, 2 in its forward_backward_func
    train_step = training.train_step
    signature = inspect.signature(train_step)

    def counted(function, level):
        def call(*args, **kwargs):
            depth[0] = level
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] = level - 1
        return call

    def counted_train_step(*args, **kwargs):
        counts.append([0, 0])
        bound = signature.bind(*args, **kwargs)
        if "forward_backward_func" in bound.arguments:
            bound.arguments["forward_backward_func"] = counted(
                bound.arguments["forward_backward_func"], 2)
        return counted(train_step, 1)(*bound.args, **bound.kwargs)

    shown = warnings.showwarning

    def showwarning(message, category, *rest, **kwargs):
        if SYNC_WARNING not in str(message):
            return shown(message, category, *rest, **kwargs)
        if depth[0] >= 1:
            counts[-1][0] += 1
        if depth[0] == 2:
            counts[-1][1] += 1

    def report() -> None:
        if counts:
            print(sync_line(counts), flush=True)

    training.train_step = counted_train_step
    warnings.showwarning = showwarning
    warnings.filterwarnings("always", message=f".*{SYNC_WARNING}")
    torch.cuda.set_sync_debug_mode("warn")
    atexit.register(report)
    return counts


def profile_flags(iteration: int, tensorboard: str) -> List[str]:
    """Megatron's own flags for PyTorch's profiler over one iteration
    (ProfilingConfig, training/config/common_config.py:25-60 on dev; the
    trace goes to TENSORBOARD/../torch_profile/rank-0.json.gz,
    training.py:4205-4208)."""
    return ["--profile", "--use-pytorch-profiler", "--profile-step-start", str(iteration),
            "--profile-step-end", str(iteration + 1), "--tensorboard-dir", tensorboard]


def keep_trace(out: str, name: str) -> Optional[dict]:
    """The trace a profiled run left in OUT/torch_profile, moved to
    OUT/NAME.trace.json.gz (the next run writes the same file) and
    summarised (torch_trace.summarise); None where there is none."""
    trace = os.path.join(out, "torch_profile", "rank-0.json.gz")
    if not os.path.isfile(trace):
        return None
    kept = os.path.join(out, f"{name}.trace.json.gz")
    os.replace(trace, kept)
    try:
        return torch_trace.summarise(torch_trace.load(kept))
    except (OSError, ValueError, KeyError) as error:
        return {"error": str(error)}


def environment(count: bool = False) -> Dict[str, str]:
    env = dict(os.environ)
    if count:
        env[COUNT_SYNCS] = "1"
    env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                       ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29511")):
        env[key] = value
    return env


def _number(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(base, value) -> str:
    """base / value: how many times faster than the baseline."""
    return f"{base / value:.3f}x" if base and value else "-"


def _syncs(summaries: List[dict]) -> str:
    counts = [s["syncs_per_iteration"] for s in summaries if s.get("syncs_per_iteration")]
    if not counts:
        return "-"
    return (f"{statistics.median(c['median'] for c in counts):g} "
            f"({max(c['max'] for c in counts):g}); forward-backward "
            f"{statistics.median(c['forward_backward_median'] for c in counts):g} "
            f"({max(c['forward_backward_max'] for c in counts):g})")


def table(runs: List[dict], baseline: str = BASELINE) -> List[str]:
    """Per mode: the median over its runs, its ratio to `baseline`."""
    by_mode: Dict[str, List[dict]] = {}
    for run in runs:
        if run.get("summary"):
            by_mode.setdefault(run["mode"], []).append(run["summary"])

    def median(mode: str, key: str):
        values = [s[key] for s in by_mode.get(mode, []) if s.get(key) is not None]
        return statistics.median(values) if values else None

    base_whole, base_steady = median(baseline, "whole_run_ms_per_iteration"), median(
        baseline, "steady_ms_per_iteration")
    versus = "vs " + baseline.split("-")[-1]
    # Runs of --count-syncs add a column: the median over the runs of each
    # run's median synchronisations per iteration, and the largest count.
    counted = any((r.get("summary") or {}).get("syncs_per_iteration") for r in runs)
    lines = [f"| mode | runs | whole run ms/iter | {versus} | steady ms/iter (min-max) | "
             f"{versus} | last loss | peak allocated MB |" + (" syncs/iter (max); in forward-backward |" if counted
                                                              else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if counted else "")]
    for mode in MODES:
        if mode not in by_mode:
            continue
        whole, steady = median(mode, "whole_run_ms_per_iteration"), median(
            mode, "steady_ms_per_iteration")
        spread = [s["steady_ms_per_iteration"] for s in by_mode[mode]
                  if s.get("steady_ms_per_iteration") is not None]
        losses = [s["losses"].get("lm loss", [[0, float("nan")]])[-1][1] for s in by_mode[mode]]
        peaks = [s.get("peak_max_allocated_mb") for s in by_mode[mode]
                 if s.get("peak_max_allocated_mb") is not None]
        lines.append(
            f"| {mode} | {len(by_mode[mode])} | {_number(whole)} | {_ratio(base_whole, whole)} | "
            f"{_number(steady)} ({_number(min(spread, default=None))}-"
            f"{_number(max(spread, default=None))}) | {_ratio(base_steady, steady)} | "
            f"{' / '.join(f'{x:.4f}' for x in losses)} | {_number(max(peaks, default=None), 0)} |"
            + (f" {_syncs(by_mode[mode])} |" if counted else ""))
    return lines


def smoothed(points: Sequence[Sequence[float]], window: int) -> Dict[int, float]:
    """{iteration: the mean loss over the `window` iterations ending there}
    from [[iteration, loss], ...] (from the window-th point on)."""
    out, values = {}, [p[1] for p in points]
    for i in range(window - 1, len(points)):
        out[int(points[i][0])] = sum(values[i - window + 1:i + 1]) / window
    return out


def loss_band(runs: List[dict], window: int = 10, baseline: str = BASELINE) -> Dict[str, dict]:
    """The band the baseline's runs span (at each iteration the min and max
    of their smoothed losses: its bf16 run-to-run noise) and, per mode, the
    share of each run's smoothed losses inside it and the farthest one
    outside, relative to the band's middle there. Empty without two
    baseline runs."""
    curves: Dict[str, List[Dict[int, float]]] = {}
    for run in runs:
        losses = (run.get("summary") or {}).get("losses", {}).get("lm loss")
        if losses:
            curves.setdefault(run["mode"], []).append(smoothed(losses, window))
    base = curves.get(baseline, [])
    if len(base) < 2:
        return {}
    iterations = sorted(set.intersection(*(set(c) for c in base)))
    band = {i: (min(c[i] for c in base), max(c[i] for c in base)) for i in iterations}
    result = {"band": {"iterations": iterations, "low": [band[i][0] for i in iterations],
                       "high": [band[i][1] for i in iterations], "window": window}}
    for mode, mode_curves in curves.items():
        shares, outside = [], 0.0
        for curve in mode_curves:
            inside = 0
            for i in iterations:
                low, high = band[i]
                value = curve.get(i)
                if value is None:
                    continue
                if low <= value <= high:
                    inside += 1
                else:
                    distance = low - value if value < low else value - high
                    outside = max(outside, distance / max((low + high) / 2, 1e-12))
            shares.append(inside / len(iterations))
        result[mode] = {"inside": shares, "farthest_outside_relative": outside}
    return result


def plot_losses(runs: List[dict], path: str, band: Optional[dict] = None,
                window: int = 10, baseline: str = BASELINE) -> bool:
    """Every run's smoothed loss, mode against mode, over the baseline's band
    (loss_band's "band", or none); False where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(8, 4.5))
    if band:
        axes.fill_between(band["iterations"], band["low"], band["high"], color="0.8",
                          label=f"{baseline}: band of its runs")
    labelled = set()
    for run in runs:
        losses = (run.get("summary") or {}).get("losses", {}).get("lm loss")
        if not losses:
            continue
        curve = smoothed(losses, window)
        axes.plot(list(curve), list(curve.values()), linewidth=1,
                  color=f"C{list(MODES).index(run['mode']) % 10}",
                  label=None if run["mode"] in labelled else run["mode"])
        labelled.add(run["mode"])
    axes.set_xlabel("iteration")
    axes.set_ylabel(f"lm loss (mean of {window} iterations)")
    axes.set_yscale("log")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


# What the runs of one comparison share: the parts of a run made by several
# invocations (gather) must agree on each.
SETTINGS = ("size", "C", "N", "iters", "global_batch", "steady_from", "text", "count_syncs",
            "gdn", "profile")


def gather(out: str) -> dict:
    """OUT/summary.json; where OUT has none, the runs of every
    OUT/*/summary.json in folder order (one comparison made by several
    invocations, each in its own folder: the modes of one order, or one
    mode each), written to OUT/summary.json, each run's log named by its
    folder. ValueError where there are none or the parts' SETTINGS differ
    (the text corpus by its file name)."""
    top = os.path.join(out, "summary.json")
    if os.path.isfile(top):
        with open(top) as f:
            summary = json.load(f)
        summary["runs"]  # KeyError where it is not a run's
        return summary
    parts = sorted(d for d in os.listdir(out) if os.path.isfile(
        os.path.join(out, d, "summary.json"))) if os.path.isdir(out) else []
    if not parts:
        raise ValueError("no summary.json of a run, in it or in a folder of it")
    merged, first = None, None
    for part in parts:
        with open(os.path.join(out, part, "summary.json")) as f:
            summary = json.load(f)
        settings = {k: summary.get(k) for k in SETTINGS}
        if settings["text"]:
            settings["text"] = os.path.basename(settings["text"])
        settings["count_syncs"], settings["gdn"] = bool(settings["count_syncs"]), bool(
            settings["gdn"])
        if merged is None:
            merged, first = dict(summary, runs=[], modes={}, parts=[]), (part, settings)
        elif settings != first[1]:
            differ = ", ".join(f"{k} {first[1][k]} / {settings[k]}" for k in SETTINGS
                               if settings[k] != first[1][k])
            raise ValueError(f"{first[0]} and {part} are not one comparison ({differ})")
        merged["parts"].append(part)
        merged["modes"].update(summary.get("modes", {}))
        merged["runs"] += [dict(run, log=f"{part}/{run['log']}") for run in summary["runs"]]
    with open(top, "w") as f:
        json.dump(merged, f, indent=1)
    return merged


def launcher_lines(runs: List[dict]) -> List[str]:
    """What thdc's launcher said of each run at exit (megatron_log): the
    rows its rungs ran against the top rung's, how its whole-iteration
    graphs ran."""
    lines = []
    for index, run in enumerate(runs):
        summary = run.get("summary") or {}
        said = []
        if summary.get("rungs"):
            said.append(f"{100 * summary['rows_of_top_rung']:.1f}% of the top rung's rows "
                        f"(microbatches by rung: " + ", ".join(
                            f"{rows}: {count}" for rows, count in summary["rungs"].items()) + ")")
        graphs = summary.get("iteration_graphs")
        if graphs:
            said.append(f"whole-iteration graphs: {graphs['eager']} eager, {graphs['captured']} "
                        f"captured, {graphs['replayed']} replayed ({graphs['shapes']} shapes; "
                        f"{graphs['promoted']} at a larger shape), capture "
                        f"{graphs['capture_s']:.1f} s")
        if said:
            lines.append(f"- {run.get('log', index)} ({run['mode']}): " + "; ".join(said))
    return [""] + lines if lines else []


def report(out: str) -> List[str]:
    """The table, the loss band and the plot from OUT/summary.json (gather)."""
    try:
        summary = gather(out)
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"megatron_pretrain.py --report: {out}: {error}")
    runs, baseline = summary["runs"], baseline_of(summary)
    lines = table(runs, baseline) + launcher_lines(runs)
    band = loss_band(runs, baseline=baseline)
    if band:
        lines.append("")
        lines.append(f"Smoothed losses ({band['band']['window']} iterations) inside the band of "
                     f"the {baseline} runs:")
        for mode, figures in band.items():
            if mode != "band":
                lines.append(f"- {mode}: " + ", ".join(f"{100 * x:.0f}%" for x in
                                                      figures["inside"])
                             + f" of iterations; farthest outside by "
                               f"{100 * figures['farthest_outside_relative']:.1f}% of the loss")
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if plot_losses(runs, os.path.join(out, "losses.png"), band.get("band"), baseline=baseline):
        lines.append(f"(loss curves: {os.path.join(out, 'losses.png')})")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    if argv[:1] == ["--report"]:
        if len(argv) != 2:
            sys.exit("usage: megatron_pretrain.py --report OUT (a folder with summary.json, "
                     "or with folders that have one)")
        print("\n".join(report(argv[1])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megatron", required=True,
                        help="a Megatron-LM checkout (pretrain_gpt.py and megatron/)")
    parser.add_argument("--out", required=True, help="logs and summary.json go here")
    parser.add_argument("--size", choices=tuple(SIZES), default="125m")
    parser.add_argument("--C", type=int, default=8192, help="--max-seqlen-per-dp-cp-rank")
    parser.add_argument("--N", type=int, default=64, help="--thd-max-packed-sequences")
    parser.add_argument("--text", metavar="PREFIX",
                        help="real tokens: the indexed dataset bench/text_corpus.py wrote "
                             "(OUT/tokens), cut to the mock data's lengths")
    parser.add_argument("--iters", type=int, default=300, help="--train-iters")
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--gdn", action="store_true",
                        help="Gated DeltaNet layers three of every four (gdn_flags); the "
                             f"baseline {GDN_BASELINE}, the default modes {','.join(GDN_MODES)}")
    parser.add_argument("--modes", help=f"default: {','.join(MODES)}")
    parser.add_argument("--repeats", type=int, default=2, help="rounds, alternating order")
    parser.add_argument("--steady-from", type=int, help="default: a fifth of --iters")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--count-syncs", action="store_true",
                        help="count the host synchronisations of each iteration (count_syncs); "
                             "slower, so its times are not the comparison's")
    parser.add_argument("--profile", type=int, metavar="ITERATION",
                        help="PyTorch's profiler over this iteration of every run, through "
                             "Megatron's own flags (profile_flags); its trace kept as "
                             "NAME.trace.json.gz and summarised (bench/torch_trace.py)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    modes = [m for m in (args.modes or ",".join(GDN_MODES if args.gdn else MODES)).split(",")
             if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; the modes are {', '.join(MODES)}")
    if args.N < 2 or args.C < 1 or args.iters < 1 or args.repeats < 1:
        parser.error("--N must be 2 or more, --C, --iters and --repeats 1 or more")
    if args.profile is not None and not 1 <= args.profile < args.iters:
        parser.error(f"--profile {args.profile}: an iteration from 1 to --iters - 1 "
                     f"({args.iters - 1})")
    script = os.path.join(os.path.abspath(args.megatron), "pretrain_gpt.py")
    if not os.path.isfile(script):
        parser.error(f"no pretrain_gpt.py in {args.megatron}")
    os.makedirs(args.out, exist_ok=True)
    common = megatron_flags(args.size, args.C, args.N, args.iters,
                            os.path.join(os.path.abspath(args.out), "data-cache"),
                            args.global_batch,
                            text=os.path.abspath(args.text) if args.text else None,
                            gdn=args.gdn)
    steady_from = args.steady_from if args.steady_from is not None else args.iters // 5
    runs = []
    for index, mode in enumerate(order(modes, args.repeats)):
        command = mode_command(mode, script, common, args.N)
        name = f"{index:02d}-{mode}"
        if args.profile is not None:
            command += profile_flags(args.profile, os.path.join(os.path.abspath(args.out),
                                                                f"{name}.tensorboard"))
        if args.dry_run:
            print(name, " ".join(command))
            continue
        log = os.path.join(args.out, f"{name}.log")
        with timing.host_window() as process, open(log, "w") as out:
            try:
                code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                                      cwd=os.path.dirname(script),
                                      env=environment(args.count_syncs),
                                      timeout=args.timeout).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        seconds = process.seconds
        with open(log, errors="replace") as f:
            try:
                summary = megatron_log.summarise(megatron_log.parse(f), steady_from)
            except ValueError as error:
                summary = None
                print(f"{name}: {error}")
        runs.append({"mode": mode, "log": os.path.basename(log), "exit": code,
                     "process_seconds": round(seconds, 1), "summary": summary})
        if args.profile is not None:
            runs[-1]["profile"] = keep_trace(args.out, name)
        whole = summary and summary["whole_run_ms_per_iteration"]
        print(f"{name}: exit {code}, {seconds:.0f} s"
              + (f", whole run {whole:.1f} ms/iter, steady "
                 f"{summary['steady_ms_per_iteration']:.1f}" if whole else ""), flush=True)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump({"size": args.size, "C": args.C, "N": args.N, "iters": args.iters,
                       "global_batch": args.global_batch, "steady_from": steady_from,
                       "text": args.text, "count_syncs": args.count_syncs, "gdn": args.gdn,
                       "profile": args.profile,
                       "flags": common, "modes": {m: MODES[m] for m in modes},
                       "runs": runs}, f, indent=1)
    if runs:
        print("\n".join(report(args.out)))
    failed = [r for r in runs if r["exit"] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
