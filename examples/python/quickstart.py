#!/usr/bin/env python3
"""thdc from Python: one packed microbatch through the reference framework's
THD step, as one fused kernel.

With PyTorch and a GPU: thdc.megatron.GraphStep on torch tensors, captured
once in torch.cuda.graph and replayed with new microbatches. With PyTorch
and no GPU: the same GraphStep on the CPU (device="cpu", no graph). Without
PyTorch: the same pipeline on NumPy arrays through the CPU path. Every
result is checked against the reference semantics.

    PYTHONPATH=build/python python3 examples/python/quickstart.py
"""
import os

import numpy as np

import thdc

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "megatron_graph_step.mlir")
C, CP, N = 4096, 2, 64


def random_microbatch(rng, rank):
    """num_seqs sequences packed into C*cp rows: valid lengths, padded to 2*cp."""
    n = int(rng.integers(1, N))
    padded = rng.integers(0, 2 * C * CP // n, size=n) // (2 * CP) * (2 * CP)
    padded = padded[np.cumsum(padded) <= C * CP]
    valid = (padded * rng.uniform(0.5, 1.0, size=len(padded))).astype(np.int32)
    n = len(padded)
    rows = int(padded.sum())
    return dict(
        tokens=rng.integers(1, 50000, size=rows), labels=rng.integers(1, 50000, size=rows),
        loss_mask=np.ones(rows, np.float32), position_ids=np.arange(rows),
        cu_seqlens=np.concatenate([[0], np.cumsum(valid)]).astype(np.int32),
        cu_seqlens_padded=np.concatenate([[0], np.cumsum(padded)]).astype(np.int32),
        num_seqs=n, cp_rank=rank)


def static_inputs(mb):
    """The pipeline's static shapes: C*cp rows and N+1 offsets."""
    grow = lambda a, size, dtype: np.resize(np.asarray(a, dtype), size) if len(a) else np.zeros(size, dtype)
    return dict(
        tokens=grow(mb["tokens"], C * CP, np.int64), labels=grow(mb["labels"], C * CP, np.int64),
        position_ids=grow(mb["position_ids"], C * CP, np.int64),
        loss_mask=grow(mb["loss_mask"], C * CP, np.float32),
        cu_seqlens=grow(mb["cu_seqlens"], N + 1, np.int32),
        cu_seqlens_padded=grow(mb["cu_seqlens_padded"], N + 1, np.int32),
        num_seqs=np.array([mb["num_seqs"]], np.int32), cp_rank=np.array([mb["cp_rank"]], np.int32))


def check(outputs, inputs, what):
    expected = thdc.reference.graph_step(
        inputs["tokens"], inputs["labels"], inputs["position_ids"], inputs["loss_mask"],
        inputs["cu_seqlens"], inputs["cu_seqlens_padded"], int(inputs["num_seqs"][0]),
        int(inputs["cp_rank"][0]), C, CP, N)
    for name in ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens", "cu_seqlens_padded"):
        if not np.array_equal(np.asarray(outputs[name]), expected[name]):
            raise SystemExit(f"{what}: {name} differs from the reference")


def on_gpu(rng):
    import torch
    import thdc.megatron

    rank = 1
    step = thdc.megatron.GraphStep(C, N, CP, rank, bundle=os.environ.get("THDC_STEP_BUNDLE"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.run()  # the fused kernel on the static buffers
    for i in range(100):
        mb = random_microbatch(rng, rank)
        as_torch = {k: torch.as_tensor(v).cuda() for k, v in mb.items()
                    if k not in ("num_seqs", "cp_rank")}
        step.load_inputs(**as_torch)  # copies into step.inputs, no host sync
        graph.replay()
        outputs = {k: v.cpu().numpy() for k, v in step.outputs._asdict().items()}
        check(outputs, static_inputs(mb), f"replay {i}")
    params = step.packed_seq_params
    print(f"{step.kernel.device_name}: 100 microbatches replayed from one CUDA graph, "
          f"all equal to the reference")
    print(f"PackedSeqParams: qkv_format={params.qkv_format}, max_seqlen_q={params.max_seqlen_q}, "
          f"pad_between_seqs={params.pad_between_seqs}, "
          f"cu_seqlens_q={params.cu_seqlens_q[:6].tolist()}...")


def on_cpu_with_torch(rng):
    import torch
    import thdc.megatron

    rank = 1
    step = thdc.megatron.GraphStep(C, N, CP, rank, device="cpu")
    for i in range(100):
        mb = random_microbatch(rng, rank)
        as_torch = {k: torch.as_tensor(v) for k, v in mb.items()
                    if k not in ("num_seqs", "cp_rank")}
        step(**as_torch)  # load_inputs, then run: the host code, done when it returns
        outputs = {k: v.numpy() for k, v in step.outputs._asdict().items()}
        check(outputs, static_inputs(mb), f"microbatch {i}")
    print(f"host CPU: 100 microbatches through thdc.megatron.GraphStep(device='cpu'), "
          f"all equal to the reference")


def on_cpu(rng):
    kernel = thdc.compile(EXAMPLE, {"C": C, "cp": CP, "N": N}, backend="host")
    outputs = None
    for i in range(100):
        inputs = static_inputs(random_microbatch(rng, rank=1))
        outputs = kernel(**inputs, out=outputs)  # allocated once, then reused
        check(outputs._asdict(), inputs, f"microbatch {i}")
    print(f"host CPU: 100 microbatches through {kernel.entry} "
          f"({len(thdc.signature(kernel))} buffers), all equal to the reference")


def main():
    rng = np.random.default_rng(0)
    try:
        import torch
        import thdc.megatron  # noqa: F401 (refuses a PyTorch older than it needs)
    except ImportError:
        on_cpu(rng)
        return
    (on_gpu if torch.cuda.is_available() else on_cpu_with_torch)(rng)


if __name__ == "__main__":
    main()
