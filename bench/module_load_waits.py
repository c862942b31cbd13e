#!/usr/bin/env python3
"""Which CUDA driver calls of a bundle load wait for work queued on the
device: each call is timed behind a kernel that sleeps about half a second
(PyTorch's torch.cuda._sleep), and the sleep's event says whether it had
finished when the call returned.

    python3 bench/module_load_waits.py BUNDLE_DIR   (a bundle with a cubin)

With the thdc package importable, thdc.load(BUNDLE_DIR) is timed the same
way, and once more inside a torch.cuda.graph capture.
"""
import ctypes
import glob
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402  (bench/timing.py)


def main():
    bundle = sys.argv[1]
    cuda = ctypes.CDLL("libcuda.so.1")
    cubin = open(glob.glob(bundle + "/*.cubin")[0], "rb").read()
    entry = glob.glob(bundle + "/*.cubin")[0].rsplit("/", 1)[1][: -len(".cubin")].encode()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()

    def behind_sleep(label, call):
        done = torch.cuda.Event()
        torch.cuda._sleep(1_000_000_000)
        done.record()
        with timing.host_window() as window:
            rc = call()
        ms = window.millis
        print(f"{label} behind a queued sleep: rc {rc}, {ms:.2f} ms, sleep finished: {done.query()}")
        torch.cuda.synchronize()

    modules = []

    def load():
        module = ctypes.c_void_p()
        rc = cuda.cuModuleLoadData(ctypes.byref(module), cubin)
        modules.append(module)
        return rc

    behind_sleep("cuModuleLoadData", load)
    function = ctypes.c_void_p()
    behind_sleep("cuModuleGetFunction",
                 lambda: cuda.cuModuleGetFunction(ctypes.byref(function), modules[0], entry))
    address, size = ctypes.c_uint64(), ctypes.c_size_t()
    behind_sleep("cuModuleGetGlobal",
                 lambda: cuda.cuModuleGetGlobal_v2(ctypes.byref(address), ctypes.byref(size),
                                                   modules[0], b"thdc_buffer_table"))
    stream = ctypes.c_void_p()
    behind_sleep("cuStreamCreate (non-blocking)", lambda: cuda.cuStreamCreate(ctypes.byref(stream), 1))
    table = (ctypes.c_int64 * 256)()  # the largest table: 8 + 2 * 64 entries
    behind_sleep("cuMemcpyDtoHAsync+sync on that stream",
                 lambda: cuda.cuMemcpyDtoHAsync_v2(table, address, size, stream)
                 or cuda.cuStreamSynchronize(stream))
    behind_sleep("cuModuleLoadData again", load)
    behind_sleep("cuModuleUnload", lambda: cuda.cuModuleUnload(modules[1]))

    try:
        import thdc
    except ImportError:
        return
    behind_sleep("thdc.load", lambda: thdc.load(bundle, backend="cuda").backend)
    for _ in range(3):
        with timing.host_window() as window:
            thdc.load(bundle, backend="cuda")
        print(f"thdc.load on an idle GPU: {window.millis:.2f} ms")
    graph = torch.cuda.CUDAGraph()
    x = torch.zeros(16, device="cuda")
    try:
        with torch.cuda.graph(graph):
            try:
                thdc.load(bundle, backend="cuda")
                print("thdc.load inside a capture: loaded")
            except RuntimeError as error:
                print(f"thdc.load inside a capture: {error}")
            x += 1
        graph.replay()
        torch.cuda.synchronize()
        print("the capture around it: replayed")
    except RuntimeError as error:
        print(f"the capture around it: {str(error).splitlines()[0]}")


if __name__ == "__main__":
    main()
