"""bench/megatron_log.py on log lines in Megatron-LM's own format (the
format strings of training_log, megatron/training/training.py:3403-3456,
and report_memory, megatron/training/utils/common_utils.py:304-317, on
dev d48bd6be0a): every field read back, losses told from the other fields,
the whole run weighted by each interval's iterations beside the steady
state's median, peak memory, and a log with no iteration line refused."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "megatron_log.py")
spec = importlib.util.spec_from_file_location("megatron_log", SCRIPT)
megatron_log = importlib.util.module_from_spec(spec)
spec.loader.exec_module(megatron_log)


def log_line(iteration, train_iters, elapsed_s, throughput, lm_loss, *, skipped=0, nan=0,
             grad_norm=1.25, extra_loss=None):
    """One line as training_log builds it (the same format calls)."""
    s = " [2026-12-07 10:00:00.000000]"
    s += ' iteration {:8d}/{:8d} |'.format(iteration, train_iters)
    s += ' consumed samples: {:12d} |'.format(iteration * 32)
    s += ' elapsed time per iteration (ms): {:.1f} |'.format(elapsed_s * 1000.0)
    s += f' throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |'
    s += f' learning rate: {1e-4:.6E} |'
    s += f' global batch size: {32:5d} |'
    s += ' {}: {:.6E} |'.format("lm loss", lm_loss)
    if extra_loss is not None:
        s += ' {}: {:.6E} |'.format("mtp_1 loss", extra_loss)
    s += f' loss scale: {1.0:.1f} |'
    s += f' grad norm: {grad_norm:.3f} |'
    s += ' number of skipped iterations: {:3d} |'.format(skipped)
    s += ' number of nan iterations: {:3d} |'.format(nan)
    return s


def memory_line(name, allocated, peak):
    mb = 1.0
    string = name + ' memory (MB)'
    string += f" | allocated: {allocated / mb:.2f}"
    string += f" | max allocated: {peak / mb:.2f}"
    string += f" | reserved: {allocated * 1.5 / mb:.2f}"
    string += f" | max reserved: {peak * 1.5 / mb:.2f}"
    return "[Rank {}] {}".format(0, string)


LOG = [
    "building GPT model ...",
    log_line(1, 100, 9.5, 1.2, 10.8),  # the first iteration: captures, warm-up
    memory_line("(after 1 iterations)", 1000.0, 1800.0),
    log_line(10, 100, 0.150, 90.0, 9.1),
    log_line(50, 100, 0.140, 95.0, 7.2, extra_loss=7.5),
    log_line(90, 100, 0.142, 94.0, 6.4, skipped=1, grad_norm=3.5),
    log_line(100, 100, 0.141, 94.5, 6.3, nan=1),
    memory_line("(after 100 iterations)", 1100.0, 2000.0),
]


def test_every_field_is_read_back():
    parsed = megatron_log.parse(LOG)
    assert [r["iteration"] for r in parsed["intervals"]] == [1, 10, 50, 90, 100]
    first = parsed["intervals"][1]
    assert first["elapsed time per iteration (ms)"] == 150.0
    assert first["throughput per GPU (TFLOP/s/GPU)"] == 90.0
    assert first["learning rate"] == 1e-4 and first["global batch size"] == 32
    assert first["consumed samples"] == 320 and first["grad norm"] == 1.25
    assert first["losses"] == {"lm loss": 9.1}
    assert parsed["intervals"][2]["losses"] == {"lm loss": 7.2, "mtp_1 loss": 7.5}
    assert parsed["memory"][1] == {"rank": 0, "when": "(after 100 iterations)",
                                   "allocated": 1100.0, "max allocated": 2000.0,
                                   "reserved": 1650.0, "max reserved": 3000.0}


def test_the_whole_run_beside_the_steady_state():
    result = megatron_log.summarise(megatron_log.parse(LOG), steady_from=50)
    # every iteration weighted: 1 x 9500 + 9 x 150 + 40 x 140 + 40 x 142 + 10 x 141
    total = 9500 + 9 * 150 + 40 * 140 + 40 * 142 + 10 * 141
    assert result["whole_run_ms_per_iteration"] == pytest.approx(total / 100)
    assert result["whole_run_seconds"] == pytest.approx(total / 1000)
    assert result["steady_ms_per_iteration"] == 141.5  # the intervals from 50: 142, 141
    assert result["steady_intervals"] == 2 and result["steady_min_max_ms"] == [141.0, 142.0]
    assert result["steady_tflops_per_gpu"] == pytest.approx(94.25)
    assert result["losses"]["lm loss"] == [[1, 10.8], [10, 9.1], [50, 7.2], [90, 6.4],
                                           [100, 6.3]]
    assert result["skipped_iterations"] == 1 and result["nan_iterations"] == 1
    assert result["peak_max_allocated_mb"] == 2000.0 and result["peak_max_reserved_mb"] == 3000.0
    # default: the second half of the run
    assert megatron_log.summarise(megatron_log.parse(LOG))["steady_from"] == 50


def test_the_command(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(LOG) + "\n")
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, SCRIPT, str(log), "--steady-from", "50", "--json",
                           str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "100 iterations: whole run 235.4 ms/iter (23.5 s), steady state 141.5 ms/iter" \
        in done.stdout
    assert "lm loss: 10.8000 at 1 -> 6.3000 at 100" in done.stdout
    assert out.exists()
    empty = tmp_path / "empty.log"
    empty.write_text("building GPT model ...\n")
    done = subprocess.run([sys.executable, SCRIPT, str(empty)], capture_output=True, text=True)
    assert done.returncode == 2 and "has no 'iteration N/M |' line" in done.stderr


def test_an_xz_log_reads_as_its_text(tmp_path):
    """Bench results keep Megatron's logs xz-compressed: the same figures."""
    import lzma

    plain, packed = tmp_path / "train.log", tmp_path / "train.log.xz"
    plain.write_text("\n".join(LOG) + "\n")
    with lzma.open(packed, "wt") as f:
        f.write("\n".join(LOG) + "\n")
    outputs = [subprocess.run([sys.executable, SCRIPT, str(path), "--steady-from", "50"],
                              capture_output=True, text=True) for path in (plain, packed)]
    assert outputs[0].returncode == outputs[1].returncode == 0, outputs[1].stderr
    assert outputs[0].stdout == outputs[1].stdout and "steady state 141.5" in outputs[1].stdout


