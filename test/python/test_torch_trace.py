"""bench/torch_trace.py: where an iteration's time goes, from a Chrome trace
of PyTorch's profiler (written here by hand in its format)."""
import gzip
import importlib.util
import json
import os

import pytest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location(
    "torch_trace", os.path.join(SOURCE_DIR, "bench", "torch_trace.py"))
trace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trace)


def event(cat, name, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 0}


def synthetic():
    """One step of 1000 µs on the host; on the device a GEMM 100-400, an
    attention kernel 350-500 (overlapping it), a copy 600-650 and the thdc
    step's kernel 1100-1200 (after the host's step ended)."""
    return [
        event("user_annotation", "ProfilerStep#30", 0, 1000),
        event("cuda_runtime", "cudaLaunchKernel", 10, 5),
        event("cuda_runtime", "cudaLaunchKernel", 20, 5),
        event("cuda_runtime", "cudaGraphLaunch", 30, 40),
        event("cuda_runtime", "cudaStreamSynchronize", 700, 250),
        event("cuda_driver", "cuLaunchKernel", 960, 5),
        event("kernel", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", 100, 300),
        event("kernel", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 350, 150),
        event("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 600, 50),
        event("kernel", "thdc_step_kernel", 1100, 100),
        {"ph": "i", "name": "instant", "ts": 5},
        event("cpu_op", "aten::mm", 12, 3),
    ]


def test_busy_idle_and_kinds(tmp_path):
    summary = trace.summarise(synthetic())
    assert summary["steps"] == 1
    assert summary["wall_ms"] == pytest.approx(1.2)  # to the device's last kernel
    assert summary["busy_ms"] == pytest.approx(0.55)  # 100-500, 600-650, 1100-1200
    assert summary["idle_ms"] == pytest.approx(0.65)
    assert summary["kinds"] == {"gemm": {"ms": 0.3, "count": 1},
                                "attention": {"ms": 0.15, "count": 1},
                                "thd kernels": {"ms": 0.1, "count": 1},
                                "copy": {"ms": 0.05, "count": 1}}
    assert summary["longest_gaps"] == [[0.45, "Memcpy DtoH (Device -> Pageable)",
                                        "thdc_step_kernel"],
                                       [0.1, "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
                                        "Memcpy DtoH (Device -> Pageable)"]]
    assert (summary["kernel_launches"], summary["graph_launches"]) == (3, 1)
    assert summary["synchronising_calls"] == 1
    assert summary["synchronising_ms"] == pytest.approx(0.25)
    lines = trace.lines(summary)
    assert lines[0].startswith("1 step(s): wall 1.2 ms, GPU busy 0.6 ms (46%)")
    assert "| gemm | 0.3 | 1 |" in lines

    path = tmp_path / "rank-0.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": synthetic()}, f)
    assert trace.summarise(trace.load(str(path))) == summary
    assert trace.main([str(path), "--json", str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["kinds"]["gemm"]["count"] == 1


def test_device_timeline():
    """Busy is the union of overlapping work, the span first start to last
    end, each wait named by the work around it."""
    assert trace.device_timeline([]) == (0.0, 0.0, [])
    busy, span, gaps = trace.device_timeline(
        [(10, 20, "b"), (0, 5, "a"), (12, 25, "c"), (25, 26, "d"), (30, 31, "e")])
    assert (busy, span) == (5 + 15 + 1 + 1, 31)
    assert gaps == [(5, "a", "b"), (4, "d", "e")]


def test_a_trace_without_steps_or_device_work_is_refused():
    with pytest.raises(ValueError, match="no ProfilerStep"):
        trace.summarise([event("kernel", "k", 0, 1)])
    with pytest.raises(ValueError, match="no kernel, copy or set"):
        trace.summarise([event("user_annotation", "ProfilerStep#1", 0, 1)])


def test_kinds_by_name():
    assert trace.kind_of("sm90_xmma_gemm_bf16bf16_bf16f32") == "gemm"
    assert trace.kind_of("void at::native::vectorized_elementwise_kernel<4>") == \
        "elementwise, reduce"
    assert trace.kind_of("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "nccl"
    assert trace.kind_of("multi_tensor_apply_kernel<AdamFunctor>") == "optimizer"
    assert trace.kind_of("something_new") == "other"
