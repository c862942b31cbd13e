"""thdc.attention on the CPU: each consumer's arguments from a GraphStep on
the CPU (shapes, dtypes, values against the reference), for every CP size
and on invalid microbatches; the arguments read the way each kernel reads
them give every valid row causal attention over its own sequence (a small
oracle per kernel's reading, against SDPA on the unpadded sequences); the
host offsets FlashInfer plans with equal the step's; the argument functions
run on meta tensors (so they read no value: no host synchronisation);
KeepRows; refusals. The GPU twin, with the kernels themselves captured with
the step, is test_attention_gpu.py."""
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
from microbatches import given_rows, invalidate, random_microbatch, reference, step_inputs  # noqa: E402

from conftest import megatron_or_skip  # noqa: E402

megatron_or_skip()
import thdc.attention as attention  # noqa: E402
import thdc.megatron  # noqa: E402
import thdc.stages  # noqa: E402

ROWS, N = 256, 9


@pytest.fixture(scope="module")
def steps(cache_dir):
    made = {}

    def make(cp, rank=0):
        if (cp, rank) not in made:
            made[cp, rank] = thdc.megatron.GraphStep(ROWS // cp, N, cp, rank, device="cpu",
                                                     cache_dir=cache_dir, cp_order_index=True)
        return made[cp, rank]

    return make