def test_the_launchers_lines_at_exit(monkeypatch, capsys):
    """thdc.megatron.run's lines at exit, written by its own code (the rungs'
    counts, the whole-iteration graphs' report), read back into the run's
    figures."""
    import types

    from thdc.megatron import run, trainer

    hooks = []
    monkeypatch.setattr("atexit.register", hooks.append)
    monkeypatch.delenv("RANK", raising=False)
    listeners = []
    run.report_rungs([2048, 4096, 8192], listeners)
    for rung in [0] * 7 + [1] * 3 + [2]:
        listeners[0](rung)
    stats = {"eager": 2, "captured": 31, "replayed": 267, "shapes": {(1,): 1, (2,): 2},
             "promoted": 12, "promoted_rows": 4096, "capture_s": 20.54}
    trainer._report_at_exit(types.SimpleNamespace(stats=stats), "training")
    for hook in hooks:
        hook()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    result = megatron_log.summarise(megatron_log.parse(
        [log_line(1, 2, 0.1, 100.0, 5.0)] + lines))
    assert result["rungs"] == {2048: 7, 4096: 3, 8192: 1}
    assert result["rows_of_top_rung"] == pytest.approx((7 * 2048 + 3 * 4096 + 8192) /
                                                       (11 * 8192), abs=5e-4)
    assert result["iteration_graphs"] == {"eager": 2, "captured": 31, "replayed": 267,
                                          "shapes": 2, "promoted": 12,
                                          "promoted_rows": 4096, "capture_s": 20.5}
    assert "rungs" not in megatron_log.summarise(megatron_log.parse(
        [log_line(1, 2, 0.1, 100.0, 5.0)]))
