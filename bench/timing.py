"""The one timing harness of bench/: every bench script that times something
times it here, so that every mode of a comparison gets the same clock, the
same warm-up and the same statistics.

    import timing
    with timing.host_window() as host:        # wall time on the host
        for _ in range(calls):
            step()
    host.micros / calls
    with timing.device_window() as device:    # CUDA events on the current stream
        for _ in range(calls):
            graph.replay()
    device.micros / calls                     # waits for the end event
    timing.host_time(step, calls)             # µs per call, synchronised
    timing.replay_time(graph.replay, replays) # device µs per replay
    timing.summary(samples)                   # n, min, median, mean, p90, max

The rules of the benchmark notes that this module carries:

- Warm-up apart from the timed window: the helpers take `warmup` calls that
  are never timed; a window times only what is inside it.
- Order effects removed: `alternating(modes, rounds)` runs the modes in
  rounds, every other round reversed (ABC CBA ...), so that no mode always
  runs first or last.
- Spread beside the centre: `summary` gives min / median / mean / p90 / max
  of the samples, never a single figure.
- The machine and the commit beside the figures: `machine()` and
  `append_record` write them into every JSON line.

Host time is Python's `time.perf_counter` (monotonic, the highest
resolution the host has), CPU time the process's `time.process_time`;
device time is a pair of CUDA events recorded on a stream. PyTorch is
imported only when device time, a synchronisation or the device's name is
asked for, so host timing works without it (and is tested on a machine
without a GPU)."""
from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cuda():
    """torch.cuda where PyTorch is installed and sees a GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda if torch.cuda.is_available() else None


def synchronize() -> None:
    """Waits for the GPU where there is one (through PyTorch); else nothing."""
    cuda = _cuda()
    if cuda is not None:
        cuda.synchronize()


class HostWindow:
    """The wall time of the code inside `with`, on the host's performance
    counter, and the process's CPU time over the same span (every thread's:
    a wall time well above it is time spent waiting). `seconds` and
    `cpu_seconds` are set when the block ends (or by `stop()`, which ends the
    window early: code after it is not counted)."""

    def __init__(self) -> None:
        self.seconds: Optional[float] = None
        self.cpu_seconds: Optional[float] = None
        self._start = 0.0
        self._cpu_start = 0.0

    def __enter__(self) -> "HostWindow":
        self.seconds = self.cpu_seconds = None
        self._cpu_start = time.process_time()
        self._start = time.perf_counter()
        return self

    def stop(self) -> float:
        if self.seconds is None:
            self.seconds = time.perf_counter() - self._start
            self.cpu_seconds = time.process_time() - self._cpu_start
        return self.seconds

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def millis(self) -> float:
        return self.stop() * 1e3

    @property
    def micros(self) -> float:
        return self.stop() * 1e6


def host_window() -> HostWindow:
    """A host wall-time window: `with host_window() as w: ...; w.seconds`."""
    return HostWindow()


class DeviceWindow:
    """CUDA events recorded on `stream` (default: the current stream) when
    the `with` block begins and ends: the device time between the two
    points. The events are made when the window is made, so a list of
    windows made before a loop allocates nothing inside it. `millis` and
    `micros` wait for the end event; `wait()` does only that."""

    def __init__(self, stream=None) -> None:
        import torch

        self._stream = stream
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def __enter__(self) -> "DeviceWindow":
        self.start.record(self._stream)
        return self

    def __exit__(self, *exc) -> None:
        self.end.record(self._stream)

    def wait(self) -> None:
        self.end.synchronize()

    @property
    def millis(self) -> float:
        self.end.synchronize()
        return self.start.elapsed_time(self.end)

    @property
    def micros(self) -> float:
        return self.millis * 1e3


def device_window(stream=None) -> DeviceWindow:
    """A device-time window: `with device_window() as w: ...; w.millis`."""
    return DeviceWindow(stream)


def device_windows(count: int, stream=None) -> List[DeviceWindow]:
    """`count` windows, their events made now (before the timed loop)."""
    return [DeviceWindow(stream) for _ in range(count)]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's garbage collector off inside the block (as timeit does: no
    collection pauses inside a sample), restored after."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def host_time(fn: Callable[[], object], calls: int, warmup: int = 0,
              sync: Optional[Callable[[], None]] = synchronize,
              sync_inside: bool = True) -> float:
    """Host µs per call of `calls` calls of `fn` queued back to back, after
    `warmup` untimed calls and a `sync()`. With `sync_inside` the closing
    `sync()` is inside the window (the time until the work is done), without
    it the window closes when the last call returns (the host's own cost)
    and the sync follows. `sync=None`: no synchronisation at all."""
    for _ in range(warmup):
        fn()
    if sync is not None:
        sync()
    with host_window() as window:
        for _ in range(calls):
            fn()
        if sync is not None and sync_inside:
            sync()
    if sync is not None and not sync_inside:
        sync()
    return window.micros / calls


def host_samples(fn: Callable[[], object], samples: int, per_sample: int = 1) -> List[float]:
    """Host µs per call, one sample per `per_sample` back-to-back calls,
    with no synchronisation (the host's own cost of each call)."""
    times = []
    for _ in range(samples):
        with host_window() as window:
            for _ in range(per_sample):
                fn()
        times.append(window.micros / per_sample)
    return times


def replay_time(replay: Callable[[], object], replays: int, warmup: int = 1,
                settle: bool = False) -> float:
    """Device µs per replay of `replays` back-to-back replays (of a CUDA
    graph, or any launch) between two events on the current stream, after
    `warmup` untimed replays (and, with `settle`, a synchronize: the window
    then starts on an idle GPU)."""
    for _ in range(warmup):
        replay()
    if settle:
        synchronize()
    with device_window() as window:
        for _ in range(replays):
            replay()
    return window.micros / replays


def summary(samples: Sequence[float]) -> Dict[str, float]:
    """n, min, median, mean, p90 and max of the samples (p90: the sorted
    samples' element at index int(0.9 (n - 1)), as eager.py has always
    reported it)."""
    if not samples:
        raise ValueError("summary of no samples")
    ordered = sorted(samples)
    n = len(ordered)
    return {"n": n, "min": ordered[0], "median": statistics.median(ordered),
            "mean": statistics.fmean(ordered), "p90": ordered[int(0.9 * (n - 1))],
            "max": ordered[-1]}


def alternating(modes: Sequence[str], rounds: int) -> List[str]:
    """The modes in `rounds` rounds, every other round reversed (ABC CBA ABC
    ...): no mode always runs first or last in a process or on a machine."""
    order: List[str] = []
    for r in range(rounds):
        order += list(modes) if r % 2 == 0 else list(reversed(modes))
    return order


def interleaved(modes: Dict[str, Callable[[], float]], rounds: int) -> Dict[str, List[float]]:
    """Calls every mode's timing function once a round, in `alternating`
    order, and gathers each mode's figures: one per round."""
    figures: Dict[str, List[float]] = {name: [] for name in modes}
    for name in alternating(list(modes), rounds):
        figures[name].append(modes[name]())
    return figures


def commit() -> Optional[str]:
    """The repository's commit (with `-dirty` when the tree has changes),
    or None outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def machine() -> Dict[str, object]:
    """What a figure was measured on: the card, driver, CUDA, PyTorch, the
    host's Python and processor, and the commit."""
    record: Dict[str, object] = {"python": platform.python_version(),
                                 "processor": platform.machine(), "commit": commit()}
    try:
        import torch
    except ImportError:
        return record
    record["torch"] = torch.__version__
    record["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        record["device"] = torch.cuda.get_device_name()
        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                     "--format=csv,noheader"], capture_output=True, text=True)
            record["driver"] = driver.stdout.strip().splitlines()[0] if driver.stdout else None
        except OSError:
            record["driver"] = None
    return record


def append_record(path: str, record: Dict[str, object],
                  with_machine: bool = True) -> Dict[str, object]:
    """Appends `record` as one JSON line to `path`, with the machine and the
    commit under "machine" unless the record has them; returns what it
    wrote."""
    line = dict(record)
    if with_machine and "machine" not in line:
        line["machine"] = machine()
    with open(path, "a") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
    return line


def read_records(path: str) -> List[Dict[str, object]]:
    """The JSON lines of `path` (blank lines skipped)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


__all__ = ["HostWindow", "DeviceWindow", "host_window", "device_window", "device_windows",
           "gc_paused", "host_time", "host_samples", "replay_time", "summary", "alternating",
           "interleaved", "synchronize", "machine", "commit", "append_record", "read_records"]
