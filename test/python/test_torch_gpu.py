"""thdc from PyTorch on a GPU: calls on torch tensors against the reference,
one call captured in torch.cuda.graph and replayed with new microbatches,
torch.compile through the custom op, the megatron drop-in (PackedSeqParams,
seq_idx against megatron-core, capture), PyTorch's variable-length attention
fed with the outputs, CuPy arrays, no host synchronisation, and, with two
GPUs, the caller's device; examples/pack_microbatch.mlir on torch tensors
(pools planned into microbatches) and examples/python/global_batch.py in
one process. Skipped without PyTorch or a GPU.

Kernels come from bundles compiled elsewhere (THDC_BUNDLES, written by
scripts/make-gpu-bundles.sh) or, where thdc has a JIT, are compiled here."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
import thdc.torch  # noqa: E402
from conftest import EXAMPLE, SOURCE_DIR  # noqa: E402
from microbatches import (INPUTS, POOLS, mismatches, random_microbatch,  # noqa: E402
                          random_pool, reference, reference_pack, step_inputs)

PACK = os.path.join(SOURCE_DIR, "examples", "pack_microbatch.mlir")

BUNDLES = os.environ.get("THDC_BUNDLES", os.path.join(SOURCE_DIR, "build-gpu-bundles"))


def bundle_name(pipeline, C, cp, N):
    return f"{pipeline}_C{C}_cp{cp}_N{N}"


def gpu_kernel(pipeline, C, cp, N, device=-1):
    """The kernel of `pipeline` ("megatron_graph_step" or "megatron_step")."""
    path = os.path.join(BUNDLES, "python", bundle_name(pipeline, C, cp, N))
    if os.path.isdir(path):
        return thdc.load(path, backend="cuda", device=device), path
    if thdc.has_jit:
        source = EXAMPLE if pipeline == "megatron_graph_step" else thdc.pipeline_path(pipeline)
        return thdc.compile(source, {"C": C, "cp": cp, "N": N}, backend="cuda"), None
    pytest.skip(f"no bundle {path} and no JIT")


def to_device(mb, device="cuda"):
    return {k: torch.from_numpy(v).to(device) for k, v in mb.items()}


def host(outputs):
    return {k: v.cpu().numpy() for k, v in outputs._asdict().items()}


def test_torch_tensors_match_reference():
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    assert kernel.backend == "cuda"
    rng = np.random.default_rng(1)
    for _ in range(50):
        mb = random_microbatch(rng, C, cp, N)
        out = kernel(**to_device(mb))
        assert mismatches(host(out), reference(mb, C, cp, N)) == []


def test_graph_capture_replays_with_new_microbatches():
    """One call captured in torch.cuda.graph, replayed 1000 times; before each
    replay a new microbatch (new num_seqs and lengths) is copied into the
    static inputs, and after it every output is compared with the reference."""
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    rng = np.random.default_rng(2)
    static_in = to_device(random_microbatch(rng, C, cp, N))
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    static_out = [torch.empty(a.shape, dtype=getattr(torch, a.dtype), device="cuda") for a in spec]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture
        kernel(**static_in, out=static_out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel(**static_in, out=static_out)
    failures, num_seqs_seen = [], set()
    for replay in range(1000):
        mb = random_microbatch(rng, C, cp, N)
        num_seqs_seen.add(int(mb["num_seqs"][0]))
        for name, value in mb.items():
            static_in[name].copy_(torch.from_numpy(value))
        for t in static_out:
            t.fill_(0x55 if t.dtype != torch.bool else True)
        graph.replay()
        outputs = dict(zip((a.name for a in spec), (t.cpu().numpy() for t in static_out)))
        bad = mismatches(outputs, reference(mb, C, cp, N))
        if bad:
            failures.append((replay, bad))
    assert failures == []
    assert len(num_seqs_seen) > 10


def test_calls_with_outputs_given_do_not_synchronise():
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    inputs = to_device(random_microbatch(np.random.default_rng(3), C, cp, N))
    outputs = kernel(**inputs)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            kernel(**inputs, out=outputs)
        kernel(**inputs, out=outputs, stream=torch.cuda.current_stream())
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_runs_on_the_current_torch_stream():
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    mb = random_microbatch(np.random.default_rng(4), C, cp, N)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        inputs = to_device(mb)
        out = kernel(**inputs)
        # Ordered after the copies on this stream, and before this read.
        result = host(out)
    assert mismatches(result, reference(mb, C, cp, N)) == []


def test_bad_calls_on_gpu_raise():
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    mb = random_microbatch(np.random.default_rng(5), C, cp, N)
    inputs = to_device(mb)
    cpu_inputs = dict(inputs, tokens=inputs["tokens"].cpu())
    with pytest.raises(ValueError, match="input 'tokens' is in cpu, but the kernel runs on cuda:"):
        kernel(**cpu_inputs)
    with pytest.raises(TypeError, match="input 'labels' must have dtype int64; got int32"):
        kernel(**dict(inputs, labels=inputs["labels"].int()))
    strided = torch.zeros(2 * C * cp, dtype=torch.int64, device="cuda")[::2]
    with pytest.raises(ValueError, match="input 'tokens' must be contiguous"):
        kernel(**dict(inputs, tokens=strided))
    with pytest.raises(ValueError, match="must have shape"):
        kernel(**dict(inputs, cu_seqlens=inputs["cu_seqlens"][:-1]))


def test_manifest_that_disagrees_with_the_kernel_is_refused(tmp_path):
    """A manifest edited to another buffer size or type (as if taken from
    another bundle) is refused at load: the kernel states its own buffers.
    The edits drop the manifest's own hash, which refuses them first."""
    import shutil

    _, path = gpu_kernel("megatron_graph_step", 1024, 2, 33)
    if path is None:
        pytest.skip("needs a bundle")
    edits = {
        "size": (('"elements": 2048', '"elements": 4096'),
                 "buffer 'tokens' has 4096 elements, but the kernel was compiled for 2048"),
        "type": (('"type": "i64"', '"type": "i32"'),
                 "buffer 'tokens' has the type 'i32', but the kernel was compiled for another"),
    }
    for name, ((old, new), message) in edits.items():
        edited = tmp_path / name
        shutil.copytree(path, edited)
        manifest = (edited / "manifest.json").read_text()
        (edited / "manifest.json").write_text(manifest.replace(old, new, 1))
        with pytest.raises(RuntimeError, match="does not match the hash in manifest.json.sha256"):
            thdc.load(edited, backend="cuda")
        (edited / "manifest.json.sha256").unlink()
        with pytest.raises(RuntimeError, match=message):
            thdc.load(edited, backend="cuda")


