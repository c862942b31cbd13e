"""StepSlot.load_inputs on a GPU: the one-launch gather path against the
per-tensor copies and the reference, on random microbatches with inputs of
another dtype or device (the copy_ fallback), strided views, num_seqs as a
tensor, an int or left out, all under set_sync_debug_mode("error"); the
gather runs on the current stream (a side stream whose data is written
late); and the raw gather kernel (thdc._thdc.Gather) on odd sizes,
unaligned addresses, empty segments, stores and more segments than one
launch takes. Skipped without PyTorch or a GPU."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402
from microbatches import random_microbatch, step_inputs  # noqa: E402
from test_megatron_gpu import compare, expect, host, make_step  # noqa: E402

LOADED = ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens", "cu_seqlens_padded",
          "num_seqs")


def vary(inputs, rng, trial):
    """The microbatch's tensors in the forms a caller may hand over."""
    out = dict(inputs)
    form = trial % 6
    if form == 1:  # other dtypes: converted by copy_
        out["tokens"] = out["tokens"].to(torch.int32)
        out["loss_mask"] = out["loss_mask"].to(torch.float64)
    elif form == 2:  # a strided view (copy_) and an offset view (gather)
        wide = torch.stack([out["labels"], out["labels"]], dim=-1)
        out["labels"] = wide[..., 0]
        pad = torch.zeros(1, 1, dtype=out["position_ids"].dtype, device="cuda")
        out["position_ids"] = torch.cat([pad, out["position_ids"]], dim=1)[:, 1:]
    elif form == 3:  # cu arrays of another dtype
        out["cu_seqlens_padded"] = out["cu_seqlens_padded"].to(torch.int64)
    # A count the arrays do not imply stays explicit (an int or a tensor).
    given = "num_seqs" in inputs
    n = inputs["num_seqs"] if given else inputs["cu_seqlens"].numel() - 1
    shape = 1 + rng.integers(0, 2) if given else rng.integers(0, 3)
    if shape == 1:
        out["num_seqs"] = n
    elif shape == 2:
        dtype = torch.int64 if trial % 4 == 0 else torch.int32
        out["num_seqs"] = torch.tensor([n, 77], dtype=dtype, device="cuda")
    else:
        out.pop("num_seqs", None)  # the default: len(cu_seqlens) - 1
    return out


def test_gather_path_equals_per_tensor_copies_and_the_reference():
    C, cp, N = 1024, 2, 33
    step = make_step(C, N, cp, 1)
    slot = step.slot(0)
    rng = np.random.default_rng(80)
    batches = [random_microbatch(rng, C, cp, N, rank=1) for _ in range(60)]
    staged = [vary(step_inputs(mb, C, cp), rng, t) for t, mb in enumerate(batches)]
    loaded = [getattr(slot.inputs, k) for k in LOADED]
    results = []
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for inputs in staged:
            for t in loaded:
                t.fill_(-5)
            slot.load_inputs(**inputs)
            fast = [t.clone() for t in loaded]
            for t in loaded:
                t.fill_(-5)
            slot._per_tensor_loader.load(**inputs)
            per_tensor = [t.clone() for t in loaded]
            slot.load_inputs(**inputs)
            slot.run()
            results.append((fast, per_tensor, {k: v.clone() for k, v in
                                               slot.outputs._asdict().items()}))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for trial, (mb, (fast, per_tensor, outputs)) in enumerate(zip(batches, results)):
        for name, a, b in zip(LOADED, fast, per_tensor):
            assert torch.equal(a, b), f"trial {trial}: {name}"
        got = {k: v.cpu().numpy() for k, v in outputs.items()}
        assert compare(got, expect(mb, C, cp, N)) == [], f"trial {trial}"


def test_cpu_tensors_take_the_copy_path():
    C, cp, N = 1024, 2, 33
    step = make_step(C, N, cp, 1)
    rng = np.random.default_rng(81)
    for trial in range(10):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        inputs = {k: v.cpu() if isinstance(v, torch.Tensor) else v
                  for k, v in step_inputs(mb, C, cp).items()}
        step(**inputs)
        assert compare(host(step.outputs), expect(mb, C, cp, N)) == [], f"trial {trial}"


def test_gather_runs_on_the_current_stream():
    """The microbatch is written on a side stream behind a sleeping kernel,
    then loaded on that stream: the copy must wait for it."""
    C, cp, N = 1024, 2, 33
    step = make_step(C, N, cp, 1)
    rng = np.random.default_rng(82)
    mb = random_microbatch(rng, C, cp, N, rank=1)
    inputs = step_inputs(mb, C, cp)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        late = {k: torch.full_like(v, -3) if isinstance(v, torch.Tensor) else v
                for k, v in inputs.items()}
        torch.cuda._sleep(50_000_000)
        for k, v in late.items():
            if isinstance(v, torch.Tensor):
                v.copy_(inputs[k])
        step(**late)
    torch.cuda.synchronize()
    assert compare(host(step.outputs), expect(mb, C, cp, N)) == []


def expected_gather(memory, segments):
    """The gather on a NumPy byte array (addresses as offsets into it)."""
    memory = memory.copy()
    for source, destination, size, value in segments:
        if source:
            memory[destination:destination + size] = memory[source:source + size]
        else:
            memory[destination:destination + size] = np.frombuffer(
                int(value).to_bytes(8, "little", signed=True), np.uint8)[:size]
    return memory


