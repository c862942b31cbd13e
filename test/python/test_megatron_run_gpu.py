"""Megatron-LM's own pretrain_gpt.py through thdc's launcher on a GPU: a
small GPT (2 layers of 256, C = 1024) trained a few iterations on
Megatron's variable-length mock data in Megatron's per-layer graph path
(--thdc off), and with thdc's ladder and exact rows: every run exits
cleanly, its losses are finite with no skipped or NaN iteration, the first
iteration's loss is Megatron's own (every mode trains the same microbatches),
and the ladder captured every rung and ran microbatches below the top one.

Needs a GPU, TransformerEngine and a megatron-core dev checkout with
pretrain_gpt.py (THDC_MEGATRON_DEV); bench/megatron_pretrain.py makes the
commands (its "tiny" size)."""
import importlib.util
import math
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
pytest.importorskip("transformer_engine")

from conftest import SOURCE_DIR  # noqa: E402

DEV = os.environ.get("THDC_MEGATRON_DEV")
if not DEV or not os.path.isfile(os.path.join(DEV, "pretrain_gpt.py")):
    pytest.skip("THDC_MEGATRON_DEV names no checkout with pretrain_gpt.py",
                allow_module_level=True)

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
spec = importlib.util.spec_from_file_location(
    "megatron_pretrain", os.path.join(SOURCE_DIR, "bench", "megatron_pretrain.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
import megatron_log  # noqa: E402

C, N, ITERATIONS = 1024, 16, 8
# Megatron's own graph path, and the launcher's modes that read the plan
# (--thdc step runs in bench/megatron_pretrain.py's comparisons).
MODES = ("megatron-graphs", "thdc-ladder", "thdc-exact", "thdc-full-iteration")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each mode's Megatron log, parsed, and its stderr."""
    out = tmp_path_factory.mktemp("pretrain")
    common = bench.megatron_flags("tiny", C, N, ITERATIONS, str(out / "data-cache"),
                                  global_batch=8)
    common += ["--cuda-graph-warmup-steps", "1"]
    script = os.path.join(DEV, "pretrain_gpt.py")
    results = {}
    for mode in MODES:
        command = bench.mode_command(mode, script, common, N)
        done = subprocess.run(command, capture_output=True, text=True, cwd=DEV,
                              env=bench.environment(), timeout=300)
        (out / f"{mode}.log").write_text(done.stdout + done.stderr)
        parsed = megatron_log.parse((done.stdout + done.stderr).splitlines())
        results[mode] = (done, parsed)
    return results


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_trains(runs, mode):
    done, parsed = runs[mode]
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    intervals = parsed["intervals"]
    assert [r["iteration"] for r in intervals] == list(range(1, ITERATIONS + 1))
    losses = [r["losses"]["lm loss"] for r in intervals]
    assert all(math.isfinite(x) for x in losses), losses
    assert sum(r.get("number of skipped iterations", 0) for r in intervals) == 0
    assert sum(r.get("number of nan iterations", 0) for r in intervals) == 0
    first = runs["megatron-graphs"][1]["intervals"][0]["losses"]["lm loss"]
    assert losses[0] == pytest.approx(first, rel=2e-3), (mode, losses[0], first)


def test_the_ladder_captured_every_rung_and_used_them(runs):
    done, _ = runs["thdc-ladder"]
    text = done.stdout + done.stderr
    rungs = bench_rungs()
    # megatron-core logs each capture's deletion at exit: one per rung.
    assert len(re.findall(r"graphs deleted with explicit reset", text)) == len(rungs), text[-2000:]
    found = re.search(r"microbatches by rung \(rows: count\): (.*?);", text)
    assert found, text[-2000:]
    counts = {int(b): int(c) for b, c in re.findall(r"(\d+): (\d+)", found.group(1))}
    assert sorted(counts) == rungs
    assert sum(c for b, c in counts.items() if b < C) > 0, counts


def test_whole_iteration_graphs_were_captured(runs):
    """--cuda-graph-impl full_iteration with --thdc ladder: thdc's graphs in
    megatron-core's wrapper's place, warm-up iterations eager, then shapes
    captured (the exit report's counts)."""
    done, _ = runs["thdc-full-iteration"]
    text = done.stdout + done.stderr
    found = re.search(r"whole-iteration graphs \(training\): (\d+) eager, (\d+) captured, "
                      r"(\d+) replayed", text)
    assert found, text[-2000:]
    eager, captured, replayed = map(int, found.groups())
    assert eager >= 1 and captured >= 1 and eager + captured + replayed == ITERATIONS


def bench_rungs():
    from thdc import planner
    from thdc.megatron import run

    return planner.even_ladder(C, run.LADDER_RUNGS, run.LADDER_MULTIPLE)
