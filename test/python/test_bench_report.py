"""bench/report.py on a committed benchmark run (bench/results/step-kernel/
runs/2026-12-01-h200-one-wave: the step, the hand-written kernel, eager, the
copies, the scaling sweep): the results table and targets as they were
committed, the scaling plot drawn with matplotlib, and without matplotlib
the report still written, saying the plot is missing."""
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "report.py")
RUN = os.path.join(SOURCE_DIR, "bench", "results", "step-kernel", "runs", "2026-12-01-h200-one-wave")


def report(tmp_path, plot, env=None):
    out = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, SCRIPT, f"{RUN}/bench.jsonl", f"{RUN}/eager.json", f"{RUN}/machine.json",
         "--output", str(out), "--scaling", f"{RUN}/scaling.jsonl", f"{RUN}/eager-scaling.json",
         "--plot", str(plot)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return out.read_text()


def test_the_table_and_targets_read_the_run(tmp_path):
    """Every configuration's row carries its graph replay time from the run's
    records, and its target verdict is the ratio those records give."""
    import json

    text = report(tmp_path, tmp_path / "scaling.png")
    rows = {}
    for line in open(f"{RUN}/bench.jsonl"):
        r = json.loads(line) if line.startswith("{") else {}
        if "C" in r:  # the empty kernel and the 1 GiB copy have no configuration
            rows.setdefault((r["C"], r["cp"], r["N"], r["mix"]), {})[r["variant"]] = r
    checked = 0
    for (C, cp, N, mix), variants in sorted(rows.items()):
        if "thdc_graph" not in variants or "handwritten_graph" not in variants:
            continue
        graph, hand = variants["thdc_graph"]["device_us"], variants["handwritten_graph"]["device_us"]
        row = next(line for line in text.splitlines()
                   if line.startswith(f"| {C} | {cp} | {N} | {mix} |"))
        assert f"| {graph:.2f} | {hand:.2f} | {graph / hand:.2f} |" in row
        verdict = f"| graph replay <= 0.9x hand-written | C={C} cp={cp} N={N} {mix} | " \
                  f"{'yes' if graph / hand <= 0.9 else 'NO'} | {graph / hand:.2f}x |"
        assert verdict in text
        checked += 1
    assert checked >= 10 and "## Scaling" in text


def test_the_scaling_plot(tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "scaling.svg"
    text = report(tmp_path, plot)
    assert "![device time and bandwidth against C](scaling.svg)" in text
    svg = plot.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg and "PyTorch eager" in svg


def test_without_matplotlib_the_report_stands(tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('no matplotlib here')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker))
    text = report(tmp_path, tmp_path / "scaling.png", env=env)
    assert "(no plot: matplotlib is not installed here)" in text
    assert not (tmp_path / "scaling.png").exists() and "## Targets" in text
