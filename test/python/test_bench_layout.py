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
             "megatron_pretrain.py", "module_load_waits.py", "python_call.py"}
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
