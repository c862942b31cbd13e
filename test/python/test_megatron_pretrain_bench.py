"""bench/megatron_pretrain.py, the comparison of modes in Megatron-LM's own
pretrain_gpt.py: every mode's command passes the launcher's own checks, the
modes differ only in the flags that make them, the order alternates, and the
table reads the runs' summaries (a mode with no summary is left out)."""
import importlib.util
import os
import sys

import pytest

from conftest import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
SCRIPT = os.path.join(SOURCE_DIR, "bench", "megatron_pretrain.py")
spec = importlib.util.spec_from_file_location("megatron_pretrain", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

from thdc.megatron import run  # noqa: E402


def commands(N=64):
    common = bench.megatron_flags("125m", 8192, N, 300, "/tmp/cache")
    return {mode: bench.mode_command(mode, "pretrain_gpt.py", common, N) for mode in bench.MODES}


def script_args(command):
    """The launcher's arguments after --child: (--thdc value, the script's flags)."""
    child = command.index("--child")
    options = run.split_argv(command[child + 1:])
    assert options.script == "pretrain_gpt.py"
    return options.thdc, options.args


def test_thdc_modes_pass_the_launchers_checks():
    for mode, command in commands().items():
        thdc, args = script_args(command)
        assert thdc == bench.MODES[mode][0]
        if thdc != "off":
            flags = run.check_flags(args, thdc)
            assert (flags.max_seqlen_per_dp_cp_rank, flags.thd_max_packed_sequences) == (8192, 64)
            if thdc in run.PLAN_MODES:
                run.check_plan_mode(thdc, flags)


def test_modes_differ_only_in_their_own_flags():
    """Every mode's flags are the common ones plus its own; megatron-eager,
    which appends no dummy sequence, packs the same N - 1 real sequences."""
    every = commands(N=64)
    for mode, command in every.items():
        _, args = script_args(command)
        own = bench.MODES[mode][1]
        assert args[-len(own):] == own
        capacity = args[args.index("--thd-max-packed-sequences") + 1]
        assert capacity == ("63" if mode == "megatron-eager" else "64")
        rest = args[:-len(own)]
        assert rest[:-2] == bench.megatron_flags("125m", 8192, 64, 300, "/tmp/cache")
    eager = run.read_flags(script_args(every["megatron-eager"])[1])
    assert eager.pad_packed_seq_alignment is None and eager.cuda_graph_impl == "none"


def test_a_thdc_mode_without_padding_would_be_refused():
    """The launcher itself refuses thdc without --pad-packed-seq-alignment
    max: the harness cannot time a thdc mode that does not pad to C."""
    _, args = script_args(commands()["megatron-eager"])
    with pytest.raises(run.Refusal, match="--pad-packed-seq-alignment"):
        run.check_flags(args)


def test_order_alternates():
    assert bench.order(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    runs = bench.order(list(bench.MODES), 2)
    for mode in bench.MODES:  # every mode as often early as late
        positions = [i for i, m in enumerate(runs) if m == mode]
        assert sum(positions) == len(runs) - 1


def summary(whole, steady, loss, peak):
    return {"whole_run_ms_per_iteration": whole, "steady_ms_per_iteration": steady,
            "losses": {"lm loss": [[1, 10.0], [300, loss]]}, "peak_max_allocated_mb": peak}


def test_table_gives_medians_and_ratios_to_megatron_graphs():
    runs = [
        {"mode": "megatron-graphs", "summary": summary(200.0, 160.0, 6.5, 30000.0)},
        {"mode": "megatron-graphs", "summary": summary(220.0, 170.0, 6.5, 31000.0)},
        {"mode": "thdc-graphs", "summary": summary(180.0, 140.0, 6.5, 29000.0)},
        {"mode": "thdc-graphs", "summary": summary(190.0, 150.0, 6.5, 29500.0)},
        {"mode": "thdc-eager", "summary": None},  # a run that logged nothing
    ]
    lines = bench.table(runs)
    graphs = next(line for line in lines if line.startswith("| megatron-graphs"))
    thdc = next(line for line in lines if line.startswith("| thdc-graphs"))
    assert "| 210.0 | 1.000x | 165.0 (160.0-170.0) | 1.000x |" in graphs
    assert f"| 185.0 | {210 / 185:.3f}x | 145.0 (140.0-150.0) | {165 / 145:.3f}x |" in thdc
    assert thdc.endswith("| 29500 |")
    assert not any(line.startswith("| thdc-eager") for line in lines)


def test_bad_arguments_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--megatron", str(tmp_path), "--out", str(tmp_path / "o")])
    assert "no pretrain_gpt.py" in capsys.readouterr().err
    (tmp_path / "pretrain_gpt.py").write_text("")
    with pytest.raises(SystemExit):
        bench.main(["--megatron", str(tmp_path), "--out", str(tmp_path / "o"), "--modes",
                    "thdc-ladders"])
    assert "unknown mode(s) thdc-ladders" in capsys.readouterr().err


def run_with_losses(mode, losses):
    return {"mode": mode, "summary": dict(summary(100.0, 90.0, losses[-1], 1000.0),
                                          losses={"lm loss": [[i + 1, x]
                                                              for i, x in enumerate(losses)]})}


def test_smoothed_is_a_trailing_mean():
    assert bench.smoothed([[1, 4.0], [2, 2.0], [3, 6.0], [5, 0.0]], 2) == {2: 3.0, 3: 4.0,
                                                                          5: 3.0}


def test_the_loss_band_of_megatrons_own_runs():
    """The band at each iteration spans the baseline's runs; a run inside it
    scores 100%, one 10% above it scores 0% and 10% outside."""
    low, high = [5.0] * 20, [5.2] * 20
    runs = [run_with_losses("megatron-graphs", low), run_with_losses("megatron-graphs", high),
            run_with_losses("thdc-graphs", [5.1] * 20),
            run_with_losses("thdc-eager", [5.72] * 20)]
    band = bench.loss_band(runs, window=5)
    assert band["band"]["iterations"] == list(range(5, 21))
    assert band["band"]["low"][0] == pytest.approx(5.0) and band["band"]["high"][0] == \
        pytest.approx(5.2)
    assert band["thdc-graphs"]["inside"] == [1.0]
    assert band["thdc-eager"]["inside"] == [0.0]
    assert band["thdc-eager"]["farthest_outside_relative"] == pytest.approx(0.52 / 5.1)
    assert bench.loss_band(runs[1:]) == {}  # one baseline run makes no band


def test_the_report_from_a_summary(tmp_path):
    import json

    runs = [run_with_losses("megatron-graphs", [5.0 - i / 100 for i in range(30)]),
            run_with_losses("megatron-graphs", [5.1 - i / 100 for i in range(30)]),
            run_with_losses("thdc-graphs", [5.05 - i / 100 for i in range(30)])]
    (tmp_path / "summary.json").write_text(json.dumps({"runs": runs}))
    lines = bench.report(str(tmp_path))
    assert any(line.startswith("| thdc-graphs | 1 |") for line in lines)
    assert "- thdc-graphs: 100% of iterations; farthest outside by 0.0% of the loss" in lines
    with pytest.raises(SystemExit, match="no summary.json"):
        bench.report(str(tmp_path / "none"))
    plotted = lines[-1].startswith("(loss curves: ")
    table = lines[:-1] if plotted else lines
    assert (tmp_path / "table.md").read_text() == "\n".join(table) + "\n"
    pytest.importorskip("matplotlib")
    assert plotted and (tmp_path / "losses.png").stat().st_size > 1000


def test_the_report_gathers_a_comparison_run_in_parts(tmp_path):
    """--report OUT on folders of one mode each (one comparison made by
    several invocations): their runs merged into OUT/summary.json in folder
    order, each log named by its folder; parts of other settings refused."""
    import json

    settings = {"size": "125m", "C": 8192, "N": 64, "iters": 30, "global_batch": 32,
                "steady_from": 6, "text": None}
    for index, (mode, start) in enumerate((("megatron-graphs", 5.0), ("thdc-graphs", 5.05),
                                           ("megatron-graphs", 5.1))):
        part = tmp_path / f"{index:02d}-{mode}"
        part.mkdir()
        run = dict(run_with_losses(mode, [start - i / 100 for i in range(30)]),
                   log=f"00-{mode}.log")
        (part / "summary.json").write_text(json.dumps(
            dict(settings, modes={mode: bench.MODES[mode]}, runs=[run])))
    lines = bench.report(str(tmp_path))
    assert any(line.startswith("| megatron-graphs | 2 |") for line in lines)
    assert "- thdc-graphs: 100% of iterations; farthest outside by 0.0% of the loss" in lines
    merged = json.loads((tmp_path / "summary.json").read_text())
    assert [r["log"] for r in merged["runs"]] == [
        "00-megatron-graphs/00-megatron-graphs.log", "01-thdc-graphs/00-thdc-graphs.log",
        "02-megatron-graphs/00-megatron-graphs.log"]
    assert set(merged["modes"]) == {"megatron-graphs", "thdc-graphs"}
    assert merged["C"] == 8192 and merged["parts"] == sorted(merged["parts"])
    assert bench.report(str(tmp_path)) == lines  # again, from the merged summary

    other = tmp_path / "other"
    for name, C in (("a", 8192), ("b", 16384)):
        (other / name).mkdir(parents=True)
        (other / name / "summary.json").write_text(json.dumps(
            dict(settings, C=C, runs=[dict(run_with_losses("thdc-graphs", [5.0] * 30),
                                           log="00-thdc-graphs.log")])))
    with pytest.raises(SystemExit, match="a and b are not one comparison .C 8192 / 16384"):
        bench.report(str(other))
    assert not (other / "summary.json").exists()


def test_real_tokens_from_the_text_corpus(tmp_path):
    """--text: Megatron's mock data in its verification mode, real tokens of
    bench/text_corpus.py's indexed dataset cut to the same lognormal
    lengths, the vocabulary its meta.json gives (the end-of-document id
    NullTokenizer's eod)."""
    import json

    (tmp_path / "meta.json").write_text(json.dumps({"megatron_vocab_size": 32768}))
    flags = bench.megatron_flags("125m", 8192, 64, 300, "/tmp/cache",
                                 text=str(tmp_path / "tokens"))
    config = json.loads(flags[flags.index("--varlen-mock-dataset-config-json") + 1])
    assert config == {"mode": "verification", "data_path": str(tmp_path / "tokens"),
                      "format": "thd", "min_seq_len": 128, "max_seq_len": 8192,
                      "mean_seq_len": 1024, "lognormal_sigma": 1.5}
    assert flags[flags.index("--vocab-size") + 1] == "32768"
    mock = bench.megatron_flags("125m", 8192, 64, 300, "/tmp/cache")
    assert [f for f in mock if not f.startswith("{")] == \
        [f for f in flags if not f.startswith("{")]  # the rest the same


def test_the_report_of_the_kept_run(tmp_path):
    """The committed run (bench/results/megatron-pretrain/runs/...) keeps its
    summary.json: --report on a copy of it writes the committed table.md
    again, line for line."""
    import shutil

    kept = os.path.join(SOURCE_DIR, "bench", "results", "megatron-pretrain", "runs",
                        "2026-12-07-h100-pretrain-gpt")
    shutil.copy(os.path.join(kept, "summary.json"), tmp_path / "summary.json")
    bench.report(str(tmp_path))
    with open(os.path.join(kept, "table.md")) as f:
        assert (tmp_path / "table.md").read_text() == f.read()


def test_host_synchronisations_counted_per_train_step(monkeypatch):
    """--count-syncs: every synchronizing call PyTorch warns of inside one of
    Megatron's train_step calls counts for that iteration, and apart those
    inside the forward_backward_func it was given; none outside; other
    warnings pass through; the line at exit is what megatron_log reads back,
    and the table gains a column."""
    import types
    import warnings

    torch = pytest.importorskip("torch")
    modes = []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    passed = []  # what the hook hands on to the showwarning it found
    monkeypatch.setattr(warnings, "showwarning",
                        lambda message, *rest, **kwargs: passed.append(str(message)))
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    registered = []
    monkeypatch.setattr("atexit.register", registered.append)

    def sync(n):
        for _ in range(n):
            warnings.warn(bench.SYNC_WARNING)  # as PyTorch's warn_or_error_on_sync

    # Megatron's order of arguments (training.py:2724-2734 on dev).
    def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler,
                   config, forward_backward_func, iteration=None):
        sync(1)  # before the schedule
        forward_backward_func(syncs=forward_step_func)
        sync(data_iterator)  # after: the optimizer's
        return forward_step_func, data_iterator

    def forward_backward(syncs):
        sync(syncs)

    training = types.SimpleNamespace(train_step=train_step)
    counts = bench.count_syncs(training)
    assert modes == ["warn"] and len(registered) == 1
    sync(1)  # outside an iteration: Megatron's log line
    step = training.train_step
    assert step(2, 0, None, None, None, None, forward_backward) == (2, 0)
    assert step(0, 3, None, None, None, None, forward_backward_func=forward_backward) == (0, 3)
    assert step(5, 1, None, None, None, None, forward_backward, iteration=7) == (5, 1)
    assert counts == [[3, 2], [4, 0], [7, 5]]
    step(0, 0, None, None, None, None, forward_backward)
    warnings.warn("something else")
    assert counts[-1] == [1, 0] and passed == ["something else"]

    line = bench.sync_line(counts)
    parsed = bench.megatron_log.parse([line])
    assert parsed["syncs"] == {"iterations": 4, "per iteration median": 3.5, "max": 7,
                               "total": 15, "forward backward median": 1,
                               "forward backward max": 5, "forward backward none": 2}
    assert bench.megatron_log.summarise(dict(parsed, intervals=[{
        "iteration": 1, "losses": {}}]))["syncs_per_iteration"]["forward_backward_none"] == 2
    run = run_with_losses("thdc-graphs", [5.0] * 30)
    run["summary"]["syncs_per_iteration"] = {"median": 2, "max": 3, "iterations": 5,
                                             "forward_backward_median": 0,
                                             "forward_backward_max": 0}
    lines = bench.table([run])
    assert lines[0].endswith("| syncs/iter (max); in forward-backward |")
    assert lines[-1].endswith("| 2 (3); forward-backward 0 (0) |")
    assert not bench.table([run_with_losses("thdc-graphs", [5.0] * 30)])[0].endswith(
        "backward |")


def test_gated_deltanet_layers_and_their_baseline(tmp_path):
    """--gdn: megatron-core's GDN variant three layers of four, the rest of
    the flags as without it; the ratios and the band are taken against
    Megatron's eager path (its only working one with packing)."""
    import json

    plain = bench.megatron_flags("125m", 8192, 64, 300, "/tmp/cache")
    gdn = bench.megatron_flags("125m", 8192, 64, 300, "/tmp/cache", gdn=True)
    assert gdn[:len(plain)] == plain
    extra = dict(zip(gdn[len(plain)::2], gdn[len(plain) + 1::2]))
    assert extra == {"--experimental-attention-variant": "gated_delta_net",
                     "--linear-attention-freq": "4", "--linear-num-key-heads": "6",
                     "--linear-num-value-heads": "12", "--linear-key-head-dim": "64",
                     "--linear-value-head-dim": "64"}
    assert bench.baseline_of({"gdn": True}) == "megatron-eager"
    assert bench.baseline_of({}) == "megatron-graphs"

    runs = [dict(run_with_losses("megatron-eager", [5.0 - i / 100 for i in range(30)]),
                 log="a.log"),
            dict(run_with_losses("megatron-eager", [5.1 - i / 100 for i in range(30)]),
                 log="b.log"),
            dict(run_with_losses("thdc-ladder", [5.05 - i / 100 for i in range(30)]),
                 log="c.log")]
    runs[2]["summary"]["whole_run_ms_per_iteration"] = 50.0
    (tmp_path / "summary.json").write_text(json.dumps({"gdn": True, "runs": runs}))
    lines = bench.report(str(tmp_path))
    assert "| vs eager |" in lines[0]
    assert any(line.startswith("| thdc-ladder | 1 | 50.0 | 2.000x |") for line in lines)
    assert "the megatron-eager runs:" in "\n".join(lines)


def test_a_profiled_iteration_through_megatrons_own_flags(tmp_path):
    """--profile K: Megatron's own profiler flags over iteration K; the trace
    it leaves in OUT/torch_profile is moved to the run's name and
    summarised, so that the next run's cannot overwrite it."""
    import gzip
    import json

    flags = bench.profile_flags(30, str(tmp_path / "00-thdc-ladder.tensorboard"))
    assert flags == ["--profile", "--use-pytorch-profiler", "--profile-step-start", "30",
                     "--profile-step-end", "31", "--tensorboard-dir",
                     str(tmp_path / "00-thdc-ladder.tensorboard")]
    assert bench.keep_trace(str(tmp_path), "00-thdc-ladder") is None  # none written
    (tmp_path / "torch_profile").mkdir()
    with gzip.open(tmp_path / "torch_profile" / "rank-0.json.gz", "wt") as f:
        json.dump({"traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#30", "ts": 0, "dur": 10},
            {"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "ts": 2, "dur": 4}]}, f)
    kept = bench.keep_trace(str(tmp_path), "00-thdc-ladder")
    assert kept["busy_ms"] == pytest.approx(0.004) and kept["kinds"]["gemm"]["count"] == 1
    assert (tmp_path / "00-thdc-ladder.trace.json.gz").is_file()
    assert not (tmp_path / "torch_profile" / "rank-0.json.gz").exists()
    (tmp_path / "torch_profile" / "rank-0.json.gz").write_text("not a trace")
    assert "error" in bench.keep_trace(str(tmp_path), "01-megatron-graphs")


def test_the_launchers_figures_under_the_table():
    run = dict(run_with_losses("thdc-full-iteration", [5.0] * 30), log="02-x/00-x.log")
    run["summary"].update(rungs={"2048": 7, "8192": 1}, rows_of_top_rung=0.3125,
                          iteration_graphs={"eager": 2, "captured": 5, "replayed": 23,
                                            "shapes": 9, "promoted": 4, "promoted_rows": 2048,
                                            "capture_s": 3.25})
    assert bench.launcher_lines([run_with_losses("megatron-graphs", [5.0] * 30), run]) == [
        "", "- 02-x/00-x.log (thdc-full-iteration): 31.2% of the top rung's rows (microbatches "
            "by rung: 2048: 7, 8192: 1); whole-iteration graphs: 2 eager, 5 captured, 23 "
            "replayed (9 shapes; 4 at a larger shape), capture 3.2 s"]
    assert bench.launcher_lines([run_with_losses("megatron-graphs", [5.0] * 30)]) == []
