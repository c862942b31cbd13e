"""thdc.megatron.InputLoader (what StepSlot.load_inputs does) on CPU buffers:
the gather path (the runtime's host form of the one-launch gather) against
the per-tensor path and a restatement of the per-tensor copies, on random
microbatches with every kind of argument (dtype to convert, strided views,
num_seqs as a tensor, an int or left out); one gather call per microbatch;
every refused argument with the same message on both paths and nothing
copied before the refusal. The GPU twin is in test_megatron_gpu.py.
Skipped without PyTorch."""
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
import thdc.stages  # noqa: E402

C, CP, N = 64, 2, 9
ROWS = C * CP
DTYPES = {"tokens": torch.int64, "labels": torch.int64, "position_ids": torch.int64,
          "loss_mask": torch.float32}


def buffers(stage="first_last"):
    """Static inputs as GraphStep makes them, filled with a marker."""
    keys = thdc.stages.data_keys(stage)
    inputs = {k: torch.full((ROWS,), -7, dtype=DTYPES[k]) for k in keys}
    inputs.update(cu_seqlens=torch.full((N + 1,), -7, dtype=torch.int32),
                  cu_seqlens_padded=torch.full((N + 1,), -7, dtype=torch.int32),
                  num_seqs=torch.full((1,), -7, dtype=torch.int32))
    return SimpleNamespace(**inputs)


class CountingGather:
    """The host form of the gather, counting calls and segments."""

    def __init__(self):
        self.gather = thdc._thdc.Gather(None)
        self.follows_current_stream = False
        self.calls, self.segments = 0, 0

    def __call__(self, segments, stream=None):
        self.calls += 1
        self.segments += len(segments) // 4
        self.gather(segments)


def loaders(stage="first_last"):
    keys = thdc.stages.data_keys(stage)
    fast, slow = buffers(stage), buffers(stage)
    counting = CountingGather()
    return (thdc.megatron.InputLoader(fast, keys, stage, C, CP, N, counting), fast,
            thdc.megatron.InputLoader(slow, keys, stage, C, CP, N, None), slow, counting)


def per_tensor(inputs, keys, args):
    """The per-tensor copies, restated: each given prefix by copy_, num_seqs
    filled or copied."""
    for k in keys + ("cu_seqlens", "cu_seqlens_padded"):
        value = args[k]
        getattr(inputs, k)[:value.numel()].copy_(value.reshape(-1))
    num_seqs = args.get("num_seqs")
    if num_seqs is None:
        inputs.num_seqs.fill_(args["cu_seqlens"].numel() - 1)
    elif isinstance(num_seqs, torch.Tensor):
        inputs.num_seqs.copy_(num_seqs.reshape(-1)[:1])
    else:
        inputs.num_seqs.fill_(num_seqs)


def random_arguments(rng, kinds):
    rows = int(rng.integers(0, ROWS + 1))
    entries = int(rng.integers(0, N + 2))
    args = {}
    for k, dtype in DTYPES.items():
        kind = kinds[k]
        values = rng.integers(-1000, 1000, size=2 * rows + 1)
        if kind == "other dtype":
            tensor = torch.from_numpy(values[:rows]).to(
                torch.int32 if dtype is torch.int64 else torch.float64)
        elif kind == "strided":
            tensor = torch.from_numpy(values).to(dtype)[::2][:rows]
        elif kind == "offset":  # contiguous, at an address 1 element in
            tensor = torch.from_numpy(values).to(dtype)[1:rows + 1]
        else:
            tensor = torch.from_numpy(values[:rows]).to(dtype)
        args[k] = tensor.view(1, -1) if rng.integers(0, 2) else tensor
    cu = np.sort(rng.integers(0, ROWS, size=entries))
    args["cu_seqlens"] = torch.from_numpy(cu).to(torch.int32)
    args["cu_seqlens_padded"] = torch.from_numpy(cu).to(
        torch.int64 if kinds["cu"] == "other dtype" else torch.int32)
    form = kinds["num_seqs"]
    if form == "int" or (form == "default" and entries == N + 1):
        args["num_seqs"] = int(rng.integers(-3, N + 3))
    elif form == "tensor":
        args["num_seqs"] = torch.tensor([int(rng.integers(0, N)), 99], dtype=torch.int32)
    elif form == "int64 tensor":
        args["num_seqs"] = torch.tensor([int(rng.integers(0, N))], dtype=torch.int64)
    return args


KINDS = ["same", "other dtype", "strided", "offset"]
NUM_SEQS = ["default", "int", "tensor", "int64 tensor"]