@pytest.mark.parametrize("count", [1, 7, 16, 17, 50])
def test_raw_gather_kernel(count):
    rng = np.random.default_rng(90 + count)
    window = 40_000
    size = 2 * window * count
    initial = rng.integers(0, 256, size=size, dtype=np.uint8)
    memory = torch.from_numpy(initial).cuda()
    base = memory.data_ptr()
    segments = []
    for i in range(count):
        source = 2 * window * i + int(rng.integers(0, 32))
        destination = 2 * window * i + window + int(rng.integers(0, 32))
        length = int(rng.integers(0, window - 64))
        if i % 4 == 0:
            length = 16 * (length // 16)
        if i % 6 == 5:
            length = 0
        if i % 5 == 2:  # a store of 1..8 bytes
            segments.append((0, destination, 1 + i % 8, int(rng.integers(-2**63, 2**63))))
        else:
            segments.append((source, destination, length, 0))
    flat = []
    for source, destination, length, value in segments:
        flat += [base + source if source else 0, base + destination, length, value]
    gather = thdc._thdc.Gather(torch.cuda.current_device(), like=memory)
    assert gather.follows_current_stream
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        gather(flat)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    expected = expected_gather(initial, segments)
    assert np.array_equal(memory.cpu().numpy(), expected)
    # The same on an explicit stream.
    memory.copy_(torch.from_numpy(initial))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    gather(flat, side.cuda_stream)
    side.synchronize()
    assert np.array_equal(memory.cpu().numpy(), expected)


def test_no_leak_warnings_when_a_process_exits_with_steps():
    """A process that builds steps, loads and runs microbatches through both
    load paths and exits ends without nanobind's leak warnings (kernels and
    gathers held by steps in reference cycles are freed)."""
    import os
    import subprocess
    import sys
    import textwrap

    here = os.path.dirname(os.path.abspath(__file__))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {here!r})
        import numpy as np
        import torch
        from microbatches import random_microbatch, step_inputs
        from test_megatron_gpu import make_step
        C, cp, N = 1024, 2, 33
        rng = np.random.default_rng(83)
        for _ in range(2):
            step = make_step(C, N, cp, 1)
            inputs = step_inputs(random_microbatch(rng, C, cp, N, rank=1), C, cp)
            step(**inputs)
            step.slot(0)._per_tensor_loader.load(**inputs)
            step.run()
        torch.cuda.synchronize()
        print("ran")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ran"), done.stdout
    assert "nanobind: leaked" not in done.stderr, done.stderr


def _microbatch(value, rows, cu):
    full = lambda v, dtype: torch.full((1, rows), v, dtype=dtype, device="cuda")
    cu = torch.tensor(cu, dtype=torch.int32, device="cuda")
    return dict(tokens=full(value, torch.int64), labels=full(value + 1, torch.int64),
                loss_mask=full(1.0, torch.float32), position_ids=full(3, torch.int64),
                cu_seqlens=cu, cu_seqlens_padded=cu.clone())


def test_a_short_microbatch_never_trains_on_the_previous_one_in_a_replayed_graph():
    """Microbatch B gives 20 rows where its offsets claim 32: the rows past
    20 of the static buffers hold microbatch A's. The replayed kernel flags
    it (rows_not_given) and empties it, with no host synchronisation in the
    loop; the same offsets with all 32 rows are valid again."""
    C, cp, N = 64, 1, 8
    step = make_step(C, N, cp, 0)
    step(**_microbatch(1000, 32, [0, 16, 32]))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.run()
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    rows_not_given = next(1 << b for b in range(31)
                          if thdc.describe_status(1 << b) == "rows_not_given")
    batches = [_microbatch(1000, 32, [0, 16, 32]), _microbatch(7, 20, [0, 16, 32]),
               _microbatch(7, 32, [0, 16, 32])]
    statuses, masks = [], []
    torch.cuda.set_sync_debug_mode("error")
    try:
        for mb in batches:
            step.load_inputs(**mb)
            graph.replay()
            statuses.append(step.status.clone())
            masks.append(step.batch["loss_mask"].sum().clone())
            step.accumulate_status(flag)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert [int(s) for s in statuses] == [0, rows_not_given, 0]
    assert [float(m) for m in masks] == [32.0, 0.0, 32.0]
    assert int(flag) == rows_not_given


def test_what_does_not_fit_the_buffers_is_refused_before_the_gather():
    """Copies are bounded by the static buffers' own lengths: a microbatch of
    more rows or entries than they hold, a [2, T] tensor and data tensors of
    different lengths are refused before anything reaches the device (the
    buffers keep the microbatch loaded before)."""
    C, cp, N = 64, 2, 8
    step = make_step(C, N, cp, 0)
    step.load_inputs(**_microbatch(5, 16, [0, 16]))
    before = {k: v.clone() for k, v in vars(step.inputs).items()}
    bad = [
        (dict(_microbatch(9, C * cp + 1, [0, 16])), ValueError, "has 129 rows; the step holds"),
        (dict(_microbatch(9, 16, list(range(0, 16 * (N + 2), 16)))), ValueError,
         "has 10 entries; the step holds N\\+1 = 9"),
        (dict(_microbatch(9, 16, [0, 16]), tokens=torch.zeros(2, 16, dtype=torch.int64,
                                                               device="cuda")),
         ValueError, "micro-batch size 1"),
        (dict(_microbatch(9, 16, [0, 16]), labels=torch.zeros(1, 15, dtype=torch.int64,
                                                               device="cuda")),
         ValueError, "labels has 15 rows but tokens has 16"),
    ]
    for args, error, message in bad:
        with pytest.raises(error, match=message):
            step.load_inputs(**args)
    torch.cuda.synchronize()
    for name, value in vars(step.inputs).items():
        assert torch.equal(value, before[name]), name