def run(step, mb, cp):
    step.load_inputs(**step_inputs(mb, ROWS // cp, cp, device="cpu"))
    step.run()
    return reference(mb, ROWS // cp, cp, N)


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_arguments_against_the_reference(steps, cp):
    step = steps(cp)
    rng = np.random.default_rng(cp)
    for trial in range(30):
        mb = random_microbatch(rng, ROWS // cp, cp, N, rank=0)
        if trial % 3 == 2:
            invalidate(rng, mb, N)
        expected = run(step, mb, cp)
        padded = expected["cu_seqlens_padded"]
        valid = expected["cu_seqlens"]

        a = attention.varlen_attn_args(step)
        assert a["cu_seq_q"] is a["cu_seq_k"] is step.outputs.cu_seqlens_padded
        assert a["max_q"] == a["max_k"] == ROWS

        f = attention.flash_attn_4_args(step)
        assert np.array_equal(f["cu_seqlens_q"].numpy(), padded)
        assert f["seqused_q"].dtype == torch.int32 and f["seqused_q"].shape == (N,)
        assert np.array_equal(f["seqused_q"].numpy(), np.diff(valid))
        assert f["max_seqlen_q"] == ROWS
        assert "seqused_q" not in attention.flash_attn_4_args(step, "graph")

        for convention, offsets in (("compact", valid), ("graph", padded)):
            c = attention.cudnn_args(step, heads=4, head_dim=64, kv_heads=2, convention=convention)
            assert c["batch"] == N and c["max_seqlen"] == ROWS
            assert c["ragged_offset_q"].dtype == torch.int64
            assert c["ragged_offset_q"].shape == (N + 1, 1, 1, 1)
            assert np.array_equal(c["ragged_offset_q"].flatten().numpy(), padded * 256)
            assert np.array_equal(c["ragged_offset_kv"].flatten().numpy(), padded * 128)
            assert c["seq_len_q"].dtype == torch.int32 and c["seq_len_q"].shape == (N, 1, 1, 1)
            assert np.array_equal(c["seq_len_kv"].flatten().numpy(), np.diff(offsets))

        rows = attention.computed_rows(step, "seqused").numpy()
        expect = np.zeros(ROWS, dtype=bool)
        for i in range(N):
            expect[padded[i]:padded[i] + valid[i + 1] - valid[i]] = True
        assert np.array_equal(rows, expect)
        assert bool(attention.computed_rows(step, "graph").all())

        host = attention.host_padded_offsets(mb["cu_seqlens"], mb["cu_seqlens_padded"],
                                             int(mb["num_seqs"][0]), ROWS // cp, cp, N,
                                             rows_given=given_rows(mb, ROWS // cp, cp))
        assert host.dtype == np.int32 and np.array_equal(host, padded), f"trial {trial}"
        given = step_inputs(mb, ROWS // cp, cp, device="cpu")  # num_seqs+1 entries, as loaders give
        short = attention.host_padded_offsets(given["cu_seqlens"].numpy(),
                                              given["cu_seqlens_padded"].numpy(),
                                              int(mb["num_seqs"][0]), ROWS // cp, cp, N,
                                              rows_given=given_rows(mb, ROWS // cp, cp))
        assert np.array_equal(short, padded), f"trial {trial}"


def _causal(q, k, v):
    """Causal attention of one sequence, fp64, [s, h, d]."""
    return torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True).transpose(0, 1)


def flash_attention_reading(q, k, v, args):
    """How FlashAttention reads its arguments: sequence i is rows
    cu_seqlens[i] .. cu_seqlens[i+1], of which the first seqused[i] (all
    without seqused) are attended and written; other rows are left alone."""
    cu = args["cu_seqlens_q"].tolist()
    used = args.get("seqused_q")
    out = torch.full_like(q, float("nan"))
    for i in range(len(cu) - 1):
        start = cu[i]
        end = start + int(used[i]) if used is not None else cu[i + 1]
        if end > start:
            out[start:end] = _causal(q[start:end], k[start:end], v[start:end])
    return out


def cudnn_reading(q, k, v, args, heads, head_dim):
    """How cuDNN reads ragged THD: batch entry b starts at element
    ragged_offset[b] and holds seq_len[b] rows (padding mask)."""
    start = (args["ragged_offset_q"].flatten() // (heads * head_dim)).tolist()
    seq_len = args["seq_len_q"].flatten().tolist()
    out = torch.full_like(q, float("nan"))
    for b in range(args["batch"]):
        s, e = start[b], start[b] + seq_len[b]
        if e > s:
            out[s:e] = _causal(q[s:e], k[s:e], v[s:e])
    return out


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_each_reading_gives_each_sequence_its_own_attention(steps, cp):
    """Ranks run in one process; their rows are put in sequence order with
    the partition's inverse; each kernel's reading of its arguments gives
    every valid row the causal attention of its unpadded sequence."""
    rank_steps = [steps(cp, r) for r in range(cp)]
    rng = np.random.default_rng(10 + cp)
    heads, head_dim = 2, 8
    torch.manual_seed(cp)
    table = torch.randn(3, 50000, heads, head_dim, dtype=torch.float64)
    checked = 0
    for _ in range(12):
        mb = random_microbatch(rng, ROWS // cp, cp, N, rank=0)
        for s in rank_steps:
            run(s, mb, cp)
        tok = rank_steps[0].restore_cp_order(torch.cat([s.batch["tokens"][0] for s in rank_steps]))
        q, k, v = (table[j][tok] for j in range(3))
        n = int(mb["num_seqs"][0])
        cu, cup = mb["cu_seqlens"], mb["cu_seqlens_padded"]
        first = rank_steps[0]
        outs = {
            "torch_varlen": flash_attention_reading(
                q, k, v, dict(cu_seqlens_q=attention.varlen_attn_args(first)["cu_seq_q"])),
            "flash_attn_4/seqused": flash_attention_reading(q, k, v, attention.flash_attn_4_args(first)),
            "flash_attn_4/graph": flash_attention_reading(
                q, k, v, attention.flash_attn_4_args(first, "graph")),
            "cudnn/compact": cudnn_reading(q, k, v, attention.cudnn_args(first, heads, head_dim),
                                           heads, head_dim),
            "cudnn/graph": cudnn_reading(
                q, k, v, attention.cudnn_args(first, heads, head_dim, convention="graph"),
                heads, head_dim),
        }
        for i in range(n):
            start, valid = int(cup[i]), int(cu[i + 1] - cu[i])
            if not valid:
                continue
            rows = slice(start, start + valid)
            source = torch.from_numpy(mb["tokens"][rows])
            expected = _causal(*(table[j][source] for j in range(3)))
            for name, out in outs.items():
                torch.testing.assert_close(out[rows], expected, msg=name)
            checked += 1
        for name in ("flash_attn_4/seqused", "cudnn/compact"):  # padding rows left unwritten
            keep = attention.computed_rows(first, "seqused")
            assert bool(torch.isnan(outs[name][~keep]).all())
            assert not bool(torch.isnan(outs[name][keep]).any())
    assert checked > 20


def test_keep_rows_zeroes_the_rows_in_the_output_and_the_gradient():
    x = torch.randn(6, 2, 3, requires_grad=True)
    keep = torch.tensor([True, False, True, True, False, False])
    y = attention.KeepRows.apply(x * float("nan"), keep)
    assert bool(torch.isnan(y[keep]).all()) and bool((y[~keep] == 0).all())
    z = attention.KeepRows.apply(x, keep)
    torch.autograd.backward(z, torch.full_like(z, float("nan")))
    assert bool((x.grad[~keep] == 0).all()) and bool(torch.isnan(x.grad[keep]).all())


def test_arguments_read_no_values():
    """On meta tensors (shapes, no data) every argument function runs:
    none of them reads a value, so none synchronises with the device."""
    entries = N + 1
    meta = lambda: torch.empty(entries, dtype=torch.int32, device="meta")
    source = SimpleNamespace(outputs=SimpleNamespace(cu_seqlens_padded=meta(), cu_seqlens=meta()),
                             packed_seq_params=SimpleNamespace(max_seqlen_q=ROWS))
    source.ran_last = lambda what: source
    assert attention.varlen_attn_args(source)["max_q"] == ROWS
    assert attention.flash_attn_4_args(source)["seqused_q"].shape == (N,)
    c = attention.cudnn_args(source, 4, 64)
    assert c["ragged_offset_q"].shape == (entries, 1, 1, 1) and c["seq_len_q"].device.type == "meta"
    for convention in ("graph", "seqused"):
        assert attention.computed_rows(source, convention).shape == (ROWS,)
    x = torch.empty(ROWS, 4, 64, device="meta")
    assert attention.KeepRows.apply(x, attention.computed_rows(source, "seqused")).shape == x.shape


def test_bad_arguments_raise(steps):
    step = steps(1)
    with pytest.raises(ValueError, match="conventions"):
        attention.flash_attn_4_args(step, "compact")
    with pytest.raises(ValueError, match="conventions"):
        attention.cudnn_args(step, 4, 64, convention="seqused")
    with pytest.raises(ValueError, match="kv_heads"):
        attention.cudnn_args(step, 4, 64, kv_heads=3)
    with pytest.raises(ValueError, match="convention must be"):
        attention.computed_rows(step, "nonsense")
    with pytest.raises(ValueError, match="causal=True"):
        attention.flash_attn_4(torch.zeros(256, 2, 8), torch.zeros(256, 2, 8),
                               torch.zeros(256, 2, 8), step, "graph", causal=False)
    with pytest.raises(TypeError, match="GraphStep"):
        attention.varlen_attn_args(object())
    with pytest.raises(TypeError):
        attention.cudnn_args(step, 4.5, 64)
    with pytest.raises(ValueError, match=r"\[C\*cp = 256"):
        attention.varlen_attn(torch.zeros(10, 2, 8), torch.zeros(10, 2, 8), torch.zeros(10, 2, 8),
                              step)


def test_host_padded_offsets_agree_with_the_step_on_what_was_given(steps):
    """The host plan reads the offsets as load_inputs puts them on the
    device. A num_seqs past the given entries: the step empties the
    microbatch (the entry after them is -1), and the plan did not (it
    repeated the last entry). Offsets past 2^31 saturate, never wrap to a
    small valid one; float offsets are refused; C*cp past int32 is refused
    before any host buffer is made."""
    step = steps(1)
    torch = pytest.importorskip("torch")
    cu = torch.tensor([0, 40, 100], dtype=torch.int32)
    data = dict(tokens=torch.zeros(1, 100, dtype=torch.int64),
                labels=torch.zeros(1, 100, dtype=torch.int64),
                loss_mask=torch.ones(1, 100), position_ids=torch.zeros(1, 100, dtype=torch.int64))
    step.load_inputs(**data, cu_seqlens=cu, cu_seqlens_padded=cu, num_seqs=4)
    step.run()
    assert int(step.status[0]) != 0  # emptied on the device
    device = step.outputs.cu_seqlens_padded.numpy()
    host = attention.host_padded_offsets(cu.numpy(), cu.numpy(), 4, ROWS, 1, N, rows_given=100)
    assert np.array_equal(host, device) and host[1] == ROWS  # one dummy over all rows
    wide = np.array([0, 2**32 + 40, 2**32 + 100], dtype=np.int64)  # wraps to 40, 100
    assert attention.host_padded_offsets(wide, wide, 2, ROWS, 1, N)[1] == ROWS  # invalid
    with pytest.raises(TypeError, match="cu_seqlens must hold integers; got dtype float"):
        attention.host_padded_offsets(np.array([0.0, 40.7]), cu.numpy(), 1, ROWS, 1, N)
    with pytest.raises(ValueError, match="C\\*cp and N\\+1 within int32"):
        attention.host_padded_offsets(cu.numpy(), cu.numpy(), 2, 2**30, 2, N)


def test_host_padded_offsets_make_no_data_rows():
    """The host plan computes the offsets alone, O(N) whatever C*cp: it
    made C*cp rows of zeros for the reference step, and at C*cp = 2^31-1
    (within the step's bounds) that was 16 + 8 GiB."""
    import tracemalloc
    cu = np.array([0, 40, 100], dtype=np.int32)
    tracemalloc.start()
    try:
        host = attention.host_padded_offsets(cu, cu, 2, 2**31 - 1, 1, 4, rows_given=100)
        split = attention.host_padded_offsets(cu, cu, 2, 2**30 - 2, 2, 4, dummy_length=2**29)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert host.tolist() == [0, 40, 100, 2**31 - 1, 2**31 - 1]
    assert split.tolist() == [0, 40, 100, 100 + 2**29, 2**31 - 4]


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_host_padded_offsets_are_the_steps_on_random_microbatches(cp):
    """graph_step_offsets is the reference step's metadata without its data
    rows, and host_padded_offsets the step's padded offsets (CP rank 0, as
    it always planned): random microbatches, valid and broken, with and
    without rows_given and split dummies, a CP rank out of range."""
    rng = np.random.default_rng(4700 + cp)
    C, n_max = 64 // cp, 9
    for trial in range(150):
        mb = invalidate(rng, random_microbatch(rng, C, cp, n_max), n_max)
        if trial % 7 == 3:
            mb["cp_rank"][0] = cp + int(rng.integers(0, 2))
        rows = [None, given_rows(mb, C, cp), int(rng.integers(0, C * cp + 1))][trial % 3]
        dummy = None if trial % 2 else 2 * cp * int(rng.integers(1, 5)) // (2 if cp == 1 else 1)
        expected = reference(mb, C, cp, n_max, rows_given=rows, dummy_length=dummy)
        got = thdc.reference.graph_step_offsets(
            mb["cu_seqlens"], mb["cu_seqlens_padded"], int(mb["num_seqs"][0]),
            int(mb["cp_rank"][0]), C, cp, n_max, rows_given=rows, dummy_length=dummy)
        assert sorted(got) == ["cu_seqlens", "cu_seqlens_padded", "max_seqlen", "status"]
        for key in got:
            assert np.array_equal(got[key], expected[key]), (trial, key)
        mb["cp_rank"][0] = 0
        host = attention.host_padded_offsets(mb["cu_seqlens"], mb["cu_seqlens_padded"],
                                             int(mb["num_seqs"][0]), C, cp, n_max,
                                             rows_given=rows, dummy_length=dummy)
        step = reference(mb, C, cp, n_max, rows_given=rows, dummy_length=dummy)
        assert host.dtype == np.int32
        assert np.array_equal(host, step["cu_seqlens_padded"]), trial


@pytest.mark.parametrize("cp", [2, 3, 4])
def test_host_padded_offsets_of_a_contiguous_cp_step(cache_dir, cp):
    """Contiguous CP takes offsets that are not multiples of 2*cp (its
    metadata is the cp = 1 step's over C*cp rows): the host plan with the
    step's cp_mode equals the step's offsets on random microbatches, among
    them three sequences of odd lengths that zigzag CP empties (the plan
    without a CP layout gave the empty microbatch's offsets while the step
    trained the three)."""
    C, N = 96 // cp, 9
    step = thdc.megatron.GraphStep(C, N, cp, cp - 1, device="cpu", cache_dir=cache_dir,
                                   cp_mode="contiguous")
    rng = np.random.default_rng(90 + cp)
    odd = dict(random_microbatch(rng, C, cp, N),
               cu_seqlens=np.array([0, 7, 20, 33] + [-1] * (N - 3), np.int32),
               cu_seqlens_padded=np.array([0, 7, 21, 35] + [-1] * (N - 3), np.int32),
               num_seqs=np.array([3], np.int32))
    for trial in range(40):
        mb = odd if trial == 0 else invalidate(rng, random_microbatch(rng, C, cp, N), N)
        given = step_inputs(mb, C, cp, device="cpu")
        step.load_inputs(**given)
        step.run()
        device = step.outputs.cu_seqlens_padded.numpy()
        args = (mb["cu_seqlens"], mb["cu_seqlens_padded"], int(mb["num_seqs"][0]), C, cp, N)
        rows = given_rows(mb, C, cp)
        host = attention.host_padded_offsets(*args, rows_given=rows, cp_mode="contiguous")
        assert np.array_equal(host, device), trial
        if trial == 0:
            assert int(step.status[0]) == 0 and list(device[:4]) == [0, 7, 21, 35]
            zigzag = attention.host_padded_offsets(*args, rows_given=rows)
            assert not np.array_equal(zigzag, device)  # the layouts' checks differ
    with pytest.raises(ValueError, match="cp_mode must be one of"):
        attention.host_padded_offsets(*args, cp_mode="ring")


def test_a_ladder_step_gives_the_arguments_of_the_rung_that_ran(cache_dir):
    """A step or slot with a capacity ladder stands for the rung that ran
    last: after the top rung ran, then rung 0 on offsets [0, 10, 30], every
    argument function reads rung 0's buffers in rung 0's layout (before,
    they read the top rung's layout: offsets [0, 0, 0, ...], status 0). A
    rung that did not run last is refused by name."""
    C, N, BT = 64, 9, 16
    capacities, sequences = [32, 64], [5, 9]
    step = thdc.megatron.GraphStep(C, N, device="cpu", cache_dir=cache_dir, capacities=capacities,
                                   sequence_capacities=sequences, linear_attention_chunk=BT)
    rng = np.random.default_rng(3)
    top = random_microbatch(rng, C, 1, N)
    step.load_inputs(**step_inputs(top, C, 1, device="cpu"))
    step.slot(0).rung(1).run()
    spare = [-1] * (sequences[0] - 2)
    mb = dict(random_microbatch(rng, capacities[0], 1, sequences[0]),
              cu_seqlens=np.array([0, 10, 30] + spare, np.int32),
              cu_seqlens_padded=np.array([0, 10, 30] + spare, np.int32),
              num_seqs=np.array([2], np.int32))
    step.load_inputs(**step_inputs(mb, capacities[0], 1, device="cpu"))
    low = step.slot(0).rung(0)
    low.run()
    expected = reference(mb, capacities[0], 1, sequences[0])
    padded, valid = expected["cu_seqlens_padded"], expected["cu_seqlens"]
    assert list(padded[:3]) == [0, 10, 30]
    for source in (step, step.slot(0), low):
        assert np.array_equal(attention.varlen_attn_args(source)["cu_seq_q"].numpy(), padded)
        assert attention.varlen_attn_args(source)["max_q"] == capacities[0]
        assert np.array_equal(attention.lengths(source, "seqused").numpy(), np.diff(valid))
        assert np.array_equal(attention.flash_attn_4_args(source)["seqused_q"].numpy(),
                              np.diff(valid))
        c = attention.cudnn_args(source, 2, 8)
        assert c["batch"] == sequences[0] and c["max_seqlen"] == capacities[0]
        assert np.array_equal(c["ragged_offset_q"].flatten().numpy(), padded.astype(np.int64) * 16)
        assert attention.computed_rows(source, "seqused").shape == (capacities[0],)
        NT = thdc.stages.linear_chunk_capacity(capacities[0], 1, sequences[0], BT)
        chunks = thdc.reference.linear_chunks(padded, BT, NT)
        gdn = attention.fla_gdn_args(source)
        assert np.array_equal(gdn["chunk_indices"].numpy(), chunks["chunk_indices"])
    with pytest.raises(ValueError, match=r"varlen_attn_args: rung 1 .* did not run last; rung 0"):
        attention.varlen_attn_args(step.slot(0).rung(1))
    with pytest.raises(ValueError, match=r"fla_gdn_args: rung 1 .* did not run last"):
        attention.fla_gdn_args(step.slot(0).rung(1))


def test_every_consumer_the_gpu_test_runs_has_a_package_and_a_call():
    """test_attention_gpu.py imports each consumer's package or skips with
    its name: every consumer of thdc.attention has one (a missing entry was
    a KeyError on a host without the package), and the softmax test runs
    the consumers it has a call for, not linear attention's."""
    from attention_consumers import CONSUMERS, LINEAR, PACKAGES

    assert set(PACKAGES) == set(attention.CONVENTIONS)
    assert {c for c, _ in CONSUMERS} == set(attention.CONVENTIONS) - set(LINEAR)
    assert {(c, v) for c, v in CONSUMERS} == {
        (c, v) for c in attention.CONVENTIONS if c not in LINEAR
        for v in attention.CONVENTIONS[c]}


def test_cudnn_refuses_large_head_dims_below_the_checked_release(monkeypatch):
    """cuDNN 9.14.0's SDPA backward on ragged rows gave dq off by 40% of its
    scale at head_dim 256 (right on 9.19.0): below 9.19.0, CudnnAttention
    refuses head_dim > 128 by name, with the cuDNN the process runs and the
    way to load PyTorch's own; 64 and 128 run on any release."""
    import sys

    def fake(version):
        return SimpleNamespace(
            backend_version=lambda: version,
            backend_version_string=lambda: f"{version // 10000}.{version // 100 % 100}."
                                           f"{version % 100}")

    monkeypatch.setitem(sys.modules, "cudnn", fake(91400))
    reason = attention.cudnn_refusal(256)
    assert "needs cuDNN >= 9.19.0" in reason and "runs cuDNN 9.14.0" in reason
    assert "head_dim <= 128" in reason and "bench/cudnn_ragged_sdpa.py" in reason
    assert attention.cudnn_refusal(128) is None and attention.cudnn_refusal(64) is None
    with pytest.raises(RuntimeError, match="head_dim 256 needs cuDNN >= 9.19.0"):
        attention.CudnnAttention(4, 256, N, ROWS)
    for version in (91900, 92000, 100000):
        monkeypatch.setitem(sys.modules, "cudnn", fake(version))
        assert attention.cudnn_refusal(256) is None
    with pytest.raises(TypeError):
        attention.cudnn_refusal(256.0)
