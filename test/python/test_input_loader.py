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
    if keys:
        inputs["num_rows"] = torch.full((1,), -7, dtype=torch.int32)
    return SimpleNamespace(**inputs)


ORDER = ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens", "cu_seqlens_padded",
         "num_seqs")


def loader(stage="first_last", per_tensor=False):
    """A loader over the host form of the gather, and its buffers."""
    keys = thdc.stages.data_keys(stage)
    inputs = buffers(stage)
    made = thdc.megatron.InputLoader(inputs, keys, stage, thdc._thdc.Gather(None),
                                     per_tensor=per_tensor)
    assert isinstance(made.fast, thdc._thdc.InputGather)
    return made, inputs


def plan(made, args):
    """(segments, indices left to copy) of a load, launching nothing."""
    return made.fast.segments(*[args.get(k) for k in ORDER])


def per_tensor(inputs, keys, args):
    """The per-tensor copies, restated: each given prefix by copy_, the rows
    given into num_rows, num_seqs filled or copied."""
    for k in keys + ("cu_seqlens", "cu_seqlens_padded"):
        value = args[k]
        getattr(inputs, k)[:value.numel()].copy_(value.reshape(-1))
    for k in ("cu_seqlens", "cu_seqlens_padded"):  # the entries after the given: -1
        entries = args[k].numel()
        getattr(inputs, k)[entries:] = -1
    if keys:
        inputs.num_rows.fill_(args[keys[0]].numel())
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
    """The one-call path and the per-tensor path give the buffers the
    per-tensor copies give, on random microbatches of every kind; the module
    leaves exactly the tensors that need a conversion to copy_ (an empty
    tensor needs none, whatever its kind)."""
    rng = np.random.default_rng(5)
    keys = thdc.stages.data_keys(stage)
    one_call, one_call_inputs = loader(stage)
    each, each_inputs = loader(stage, per_tensor=True)
    expected = buffers(stage)
    for trial in range(200):
        kinds = {k: KINDS[int(rng.integers(0, 4))] if trial % 3 else "same" for k in DTYPES}
        kinds.update(cu="other dtype" if trial % 7 == 3 else "same",
                     num_seqs=NUM_SEQS[trial % 4])
        args = random_arguments(rng, kinds)
        converted = {k for k in keys if kinds[k] in ("other dtype", "strided")
                     and args[k].numel()}
        if kinds["cu"] == "other dtype" and args["cu_seqlens"].numel():
            converted.add("cu_seqlens_padded")
        if kinds["num_seqs"] == "int64 tensor":
            converted.add("num_seqs")
        _, rest = plan(one_call, args)
        assert {ORDER[i] for i in rest or ()} == converted, (trial, kinds)
        _, rest = plan(each, args)
        tensors = {k for k in keys + ("cu_seqlens", "cu_seqlens_padded") if args[k].numel()}
        if isinstance(args.get("num_seqs"), torch.Tensor):
            tensors.add("num_seqs")
        assert {ORDER[i] for i in rest or ()} == tensors, (trial, kinds)
        one_call.load(**args)
        each.load(**args)
        per_tensor(expected, keys, args)
        for name in vars(expected):
            assert torch.equal(getattr(one_call_inputs, name),
                               getattr(expected, name)), (trial, name, kinds)
            assert torch.equal(getattr(each_inputs, name), getattr(expected, name)), (
                trial, name, kinds)