def test_load_inside_a_graph_capture_is_refused_and_the_capture_survives():
    """A module load cannot be captured (it waits for the device); thdc.load
    says so instead of letting the capture fail when it ends."""
    kernel, path = gpu_kernel("megatron_graph_step", 1024, 2, 33)
    if path is None:
        pytest.skip("needs a bundle")
    mb = random_microbatch(np.random.default_rng(8), 1024, 2, 33)
    inputs = to_device(mb)
    outputs = kernel(**inputs)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
            thdc.load(path, backend="cuda")
        kernel(**inputs, out=outputs)
    graph.replay()
    torch.cuda.synchronize()
    assert mismatches(host(outputs), reference(mb, 1024, 2, 33)) == []


def _current_context():
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    context = ctypes.c_void_p()
    assert cuda.cuCtxGetCurrent(ctypes.byref(context)) == 0
    return context.value


def test_a_thread_without_a_context_keeps_none():
    """A thread that never touched CUDA has no current context; a launch from
    it (device=0) makes the device's primary context current only for the
    launch and leaves the thread as it found it."""
    import threading

    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    mb = random_microbatch(np.random.default_rng(16), C, cp, N)
    inputs = to_device(mb)
    outputs = kernel(**inputs)
    torch.cuda.synchronize()
    seen = {}

    def worker():
        seen["before"] = _current_context()
        kernel(**inputs, out=outputs, device=0, stream=0)
        seen["after"] = _current_context()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    torch.cuda.synchronize()
    assert seen == {"before": None, "after": None}
    assert mismatches(host(outputs), reference(mb, C, cp, N)) == []


def test_torch_compile_traces_through_the_custom_op():
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    run = thdc.torch.op(kernel)
    mb = random_microbatch(np.random.default_rng(6), C, cp, N)
    inputs = [to_device(mb)[name] for name in INPUTS]

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(*args):
        outs = run(*args)
        return outs[0] * 2, outs[8]

    doubled, status = step(*inputs)
    expected = reference(mb, C, cp, N)
    assert np.array_equal(doubled.cpu().numpy(), expected["tokens"] * 2)
    assert int(status.item()) == expected["status"]

    run_out = thdc.torch.op(kernel, out=True)
    outs = list(kernel(*inputs))
    for t in outs:
        t.zero_()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step_out(args, results):
        run_out(args, results)
        return results[0] + 0

    assert np.array_equal(step_out(inputs, outs).cpu().numpy(), expected["tokens"])


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    mb = random_microbatch(np.random.default_rng(7), C, cp, N)
    out = kernel(**{k: cupy.asarray(v) for k, v in mb.items()})
    assert type(out.tokens).__module__.startswith("cupy")
    assert mismatches({k: cupy.asnumpy(v) for k, v in out._asdict().items()},
                      reference(mb, C, cp, N)) == []


