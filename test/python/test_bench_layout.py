"""The shape of bench/: every Python bench script that times something times
it through bench/timing.py (no clock or CUDA event of its own, code handed
to a child process included), and each checker here catches what it is
meant to catch."""
import os
import re

from conftest import SOURCE_DIR

BENCH = os.path.join(SOURCE_DIR, "bench")

# A clock read or a timing event outside bench/timing.py.
OWN_TIMING = re.compile(
    r"perf_counter|process_time|\btime\.time\(|\btime\.monotonic|\btime_ns\b|\bimport timeit\b|"
    r"\btimeit\.|enable_timing|\.elapsed_time\(|from time import")


def own_timing(text):
    """The lines of `text` that time something themselves: (line, text)."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if OWN_TIMING.search(line)]


def bench_scripts():
    return sorted(name for name in os.listdir(BENCH)
                  if name.endswith(".py") and name != "timing.py")


def test_no_bench_script_times_its_own_loop():
    offenders = {}
    for name in bench_scripts():
        with open(os.path.join(BENCH, name)) as f:
            found = own_timing(f.read())
        if found:
            offenders[name] = found
    assert not offenders, "time these through bench/timing.py: " + repr(offenders)


def test_the_scripts_that_time_use_the_module():
    """The scripts with a timed window: each imports bench/timing.py."""
    timed = {"attention_args.py", "attention_tax.py", "eager.py", "get_batch.py",
             "jit_times.py", "ladder_compile.py", "linear_attention.py", "load_inputs.py",
             "megatron_gpt.py", "megatron_pretrain.py", "module_load_waits.py",
             "python_call.py"}
    assert timed <= set(bench_scripts())
    for name in sorted(timed):
        with open(os.path.join(BENCH, name)) as f:
            text = f.read()
        assert re.search(r"^\s*(import timing\b|from timing import)", text, re.M), name
        assert "timing." in text or "host_window" in text, name


def test_the_check_finds_a_loop_timed_by_hand():
    text = "\n".join([
        "import time",
        "start = time.perf_counter()",
        "ok = timing.host_time(fn, 10)",
        "begin = torch.cuda.Event(enable_timing=True)",
        "ms = begin.elapsed_time(end)",
        "t0 = time.time()",
        "from time import monotonic",
        "done = torch.cuda.Event()",  # an event that only orders work: fine
        "time.sleep(1)",
    ])
    assert [number for number, _ in own_timing(text)] == [2, 4, 5, 6, 7]


RESULTS = os.path.join(BENCH, "results")
# What a result folder may hold: its RESULTS.md and a run's report (.md),
# data (JSON, JSON lines, CSV) and figures.
KEPT = (".md", ".json", ".jsonl", ".csv", ".svg", ".png")
SCRIPT_NAMES = re.compile(r"(^|[-_.])(probe|site)([-_.]|$)")


def misplaced(paths):
    """The paths (relative to bench/results) that are no result: scripts,
    patches, probes, logs, archives."""
    return sorted(p for p in paths
                  if not p.endswith(KEPT) or SCRIPT_NAMES.search(os.path.basename(p).lower()))


def result_files():
    found = []
    for dirpath, _, files in os.walk(RESULTS):
        found += [os.path.relpath(os.path.join(dirpath, f), RESULTS) for f in files]
    return found


def test_results_hold_data_only():
    files = result_files()
    assert files, "bench/results is empty"
    assert misplaced(files) == [], "scripts, patches, probes and logs live in git history"


def test_every_topic_has_its_results_and_runs():
    for topic in sorted(os.listdir(RESULTS)):
        folder = os.path.join(RESULTS, topic)
        assert os.path.isdir(folder), f"bench/results/{topic}: a file outside a topic folder"
        assert sorted(os.listdir(folder)) == ["RESULTS.md", "runs"], topic
        with open(os.path.join(folder, "RESULTS.md")) as f:
            text = f.read()
        assert "## Newest figures" in text, topic
        for run in os.listdir(os.path.join(folder, "runs")):
            assert f"## {run}" in text, f"{topic}/RESULTS.md has no section for run {run}"


def test_the_check_finds_what_does_not_belong():
    assert misplaced(["t/RESULTS.md", "t/runs/r/bench.jsonl", "t/runs/r/machine.json",
                      "t/runs/r/outcomes.csv", "t/runs/r/scaling.svg", "t/runs/r/losses.png",
                      "t/runs/r/table.md"]) == []
    assert misplaced(["t/runs/r/run.sh", "t/runs/r/site.sh", "t/runs/r/host_time.py",
                      "t/runs/r/rows.patch", "t/runs/r/probe.cu", "t/runs/r/pytest.txt",
                      "t/runs/r/train.log", "t/runs/r/x.log.xz", "t/runs/r/profiles.tar.gz",
                      "t/runs/r/probe-l2.json"]) == sorted([
                          "t/runs/r/run.sh", "t/runs/r/site.sh", "t/runs/r/host_time.py",
                          "t/runs/r/rows.patch", "t/runs/r/probe.cu", "t/runs/r/pytest.txt",
                          "t/runs/r/train.log", "t/runs/r/x.log.xz", "t/runs/r/profiles.tar.gz",
                          "t/runs/r/probe-l2.json"])


def test_docs_cite_the_topic_results():
    """A figure's citation names a topic's RESULTS.md (or a kept file of a
    run), never a dated folder that is gone."""
    stale = []
    cited = re.compile(r"bench/results/[A-Za-z0-9._/-]+")
    for folder in ("", "docs", "examples", os.path.join("examples", "train"),
                   os.path.join("examples", "megatron"), "bench"):
        base = os.path.join(SOURCE_DIR, folder)
        for name in sorted(os.listdir(base)):
            if not name.endswith(".md"):
                continue
            with open(os.path.join(base, name)) as f:
                for number, line in enumerate(f, 1):
                    for path in cited.findall(line):
                        path = path.rstrip(".,:;")
                        if not os.path.exists(os.path.join(SOURCE_DIR, path)):
                            stale.append(f"{os.path.join(folder, name)}:{number}: {path}")
    assert stale == []