def test_one_gather_of_every_input_when_all_match():
    made, inputs = loader()
    rows, entries = 100, 5
    args = {k: torch.arange(rows).to(d).view(1, -1) for k, d in DTYPES.items()}
    args.update(cu_seqlens=torch.arange(entries, dtype=torch.int32),
                cu_seqlens_padded=torch.arange(entries, dtype=torch.int32))
    # The data keys, the cu arrays, the entries after each cu array, num_rows
    # and num_seqs: one gather, nothing left to copy.
    segments, rest = plan(made, args)
    assert (len(segments) // 4, rest) == (4 + 2 + 2 + 1 + 1, None)
    made.load(**args)
    assert inputs.tokens[:rows].tolist() == list(range(rows)) and inputs.tokens[rows] == -7
    assert inputs.num_seqs.item() == entries - 1 and inputs.num_rows.item() == rows
    # Every entry after the given is -1: what a num_seqs past them reads
    # depends on the load alone, never on the microbatch before.
    assert (inputs.cu_seqlens[entries:] == -1).all()
    assert (inputs.cu_seqlens_padded[entries:] == -1).all()
    three = torch.tensor([3], dtype=torch.int32)
    assert len(plan(made, dict(args, num_seqs=three))[0]) // 4 == 10
    made.load(**args, num_seqs=three)
    assert inputs.num_seqs.item() == 3
    empty = {k: v[:, :0] for k, v in args.items() if k in DTYPES}
    empty.update(cu_seqlens=args["cu_seqlens"][:0],
                 cu_seqlens_padded=args["cu_seqlens_padded"][:0])
    # Empty tensors copy nothing: every entry of the cu arrays made -1, num_rows
    # (0) and num_seqs (-1 for empty cu arrays).
    unset = made.unset.data_ptr()
    assert plan(made, empty)[0] == [
        unset, inputs.cu_seqlens.data_ptr(), 4 * (N + 1), 0,
        unset, inputs.cu_seqlens_padded.data_ptr(), 4 * (N + 1), 0,
        0, inputs.num_rows.data_ptr(), 4, 0, 0, inputs.num_seqs.data_ptr(), 4, -1]
    made.load(**empty)
    assert inputs.num_seqs.item() == -1
    assert inputs.num_rows.item() == 0 and inputs.cu_seqlens[0] == -1
    # Arrays of every entry leave none to mark.
    full = torch.arange(N + 1, dtype=torch.int32)
    assert len(plan(made, dict(args, cu_seqlens=full, cu_seqlens_padded=full,
                               num_seqs=N - 1))[0]) // 4 == 4 + 2 + 1 + 1
def test_one_call_path_builds_the_gather_in_the_module():
    """A load fit for the gather is one call into the module, in its order:
    each given data key and cu array (source, its buffer, bytes), the entry
    after each cu array (a copy of -1s), num_rows, then num_seqs (a store, or a copy of a
    tensor's first element)."""
    made, inputs = loader()
    rows, entries = 100, 5
    args = {k: torch.arange(rows).to(d).view(1, -1) for k, d in DTYPES.items()}
    args["tokens"] = torch.arange(rows + 1)[1:]  # contiguous at an offset
    args.update(cu_seqlens=torch.arange(entries, dtype=torch.int32),
                cu_seqlens_padded=torch.arange(entries, dtype=torch.int32))
    expected = []
    for name in made.data_keys + ("cu_seqlens", "cu_seqlens_padded"):
        buffer = getattr(inputs, name)
        expected += [args[name].data_ptr(), buffer.data_ptr(),
                     args[name].numel() * buffer.element_size(), 0]
    for name in ("cu_seqlens", "cu_seqlens_padded"):  # the entries after the given: -1
        expected += [made.unset.data_ptr(), getattr(inputs, name).data_ptr() + 4 * entries,
                     4 * (N + 1 - entries), 0]
    expected += [0, inputs.num_rows.data_ptr(), 4, rows]
    store = [0, inputs.num_seqs.data_ptr(), 4]
    assert plan(made, args) == (expected + store + [entries - 1], None)
    assert plan(made, dict(args, num_seqs=-3)) == (expected + store + [2**64 - 3 - 2**64], None)
    count = torch.tensor([7, 9], dtype=torch.int32)
    assert plan(made, dict(args, num_seqs=count)) == (
        expected + [count.data_ptr(), inputs.num_seqs.data_ptr(), 4, 0], None)
    made.load(**args, num_seqs=count[1:])
    assert inputs.tokens[:rows].tolist() == list(range(1, rows + 1))
    assert inputs.tokens[rows] == -7 and inputs.num_seqs.item() == 9
    assert inputs.num_rows.item() == rows
    assert inputs.cu_seqlens_padded[:entries].tolist() == list(range(entries))


@pytest.mark.parametrize("change, left", [
    (dict(tokens=torch.arange(8)[::2]), {"tokens"}),
    (dict(labels=torch.arange(4, dtype=torch.int32)), {"labels"}),
    (dict(cu_seqlens_padded=torch.arange(3, dtype=torch.int64)), {"cu_seqlens_padded"}),
    (dict(tokens=torch.nn.Parameter(torch.zeros(4, dtype=torch.int64), requires_grad=False)),
     {"tokens"}),
    (dict(num_seqs=torch.tensor([2], dtype=torch.int64)), {"num_seqs"}),
    (dict(loss_mask=torch.zeros(4, dtype=torch.float64)), {"loss_mask"}),
])
def test_what_needs_a_conversion_is_left_to_copy(change, left):
    """A tensor of another dtype or layout, or a subclass, is left to
    Tensor.copy_; the rest still goes into the one gather."""
    made, inputs = loader()
    args = {k: torch.ones(4, dtype=d) for k, d in DTYPES.items()}
    args.update(cu_seqlens=torch.ones(3, dtype=torch.int32),
                cu_seqlens_padded=torch.ones(3, dtype=torch.int32))
    args.update(change)
    segments, rest = plan(made, args)
    assert {ORDER[i] for i in rest} == left
    gathered = len([k for k in made.data_keys + ("cu_seqlens", "cu_seqlens_padded")
                    if k not in left])
    assert len(segments) // 4 == gathered + 2 + 1 + ("num_seqs" not in left)
    made.load(**args)
    for name in made.data_keys + ("cu_seqlens", "cu_seqlens_padded"):
        given = args[name].reshape(-1)
        assert torch.equal(getattr(inputs, name)[:given.numel()],
                           given.to(getattr(inputs, name).dtype)), name


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
        (dict(ok, num_seqs=2**40), ValueError,
         "num_seqs = 1099511627776 is outside the int32 range"),
        (dict(ok, num_seqs=True), TypeError, "num_seqs must be an int; got bool"),
        (dict(ok, num_seqs="3"), TypeError, "num_seqs must be an int; got str"),
        (dict(ok, tokens=torch.zeros(ROWS + 1, dtype=torch.int32)), ValueError,
         f"tokens has {ROWS + 1} rows; the step holds C\\*cp = {ROWS}"),
        (dict(ok, labels=torch.zeros(5, dtype=torch.int64)), ValueError,
         "labels has 5 rows but tokens has 4; every data tensor of a microbatch has the "
         "same rows"),
        (dict(ok, position_ids=torch.zeros(2, 2, dtype=torch.int64)), ValueError,
         r"position_ids has the shape \(2, 2\); a packed microbatch's tensors are \[T\] or "
         r"\[1, T\] \(micro-batch size 1"),
        (dict(ok, tokens=torch.zeros((), dtype=torch.int64)), ValueError,
         r"tokens has the shape \(\)"),
        (dict(ok, cu_seqlens=torch.zeros(3, 1, dtype=torch.int32)), ValueError,
         r"cu_seqlens has the shape \(3, 1\); cu arrays are \[E\] or \[1, E\]"),
        (dict(ok, tokens=torch.zeros(4, dtype=torch.float32)), TypeError,
         "tokens is torch.float32, but the step's tokens holds torch.int64: a "
         "floating-point value would be truncated"),
        (dict(ok, num_seqs=torch.tensor([2.0])), TypeError,
         "num_seqs is torch.float32"),
        (dict(ok, num_seqs=torch.zeros(0, dtype=torch.int32)), ValueError,
         "num_seqs is an empty tensor"),
    ]


@pytest.mark.parametrize("args, error, message", bad_arguments())
def test_refused_arguments_same_on_both_paths(args, error, message):
    """Every broken contract is refused by the module, with the same message
    on the one-call and the per-tensor path, before anything is copied."""
    made = [loader(), loader(per_tensor=True)]
    for each, _ in made:
        with pytest.raises(error, match=message):
            each.load(**args)
        with pytest.raises(error, match=message):
            plan(each, args)
    for _, inputs in made:
        assert all(bool((t == -7).all()) for t in vars(inputs).values())