def test_jax_inputs():
    """JAX arrays (read-only, no exchange table) as inputs through nanobind's
    DLPack import; outputs given as torch tensors on the same GPU."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    jax.config.update("jax_enable_x64", True)
    C, cp, N = 1024, 2, 33
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
    mb = random_microbatch(np.random.default_rng(15), C, cp, N)
    gpu = [d for d in jax.devices() if d.platform == "gpu"][0]
    inputs = {k: jax.device_put(v, gpu) for k, v in mb.items()}
    for value in inputs.values():
        value.block_until_ready()
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    outs = [torch.empty(a.shape, dtype=getattr(torch, a.dtype), device="cuda") for a in spec]
    out = kernel(**inputs, out=outs)
    torch.cuda.synchronize()
    assert mismatches(host(out), reference(mb, C, cp, N)) == []


@pytest.mark.parametrize("cp", [1, 2])
def test_megatron_graph_step_dropin(cp):
    C, N = 1024, 33 if cp > 1 else 17
    kernel, bundle = gpu_kernel("megatron_step", C, cp, N)
    rng = np.random.default_rng(8 + cp)
    rank = cp - 1
    step = thdc.megatron.GraphStep(C, N, cp, rank, bundle=bundle)
    static_batch, params = step.run()
    # The reference framework's graph-mode convention.
    assert params.qkv_format == "thd" and params.pad_between_seqs is False
    assert params.cu_seqlens_q is params.cu_seqlens_kv is params.cu_seqlens_q_padded
    assert params.cu_seqlens_q_padded is params.cu_seqlens_kv_padded
    assert params.max_seqlen_q == params.max_seqlen_kv == C * cp
    assert params.total_tokens is None
    assert params.seq_idx.shape == (1, C * cp) and params.seq_idx.dtype == torch.int32
    assert static_batch["tokens"].shape == (1, C) and static_batch["padding_mask"].dtype == torch.bool

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.run()
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    for trial in range(200):
        mb = random_microbatch(rng, C, cp, N, rank=rank)
        if trial % 2:
            step.load_inputs(**step_inputs(mb, C, cp))
            graph.replay()
        else:
            batch, params = step(**step_inputs(mb, C, cp))
            assert batch["tokens"] is static_batch["tokens"]
        step.accumulate_status(flag)
        expected = reference(mb, C, cp, N)
        got = host(step.outputs)
        assert mismatches(got, expected) == [], f"trial {trial}"
        assert np.array_equal(got["seq_idx"],
                              thdc.reference.seq_idx(expected["cu_seqlens_padded"], C * cp))
    assert int(flag.item()) == 0
    assert step.describe_status() == "ok"

    compact = thdc.megatron.GraphStep(C, N, cp, rank, bundle=bundle, convention="compact")
    _, params = compact.run()
    assert params.pad_between_seqs is True
    assert params.cu_seqlens_q is compact.outputs.cu_seqlens
    assert params.cu_seqlens_q_padded is compact.outputs.cu_seqlens_padded


def test_megatron_dropin_under_sync_debug_mode():
    C, N = 1024, 17
    _, bundle = gpu_kernel("megatron_step", C, 1, N)
    step = thdc.megatron.GraphStep(C, N, 1, 0, bundle=bundle)
    mb = step_inputs(random_microbatch(np.random.default_rng(10), C, 1, N, rank=0), C, 1)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            step(**mb)
            step.accumulate_status(torch.zeros(1, dtype=torch.int32, device="cuda"))
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _varlen_attn(q, k, v, cu, max_len):
    from torch.nn.attention.varlen import varlen_attn

    try:
        return varlen_attn(q, k, v, cu, cu, max_len, max_len, window_size=(-1, 0))
    except TypeError:  # releases that spell causal as is_causal
        return varlen_attn(q, k, v, cu, cu, max_len, max_len, is_causal=True)


def test_outputs_drive_varlen_attention():
    """cp = 1: the step's cu arrays and max_seqlen fed to PyTorch's
    variable-length (flash) attention give every real token the causal
    attention over its own sequence, computed separately per sequence."""
    pytest.importorskip("torch.nn.attention.varlen")
    C, N, heads, dim = 1024, 17, 4, 64
    _, bundle = gpu_kernel("megatron_step", C, 1, N)
    step = thdc.megatron.GraphStep(C, N, 1, 0, bundle=bundle)
    rng = np.random.default_rng(12)
    torch.manual_seed(12)
    checked = 0
    for _ in range(10):
        mb = random_microbatch(rng, C, 1, N, rank=0)
        batch, params = step(**step_inputs(mb, C, 1))
        q, k, v = (torch.randn(C, heads, dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = _varlen_attn(q, k, v, params.cu_seqlens_q, params.max_seqlen_q)
        n = int(mb["num_seqs"][0])
        cu, cup = mb["cu_seqlens"], mb["cu_seqlens_padded"]
        real = ~batch["padding_mask"][0]
        for i in range(n):
            start, valid = int(cup[i]), int(cu[i + 1] - cu[i])
            if valid == 0:
                continue
            rows = slice(start, start + valid)
            assert bool(real[rows].all())
            expected = torch.nn.functional.scaled_dot_product_attention(
                q[rows].transpose(0, 1).float(), k[rows].transpose(0, 1).float(),
                v[rows].transpose(0, 1).float(), is_causal=True).transpose(0, 1)
            torch.testing.assert_close(out[rows].float(), expected, atol=2e-2, rtol=2e-2)
            checked += 1
    assert checked > 20


two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")


@two_gpus
def test_set_device_1_runs_on_device_1():
    C, cp, N = 1024, 2, 33
    mb = random_microbatch(np.random.default_rng(13), C, cp, N)
    previous = torch.cuda.current_device()
    try:
        torch.cuda.set_device(1)
        kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N)
        out = kernel(**to_device(mb, "cuda:1"))
        assert out.tokens.device == torch.device("cuda:1")
        assert torch.cuda.current_device() == 1 and thdc.current_device() == 1
        assert mismatches(host(out), reference(mb, C, cp, N)) == []
    finally:
        torch.cuda.set_device(previous)


@two_gpus
def test_explicit_device_and_mismatch():
    C, cp, N = 1024, 2, 33
    mb = random_microbatch(np.random.default_rng(14), C, cp, N)
    torch.cuda.set_device(0)
    kernel, _ = gpu_kernel("megatron_graph_step", C, cp, N, device=0)
    on_one = to_device(mb, "cuda:1")
    with pytest.raises(ValueError, match="input 'tokens' is on cuda:1, but the launch is on cuda:0"):
        kernel(**on_one)
    # An explicit ordinal: the module is loaded on device 1 at its first call,
    # on device 1's current stream, and the current device stays 0.
    out = kernel(**on_one, device=1, stream=torch.cuda.current_stream(1))
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0 and thdc.current_device() == 0
    assert mismatches(host(out), reference(mb, C, cp, N)) == []
    # Both devices in one process, interleaved.
    on_zero = to_device(mb, "cuda:0")
    for _ in range(3):
        a = kernel(**on_zero)
        with torch.cuda.device(1):
            b = kernel(**on_one)
        assert torch.equal(a.tokens.cpu(), b.tokens.cpu())
    assert torch.cuda.current_device() == 0


def pack_kernel(C, cp, N, P, S):
    """The kernel of examples/pack_microbatch.mlir for these parameters, and
    its bundle's path (None when the JIT compiled it)."""
    path = os.path.join(BUNDLES, "python", f"pack_microbatch_C{C}_cp{cp}_N{N}_P{P}_S{S}")
    if os.path.isdir(path):
        return thdc.load(path, backend="cuda"), path
    if thdc.has_jit:
        params = {"C": C, "cp": cp, "N": N, "P": P, "S": S}
        return thdc.compile(PACK, params, backend="cuda"), None
    pytest.skip(f"no bundle {path} and no JIT")


