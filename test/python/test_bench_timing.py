"""bench/timing.py, the one timing harness of bench/: host windows on a clock
that is made to tick by the test, warm-up kept out of the window, the
synchronisation inside or outside it, the spread of samples, the alternating
order of modes, and records written as JSON lines with the machine and
commit. Device windows (CUDA events) where PyTorch sees a GPU."""
import importlib.util
import json
import os

import pytest

from conftest import SOURCE_DIR

spec = importlib.util.spec_from_file_location(
    "bench_timing", os.path.join(SOURCE_DIR, "bench", "timing.py"))
timing = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timing)


class Clock:
    """time.perf_counter stand-in: advances only when the test says."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def tick(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_a_host_window_times_what_is_inside_it(clock):
    clock.tick(5.0)  # before the window: not counted
    with timing.host_window() as window:
        clock.tick(0.25)
    clock.tick(7.0)  # after: not counted
    assert window.seconds == 0.25
    assert window.millis == 250.0 and window.micros == 250000.0


def test_stop_closes_the_window_early(clock):
    with timing.host_window() as window:
        clock.tick(0.5)
        window.stop()
        clock.tick(3.0)
    assert window.seconds == 0.5


def test_a_host_window_keeps_the_cpu_time_beside_the_wall_time(clock, monkeypatch):
    """The process's CPU time over the same span: a wait counts in the wall
    time only; stop() closes both."""
    cpu = Clock()
    monkeypatch.setattr(timing.time, "process_time", cpu)
    with timing.host_window() as window:
        clock.tick(1.0)
        cpu.tick(0.25)  # a quarter of the second computing, the rest waiting
        window.stop()
        clock.tick(2.0)
        cpu.tick(2.0)
    assert (window.seconds, window.cpu_seconds) == (1.0, 0.25)


def test_host_time_leaves_warm_up_out_and_places_the_sync(clock):
    calls, syncs = [], []

    def fn():
        calls.append(clock())
        clock.tick(0.001)

    def sync():
        syncs.append(clock())
        clock.tick(0.010)  # the device finishing the queued work

    # sync inside: 4 calls (4 ms) + the closing sync (10 ms), per call
    assert timing.host_time(fn, 4, warmup=3, sync=sync) == pytest.approx((0.004 + 0.010) / 4 * 1e6)
    assert len(calls) == 7 and len(syncs) == 2
    # the warm-up's calls come before the first sync, which opens the window
    assert all(t < syncs[0] for t in calls[:3]) and all(t > syncs[0] for t in calls[3:])
    # sync outside: the window closes when the last call returns
    calls.clear()
    syncs.clear()
    assert timing.host_time(fn, 4, sync=sync, sync_inside=False) == pytest.approx(1000.0)
    assert len(syncs) == 2 and syncs[1] > calls[-1]
    # no sync at all
    assert timing.host_time(fn, 2, sync=None) == pytest.approx(1000.0)


def test_host_samples_one_per_burst(clock):
    costs = iter([0.002, 0.004, 0.006, 0.001, 0.001, 0.001])
    samples = timing.host_samples(lambda: clock.tick(next(costs)), 3)
    assert samples == pytest.approx([2000.0, 4000.0, 6000.0])
    assert timing.host_samples(lambda: clock.tick(next(costs)), 1, per_sample=3) == \
        pytest.approx([1000.0])


def test_summary_gives_the_spread():
    s = timing.summary([5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 7.0, 8.0, 9.0])
    assert s == {"n": 10, "min": 1.0, "median": 5.5, "mean": 5.5, "p90": 9.0, "max": 10.0}
    assert timing.summary([2.0]) == {"n": 1, "min": 2.0, "median": 2.0, "mean": 2.0,
                                     "p90": 2.0, "max": 2.0}
    with pytest.raises(ValueError):
        timing.summary([])


def test_modes_alternate_so_none_always_runs_first():
    assert timing.alternating(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    ran = []
    figures = timing.interleaved({"a": lambda: ran.append("a") or 1.0,
                                  "b": lambda: ran.append("b") or 2.0}, 4)
    assert ran == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert figures == {"a": [1.0] * 4, "b": [2.0] * 4}


def test_gc_paused_restores_the_collector():
    import gc

    assert gc.isenabled()
    with timing.gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with timing.gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()


def test_records_carry_the_machine_and_commit(tmp_path):
    path = tmp_path / "runs.jsonl"
    first = timing.append_record(str(path), {"variant": "thdc", "device_us": 4.5})
    timing.append_record(str(path), {"variant": "eager", "machine": {"device": "given"}})
    records = timing.read_records(str(path))
    assert records[0] == first and records[0]["device_us"] == 4.5
    assert {"python", "processor", "commit"} <= set(records[0]["machine"])
    assert records[1]["machine"] == {"device": "given"}  # a record's own machine is kept
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_device_window_times_a_sleep():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    torch.cuda.synchronize()
    windows = timing.device_windows(3)
    for window in windows:
        with window:
            torch.cuda._sleep(1_000_000)
    assert all(window.millis > 0 for window in windows)
    assert timing.replay_time(lambda: torch.cuda._sleep(100_000), 10, settle=True) > 0
