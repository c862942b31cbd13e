#!/usr/bin/env python3
"""Where the time of a module load goes: each case in a new process."""
import ctypes, json, os, subprocess, sys, time, threading

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = b""".version 8.0
.target sm_90
.address_size 64
.visible .entry tiny() { ret; }
"""

def child(case):
    cu = ctypes.CDLL("libcuda.so.1")
    t0 = time.perf_counter()
    assert cu.cuInit(0) == 0
    dev = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    free = ctypes.c_size_t(); tot = ctypes.c_size_t()
    cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(tot))
    out = {"case": case, "context_ms": (time.perf_counter() - t0) * 1e3}
    ptx = open(os.path.join(HERE, "k32k.ptx"), "rb").read() + b"\0"
    cubin = open(os.path.join(HERE, "k32k.cubin"), "rb").read()
    name = b"megatron_graph_step"

    def timed(label, fn):
        s = time.perf_counter(); r = fn(); out[label] = round((time.perf_counter() - s) * 1e3, 4); return r

    def load(data, opts=None):
        m = ctypes.c_void_p()
        if opts is None:
            rc = cu.cuModuleLoadData(ctypes.byref(m), ctypes.c_char_p(data))
        else:
            n = len(opts)
            keys = (ctypes.c_int * n)(*[k for k, _ in opts])
            vals = (ctypes.c_void_p * n)(*[v for _, v in opts])
            rc = cu.cuModuleLoadDataEx(ctypes.byref(m), ctypes.c_char_p(data), n, keys, vals)
        assert rc == 0, rc
        return m

    def fn_and_globals(m, tag):
        f = ctypes.c_void_p()
        timed(tag + "get_function_ms", lambda: cu.cuModuleGetFunction(ctypes.byref(f), m, name))
        for sym in (b"thdc_buffer_table", b"thdc_entry_name"):
            addr = ctypes.c_uint64(); size = ctypes.c_size_t()
            rc = timed(tag + "get_global_ms", lambda: cu.cuModuleGetGlobal_v2(ctypes.byref(addr), ctypes.byref(size), m, sym))
            if rc == 0:
                buf = ctypes.create_string_buffer(size.value)
                timed(tag + "dtoh_ms", lambda: cu.cuMemcpyDtoH_v2(buf, addr, size))
            else:
                out[tag + "global_rc_" + sym.decode()] = rc

    if case == "tiny_then_ptx":
        timed("tiny_ptx_ms", lambda: load(TINY + b"\0"))
        timed("ptx_ms", lambda: load(ptx))
    elif case == "ptx_first":
        timed("ptx_ms", lambda: load(ptx))
        timed("ptx_again_ms", lambda: load(ptx))
    elif case.startswith("ptx_O"):
        level = int(case[5:])
        timed("tiny_ptx_ms", lambda: load(TINY + b"\0"))
        timed("ptx_ms", lambda: load(ptx, [(7, level)]))  # CU_JIT_OPTIMIZATION_LEVEL
    elif case == "overlap":
        th = threading.Thread(target=lambda: (cu.cuCtxSetCurrent(ctx), load(TINY + b"\0")))
        s = time.perf_counter(); th.start(); time.sleep(0.035); th.join(); out["thread_joined_after_ms"] = (time.perf_counter() - s) * 1e3
        timed("ptx_ms", lambda: load(ptx))
    elif case.startswith("cubin"):
        m = timed("cubin_load_ms", lambda: load(cubin))
        fn_and_globals(m, "first_")
        m2 = timed("cubin_load_again_ms", lambda: load(cubin))
        fn_and_globals(m2, "again_")
        for i in range(5):
            timed("cubin_load_%d_ms" % i, lambda: load(cubin))
    elif case == "library":
        lib = ctypes.c_void_p()
        timed("library_load_ms", lambda: cu.cuLibraryLoadData(ctypes.byref(lib), ctypes.c_char_p(cubin), None, None, 0, None, None, 0))
        k = ctypes.c_void_p()
        timed("library_get_kernel_ms", lambda: cu.cuLibraryGetKernel(ctypes.byref(k), lib, name))
        f = ctypes.c_void_p()
        timed("kernel_get_function_ms", lambda: cu.cuKernelGetFunction(ctypes.byref(f), k))
        addr = ctypes.c_uint64(); size = ctypes.c_size_t()
        timed("library_get_global_ms", lambda: cu.cuLibraryGetGlobal(ctypes.byref(addr), ctypes.byref(size), lib, b"thdc_buffer_table"))
        lib2 = ctypes.c_void_p()
        timed("library_load_again_ms", lambda: cu.cuLibraryLoadData(ctypes.byref(lib2), ctypes.c_char_p(cubin), None, None, 0, None, None, 0))
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        child(sys.argv[1]); sys.exit()
    cases = ["cubin", "library"]
    for case in cases:
        for rep in range(5):
            env = dict(os.environ, CUDA_CACHE_DISABLE="1")
            r = subprocess.run([sys.executable, __file__, case], env=env, capture_output=True, text=True)
            print(r.stdout.strip() or r.stderr.strip()[-400:], flush=True)
    for mode in ("EAGER", "LAZY"):
        env = dict(os.environ, CUDA_CACHE_DISABLE="1", CUDA_MODULE_LOADING=mode)
        r = subprocess.run([sys.executable, __file__, "cubin"], env=env, capture_output=True, text=True)
        print(mode, r.stdout.strip() or r.stderr.strip()[-400:], flush=True)