def test_pack_microbatch_matches_reference():
    """Random pools planned into microbatches: every microbatch of every CP
    rank launched on torch tensors into static outputs under
    set_sync_debug_mode("error"), then compared with
    thdc.reference.pack_microbatch."""
    C, cp, N, P, S = 1024, 2, 33, 16384, 64
    kernel, _ = pack_kernel(C, cp, N, P, S)
    assert kernel.backend == "cuda"
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    rng = np.random.default_rng(17)
    checked = 0
    for trial in range(10):
        pool, count = random_pool(rng, C, cp, P, S)
        padded = thdc.planner.align_lengths(pool["sample_lengths"][:count], cp)
        plan = thdc.planner.plan(padded, C, cp, max_packed_sequences=N,
                                 algorithm=("next_fit", "balanced")[trial % 2])
        on_gpu = {name: torch.from_numpy(pool[name]).cuda() for name in POOLS}
        for rank in range(cp):
            sample_ids, num_seqs = thdc.planner.microbatch_inputs(plan, rank, N)
            ids = torch.from_numpy(sample_ids).cuda()
            counts = torch.from_numpy(num_seqs).cuda()
            cp_rank = torch.tensor([rank], dtype=torch.int32, device="cuda")
            microbatches = plan.num_microbatches
            outs = {a.name: torch.full((microbatches,) + a.shape, 0x55,
                                       dtype=getattr(torch, a.dtype), device="cuda")
                    for a in spec}
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                for m in range(microbatches):
                    kernel(**on_gpu, sample_ids=ids[m], num_seqs=counts[m:m + 1],
                           cp_rank=cp_rank, out={k: v[m] for k, v in outs.items()})
            finally:
                torch.cuda.set_sync_debug_mode("default")
            got = {k: v.cpu().numpy() for k, v in outs.items()}
            for m in range(microbatches):
                expected = reference_pack(pool, sample_ids[m], num_seqs[m], rank, C, cp, N)
                assert expected["status"] == 0
                bad = mismatches({k: v[m] for k, v in got.items()}, expected)
                assert bad == [], f"trial {trial}, rank {rank}, microbatch {m}: {bad} differ"
                checked += 1
    assert checked > 20