@pytest.mark.parametrize("stage", list(thdc.stages.STAGES))
def test_gather_path_equals_per_tensor_copies(stage):
    rng = np.random.default_rng(5)
    keys = thdc.stages.data_keys(stage)
    fast_loader, fast, slow_loader, slow, counting = loaders(stage)
    expected = buffers(stage)
    for trial in range(200):
        kinds = {k: KINDS[int(rng.integers(0, 4))] if trial % 3 else "same" for k in DTYPES}
        kinds.update(cu="other dtype" if trial % 7 == 3 else "same",
                     num_seqs=NUM_SEQS[trial % 4])
        args = random_arguments(rng, kinds)
        calls = counting.calls
        fast_loader.load(**args)
        slow_loader.load(**args)
        per_tensor(expected, keys, args)
        for name in vars(expected):
            assert torch.equal(getattr(fast, name), getattr(expected, name)), (trial, name, kinds)
            assert torch.equal(getattr(slow, name), getattr(expected, name)), (trial, name, kinds)
        assert counting.calls - calls <= 1
        if all(kinds[k] in ("same", "offset") for k in keys) and kinds["cu"] == "same" \
                and kinds["num_seqs"] != "int64 tensor":
            assert counting.calls - calls == 1  # everything in one gather


def test_one_gather_of_every_input_when_all_match():
    fast_loader, fast, _, _, counting = loaders()
    rows, entries = 100, 5
    args = {k: torch.arange(rows).to(d).view(1, -1) for k, d in DTYPES.items()}
    args.update(cu_seqlens=torch.arange(entries, dtype=torch.int32),
                cu_seqlens_padded=torch.arange(entries, dtype=torch.int32))
    fast_loader.load(**args)
    assert (counting.calls, counting.segments) == (1, 4 + 2 + 1)
    assert fast.tokens[:rows].tolist() == list(range(rows)) and fast.tokens[rows] == -7
    assert fast.num_seqs.item() == entries - 1
    fast_loader.load(**args, num_seqs=torch.tensor([3], dtype=torch.int32))
    assert (counting.calls, counting.segments) == (2, 14) and fast.num_seqs.item() == 3
    empty = {k: v[:, :0] for k, v in args.items() if k in DTYPES}
    fast_loader.load(**empty, cu_seqlens=args["cu_seqlens"][:0],
                     cu_seqlens_padded=args["cu_seqlens_padded"][:0])
    # Empty tensors copy nothing: only num_seqs (-1 for empty cu arrays).
    assert (counting.calls, counting.segments) == (3, 15) and fast.num_seqs.item() == -1


def bad_arguments():
    ok = {k: torch.zeros(4, dtype=d) for k, d in DTYPES.items()}
    ok.update(cu_seqlens=torch.zeros(3, dtype=torch.int32),
              cu_seqlens_padded=torch.zeros(3, dtype=torch.int32))
    full = torch.zeros(N + 1, dtype=torch.int32)
    return [
        (dict(ok, tokens=torch.zeros(ROWS + 1, dtype=torch.int64)), ValueError,
         f"tokens has {ROWS + 1} rows; the step holds C\\*cp = {ROWS}"),
        (dict(ok, cu_seqlens=torch.zeros(N + 2, dtype=torch.int32)), ValueError,
         f"cu_seqlens has {N + 2} entries; the step holds N\\+1 = {N + 1}"),
        (dict(ok, cu_seqlens_padded=torch.zeros(4, dtype=torch.int32)), ValueError,
         "cu_seqlens and cu_seqlens_padded differ in length"),
        (dict(ok, cu_seqlens=full, cu_seqlens_padded=full), ValueError,
         "cu arrays of N\\+1 entries need num_seqs"),
        ({k: v for k, v in ok.items() if k != "labels"}, TypeError,
         "stage 'first_last' reads labels; it was not given"),
        (dict(ok, cu_seqlens_padded=[0, 1, 2]), TypeError,
         "cu_seqlens_padded must be a torch.Tensor; got list"),
        (dict(ok, num_seqs=2.0), TypeError, "num_seqs must be an int; got float"),
        (dict(ok, num_seqs=2**40), RuntimeError, "overflow"),
        (dict(ok, num_seqs=torch.zeros(0, dtype=torch.int32)), RuntimeError, None),
    ]


@pytest.mark.parametrize("args, error, message", bad_arguments())
def test_refused_arguments_same_on_both_paths(args, error, message):
    fast_loader, fast, slow_loader, slow, counting = loaders()
    for loader in (fast_loader, slow_loader):
        with pytest.raises(error, match=message):
            loader.load(**args)
    if error is not RuntimeError:  # a check: refused before any copy
        for inputs in (fast, slow):
            assert all(bool((t == -7).all()) for t in vars(inputs).values())
        assert counting.calls == 0