def test_pack_microbatch_ignores_stale_shared_memory():
    """Before every launch, a kernel fills every multiprocessor's shared
    memory with a value no input has (-1, INT32_MAX): the outputs must not
    change. A kernel that reads shared memory it did not write in the same
    launch sees what the previous kernel on that multiprocessor left there
    (in a training loop: anything)."""
    cupy = pytest.importorskip("cupy")
    C, cp, N, P, S = 1024, 2, 33, 16384, 64
    kernel, _ = pack_kernel(C, cp, N, P, S)
    poison = cupy.RawKernel(r"""
    extern "C" __global__ void poison(int value) {
      extern __shared__ int rows[];
      for (int i = threadIdx.x; i < 12288; i += blockDim.x) rows[i] = value;
    }""", "poison")
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    rng = np.random.default_rng(18)
    pool, count = random_pool(rng, C, cp, P, S)
    plan = thdc.planner.plan(thdc.planner.align_lengths(pool["sample_lengths"][:count], cp),
                             C, cp, max_packed_sequences=N)
    on_gpu = {name: torch.from_numpy(pool[name]).cuda() for name in POOLS}
    failures = []
    for rank in range(cp):
        sample_ids, num_seqs = thdc.planner.microbatch_inputs(plan, rank, N)
        for m in range(plan.num_microbatches):
            expected = reference_pack(pool, sample_ids[m], num_seqs[m], rank, C, cp, N)
            for value in (-1, 2**31 - 1):
                torch.cuda.synchronize()
                poison((8 * sm_count,), (256,), (np.int32(value),), shared_mem=49152)
                cupy.cuda.Device().synchronize()
                out = kernel(**on_gpu, sample_ids=torch.from_numpy(sample_ids[m]).cuda(),
                             num_seqs=torch.from_numpy(num_seqs[m:m + 1]).cuda(),
                             cp_rank=torch.tensor([rank], dtype=torch.int32, device="cuda"))
                bad = mismatches(host(out), expected)
                if bad:
                    failures.append((rank, m, value, bad))
    assert failures == []


def test_global_batch_example_in_one_process(tmp_path):
    """examples/python/global_batch.py without torchrun (cp = 1): every
    microbatch of thdc and of the eager PyTorch step equal to the reference."""
    import importlib.util
    import json

    if "LOCAL_RANK" in os.environ:
        pytest.skip("runs as a single process")
    args = ["--global-batches", "2", "--samples", "128", "--json", str(tmp_path / "figures.json")]
    path = os.path.join(BUNDLES, "python", "pack_microbatch_C4096_cp1_N64_P1048576_S512")
    if os.path.isdir(path):
        args += ["--bundle", path]
    elif not thdc.has_jit:
        pytest.skip(f"no bundle {path} and no JIT")
    spec = importlib.util.spec_from_file_location(
        "global_batch", os.path.join(SOURCE_DIR, "examples", "python", "global_batch.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(args) == 0
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["failed"] == 0 and figures["eager_failed"] == 0
    # The warm-up global batch is checked too, not timed.
    assert figures["passed"] > sum(figures["microbatches"]) > 0
    assert figures["thdc_ms_per_global_batch"] > 0
