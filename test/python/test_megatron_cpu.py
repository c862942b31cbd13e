"""thdc.megatron.GraphStep on the CPU (device="cpu": the pipeline's host
code on CPU tensors), as a machine without a GPU runs it: every stage and CP
layout, with and without seq_idx, RoPE rows and the CP order index, on
random and invalid microbatches against the reference; several slots alive
at once; the status and dropped-work counters; the sequence-parallel shard;
PackedSeqParams; a bundle's host code; every slot method either working or
refusing what needs CUDA (streams) by name; no call into torch.cuda on the
whole path; two TP ranks broadcasting over gloo, and refused by name
before the broadcast when their steps differ. The GPU twin is
test_megatron_gpu.py. Skipped without PyTorch >= 2.10."""
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.stages  # noqa: E402
from conftest import SOURCE_DIR, thdc_command  # noqa: E402
from microbatches import (LocalGroup, check_packed_seq_params, given_rows,  # noqa: E402
                          invalidate, megatron_cp_order_index, random_microbatch, reference, rope_rows, step_inputs,
                          step_mismatches, with_step_counts)

from conftest import megatron_or_skip  # noqa: E402

megatron_or_skip()
import thdc.megatron  # noqa: E402

DATA = ("tokens", "labels", "position_ids", "loss_mask")


@pytest.fixture(scope="module")
def make_step(cache_dir):
    def make(C, N, cp=1, rank=0, **kwargs):
        return thdc.megatron.GraphStep(C, N, cp, rank, device="cpu", cache_dir=cache_dir,
                                       **kwargs)

    return make


def inputs(mb, C, cp):
    return step_inputs(mb, C, cp, device="cpu")


def outputs(slot):
    return {k: v.numpy() for k, v in slot.outputs._asdict().items()}


def contiguous_rows(mb, C, cp, N, rows=None):
    """The outputs of contiguous CP for the rank of `mb`: the buffer is
    padded to C*cp rows first (the dummy sequence covers the tail), then
    rank r takes rows [r*C, (r+1)*C) (docs/semantics.md S7): the cp = 1
    reference over all C*cp rows, cut. Its checks are contiguous CP's (no
    offset needs to be a multiple of cp, megatron-core dev checks only the
    padded total), its metadata the same; the cp_rank of these microbatches
    is always valid."""
    whole = reference(dict(mb, cp_rank=np.array([0], np.int32)), C * cp, 1, N,
                      rows_given=rows)
    rank = int(mb["cp_rank"][0])
    out = {k: whole[k][rank * C:(rank + 1) * C] for k in DATA + ("padding_mask",)}
    out.update({k: whole[k] for k in ("cu_seqlens_padded", "cu_seqlens", "max_seqlen",
                                      "status")})
    return out


def expect(mb, C, cp, N, cp_mode="zigzag", stage="first_last"):
    """The reference's outputs, seq_idx over every rank's rows, dropped counts,
    for the microbatch as inputs() gives it: a stage that reads data checks
    the rows given."""
    rows = given_rows(mb, C, cp) if thdc.stages.data_keys(stage) else None
    expected = reference(mb, C, cp, N, rows_given=rows)
    if cp_mode == "contiguous":
        expected.update(contiguous_rows(mb, C, cp, N, rows))
    return with_step_counts(expected, mb, C, cp)


def compare(got, expected):
    """Names of a stage's outputs that differ from the reference."""
    return step_mismatches(got, expected)


OPTIONS = {
    "all": dict(seq_idx=True, rope=True, cp_order_index=True),
    "none": dict(seq_idx=False, rope=False, cp_order_index=False),
}


@pytest.mark.parametrize("options", list(OPTIONS))
@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
@pytest.mark.parametrize("stage", thdc.stages.STAGES)
def test_stage_against_reference(make_step, stage, cp_mode, options):
    """Random and invalid microbatches through the step's own load and run
    (every key given: the stage reads its own), against the reference; the
    RoPE rows against the S8 rule, the CP order index a permutation."""
    C, cp, N, R = 48, 2, 9, 160
    opts = dict(OPTIONS[options])
    rope = opts.pop("rope") and cp_mode == "zigzag"
    step = make_step(C, N, cp, 1, stage=stage, cp_mode=cp_mode,
                     rope_table_rows=R if rope else None, **opts)
    assert step.kernel.backend == "host" and step.device == torch.device("cpu")
    keys = thdc.stages.data_keys(stage)
    assert set(step.batch) == set(keys) | {"padding_mask"}
    assert list(step.outputs._fields) == thdc.stages.outputs(
        stage, seq_idx=opts["seq_idx"], rope=rope, cp_order_index=opts["cp_order_index"])
    for tensor in step.outputs:
        assert tensor.device.type == "cpu"
    rng = np.random.default_rng(sum(map(ord, stage + cp_mode + options)))
    statuses = set()
    for trial in range(30):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        if trial % 3 == 2:
            mb = invalidate(rng, mb, N)
        batch, params = step(**inputs(mb, C, cp))
        assert batch is step.batch and params is step.packed_seq_params
        got = outputs(step)
        expected = expect(mb, C, cp, N, cp_mode, stage)
        statuses.add(expected["status"] != 0)
        bad = compare(got, expected)
        assert bad == [], f"trial {trial}: {bad}"
        assert (step.seq_idx is None) == (not opts["seq_idx"])
        if rope:
            assert np.array_equal(got["rope_rows"], rope_rows(
                got["cu_seqlens_padded"], C * cp, cp, 1, C, R))
        else:
            assert step.rope_rows is None
        if opts["cp_order_index"]:
            assert np.array_equal(np.sort(got["cp_order_index"]), np.arange(C * cp))
        else:
            assert step.cp_order_index is None
    assert statuses == {False, True}


def microbatch_of(value, rows, cu):
    """A microbatch of `rows` rows, every token `value`, loss mask 1."""
    full = lambda v, dtype: torch.full((1, rows), v, dtype=dtype)
    cu = torch.tensor(cu, dtype=torch.int32)
    return dict(tokens=full(value, torch.int64), labels=full(value + 1, torch.int64),
                loss_mask=full(1.0, torch.float32), position_ids=full(3, torch.int64),
                cu_seqlens=cu, cu_seqlens_padded=cu.clone())


def test_a_short_microbatch_never_trains_on_the_previous_one(make_step):
    """Microbatch B gives 20 rows where its offsets claim 32: the rows past
    20 hold microbatch A's tokens. The step flags it (rows_not_given) and
    empties it (loss mask 0 everywhere, the claim counted as dropped)
    instead of training on A's rows. Each stage that reads data does."""
    for stage in ("first_last", "first", "last"):
        step = make_step(64, 8, 1, 0, stage=stage)
        keys = thdc.stages.data_keys(stage)
        take = lambda mb: {k: v for k, v in mb.items() if k in keys or k.startswith("cu")}
        step(**take(microbatch_of(1000, 32, [0, 16, 32])))
        assert int(step.status[0]) == 0
        if "tokens" in keys:
            assert step.batch["tokens"][0, :32].eq(1000).all()
        step(**take(microbatch_of(7, 20, [0, 16, 32])))
        assert thdc.describe_status(int(step.status[0])) == "rows_not_given", stage
        if "loss_mask" in keys:
            assert not step.batch["loss_mask"].any()
        if "tokens" in keys:
            assert not step.batch["tokens"].eq(1000).any()
        assert step.batch["padding_mask"].all()
        assert (int(step.outputs.dropped_seqs[0]), int(step.outputs.dropped_tokens[0])) == (2, 32)
        # The same offsets with their 32 rows: valid again.
        step(**take(microbatch_of(7, 32, [0, 16, 32])))
        assert int(step.status[0]) == 0


def test_a_count_past_the_given_offsets_never_reads_the_previous_ones(make_step):
    """Microbatch B gives the offsets [0, 16] but says num_seqs = 2: entry 2
    of the static cu buffers holds microbatch A's offset 32, and B would be
    read as two sequences with A's boundary. The entry after those given is
    -1, so the step flags the decreasing offset and empties B, whether the
    count is an int or a tensor."""
    step = make_step(64, 8, 1, 0)
    for count in (2, torch.tensor([2], dtype=torch.int32)):
        step(**microbatch_of(1000, 32, [0, 16, 32]))
        assert int(step.status[0]) == 0
        step(**microbatch_of(7, 32, [0, 16]), num_seqs=count)
        assert thdc.describe_status(int(step.status[0])) == "not_monotonic", count
        assert not step.batch["loss_mask"].any()
        step(**microbatch_of(7, 32, [0, 16]), num_seqs=1)
        assert int(step.status[0]) == 0


def test_tensors_that_are_not_one_packed_microbatch_are_refused_before_copying(make_step):
    """A [2, T] tokens tensor (micro-batch size 2) and data tensors of
    different lengths are refused by name, and nothing of them is copied."""
    step = make_step(64, 8, 1, 0)
    step(**microbatch_of(5, 32, [0, 16, 32]))
    before = {k: v.clone() for k, v in vars(step.inputs).items()}
    two_rows = dict(microbatch_of(9, 32, [0, 16, 32]), tokens=torch.full((2, 32), 9))
    with pytest.raises(ValueError, match=r"tokens has the shape \(2, 32\).*micro-batch size 1"):
        step.load_inputs(**two_rows)
    ragged = dict(microbatch_of(9, 32, [0, 16, 32]), labels=torch.full((1, 31), 9))
    with pytest.raises(ValueError, match="labels has 31 rows but tokens has 32"):
        step.load_inputs(**ragged)
    for name, value in vars(step.inputs).items():
        assert torch.equal(value, before[name]), name


def test_integers_are_never_narrowed_silently(make_step):
    """An int64 offset past the int32 range saturates on its way into the
    step's int32 buffer (so the step flags it) instead of wrapping to a small
    valid one; a floating-point tensor (NaN included) is refused for an
    integer buffer."""
    step = make_step(64, 8, 1, 0)
    mb = microbatch_of(5, 16, [0, 16])
    mb["cu_seqlens_padded"] = torch.tensor([0, 2**32 + 16], dtype=torch.int64)
    step(**mb)
    assert int(step.inputs.cu_seqlens_padded[1]) == 2**31 - 1
    assert "total_exceeds_capacity" in thdc.describe_status(int(step.status[0]))
    nan_tokens = dict(microbatch_of(5, 16, [0, 16]), tokens=torch.full((1, 16), float("nan")))
    with pytest.raises(TypeError, match="tokens is torch.float32.*NaN"):
        step(**nan_tokens)


def test_what_the_user_did_wrong_is_named(make_step):
    """Each message names what the user did and what to do: an unknown
    keyword (with the closest valid one; it used to name an internal
    class), parameters the pipeline cannot take (they used to come back as
    compiler errors pointing into the generated text), and a CUDA device on
    a host without one (it used to say the device string was malformed)."""
    step = make_step(64, 8, 1, 0)
    with pytest.raises(TypeError, match=r"load_inputs\(\) got unexpected keyword argument "
                                        r"'tokenz' \(did you mean 'tokens'\?\); it takes "
                                        r"tokens, labels"):
        step.load_inputs(tokenz=torch.zeros(4, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"step\(\) got unexpected keyword argument 'strem' "
                                        r"\(did you mean 'stream'\?\)"):
        step(**microbatch_of(1, 16, [0, 16]), strem=None)
    with pytest.raises(ValueError, match="zigzag CP cuts every sequence into 2\\*cp chunks.*"
                                         "got C=63 with cp=2"):
        make_step(63, 8, 2, 0)
    make_step(63, 8, 2, 0, cp_mode="contiguous")  # no such constraint there
    with pytest.raises(ValueError, match="N >= 2 \\(N - 1 real sequences\\); got N=1"):
        make_step(64, 1, 1, 0)
    with pytest.raises(ValueError, match="C\\*cp = 4294967296 does not fit the int32"):
        make_step(2**31, 8, 2, 0)
    if not torch.cuda.is_available():
        for device in ("cuda", "cuda:0", None):
            with pytest.raises(RuntimeError, match="PyTorch sees no CUDA device here.*"
                                                   "pass device='cpu'"):
                thdc.megatron.GraphStep(64, 8, device=device)


def test_the_jit_compiles_the_host_code(make_step, monkeypatch):
    """The pipeline is compiled for the host whatever devices there are."""
    backends = []
    compile_ = thdc.compile
    # The step compiles through thdc._kernel, the module thdc.compile is from.
    monkeypatch.setattr(thdc._kernel, "compile", lambda *a, **k: backends.append(k.get("backend"))
                        or compile_(*a, **k))
    step = make_step(32, 5, 2, 1, stage="middle")
    assert backends == ["host"] and step.kernel.backend == "host"


@pytest.mark.parametrize("cp_mode,cp", [("zigzag", 2), ("zigzag", 4), ("contiguous", 3)])
def test_restore_cp_order_undoes_the_partition(make_step, cp_mode, cp):
    """Every rank's outputs gathered rank-major and put back with
    restore_cp_order equal the cp = 1 step over all C*cp rows."""
    C, N = 48, 9
    ranks = [make_step(C, N, cp, r, cp_mode=cp_mode, cp_order_index=True) for r in range(cp)]
    whole = make_step(C * cp, N)
    rng = np.random.default_rng(50 + cp)
    valid = 0
    for _ in range(20):
        mb = random_microbatch(rng, C, cp, N)
        for step in ranks:
            step(**inputs(mb, C, cp))
        whole(**inputs(mb, C * cp, 1))
        if int(whole.status[0]) or int(ranks[0].status[0]):
            continue
        valid += 1
        for key in DATA + ("padding_mask",):
            gathered = torch.cat([getattr(s.outputs, key) for s in ranks])
            assert torch.equal(ranks[0].restore_cp_order(gathered), getattr(whole.outputs, key))
        hidden = torch.randn(cp * C, 3).to(torch.bfloat16)
        assert torch.equal(ranks[0].restore_cp_order(hidden),
                           hidden[ranks[0].cp_order_index.long()])
    assert valid >= 10


@pytest.mark.parametrize("cp,dummy_length", [(2, None), (4, None), (2, 8), (4, 16)])
def test_cp_order_index_is_megatron_cores_undo_of_the_partition(make_step, cp, dummy_length):
    """The index puts every row where megatron-core's undo of the CP
    partition does: TE's zigzag partition over the step's output offsets, the
    dummy sequence(s) over the tail zigzagged like any sequence, so a consumer
    that mixes the two gets the same order, tail rows included; on valid and
    emptied microbatches alike."""
    C, N = 48, 9
    step = make_step(C, N, cp, 1, cp_order_index=True, dummy_length=dummy_length)
    rng = np.random.default_rng(90 + cp)
    tails = 0
    for trial in range(40):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        if trial % 8 == 7:
            invalidate(rng, mb, N)
        step(**inputs(mb, C, cp))
        cu = step.outputs.cu_seqlens_padded.numpy()
        expected = megatron_cp_order_index(cu, C, cp)
        assert np.array_equal(step.cp_order_index.numpy(), expected), trial
        n = int(mb["num_seqs"][0])
        tails += int(step.status[0]) == 0 and int(mb["cu_seqlens_padded"][n]) < C * cp
    assert tails >= 15


def test_slots_keep_microbatches_and_count_the_dropped_work(make_step):
    """K slots, microbatch i in slot i mod K: after K loads and runs every
    one is intact; the status flag and the dropped counts add up over
    rounds with invalid microbatches."""
    C, cp, N, K = 64, 2, 9, 3
    step = make_step(C, N, cp, 0, slots=K)
    assert len(step.slots) == K and step.slot(K) is step.slot(0) is step.slots[0]
    assert step.inputs is step.slot(0).inputs and step.buffer is step.slot(0).buffer
    assert len({s.buffer.data_ptr() for s in step.slots}) == K
    rng = np.random.default_rng(32)
    flag = torch.zeros(1, dtype=torch.int32)
    counts = torch.zeros(2, dtype=torch.int64)
    total = np.zeros(2, np.int64)
    for round_ in range(4):
        batches = [random_microbatch(rng, C, cp, N, rank=0) for _ in range(K)]
        if round_ >= 2:
            batches[1]["num_seqs"][0] = N  # more sequences than the step holds
        for i, mb in enumerate(batches):
            slot = step.slot(round_ * K + i)
            slot.load_inputs(**inputs(mb, C, cp))
            slot.run()
            assert slot.accumulate_status(flag) is flag
            assert slot.accumulate_dropped(counts) is counts
        for i, mb in enumerate(batches):
            expected = expect(mb, C, cp, N)
            assert compare(outputs(step.slot(i)), expected) == [], f"round {round_}, slot {i}"
            total += expected["dropped"]
    assert int(flag) != 0 and total[0] > 0
    assert counts.tolist() == total.tolist()
    assert step.slot(1).describe_status() != "ok" and thdc.describe_status(int(flag)) != "ok"
    assert int(step.slot(1).status[0]) & ~int(flag) == 0
    assert step.slot(0).describe_status() == "ok"


def test_packed_seq_params_and_conventions(make_step):
    C, cp, N = 64, 2, 9
    step = make_step(C, N, cp, 1)
    params, fields = check_packed_seq_params(step, make_step, C, N, cp, 1)
    assert params.qkv_format == "thd"
    assert params.cu_seqlens_q is step.outputs.cu_seqlens_padded
    assert params.max_seqlen_kv == C * cp
    if "seq_idx" in fields:
        assert step.seq_idx.shape == (1, C * cp)
    mb = random_microbatch(np.random.default_rng(3), C, cp, N, rank=1)
    step(**inputs(mb, C, cp))
    expected = reference(mb, C, cp, N)
    assert np.array_equal(params.cu_seqlens_kv_padded.numpy(), expected["cu_seqlens_padded"])


def test_sequence_parallel_shard_of_the_padding_mask(make_step):
    C, cp, N, tp = 64, 2, 9, 4
    full = make_step(C, N, cp, 0)
    mb = random_microbatch(np.random.default_rng(60), C, cp, N, rank=0)
    full(**inputs(mb, C, cp))
    shard = C // tp
    for tp_rank in range(tp):
        step = make_step(C, N, cp, 0, tp=tp, tp_rank=tp_rank, sequence_parallel=True)
        batch, _ = step(**inputs(mb, C, cp))
        # The model takes the whole mask, the tokens' shape (megatron-core's
        # GPTModel asserts it and scatters the mask itself); the shard is
        # padding_mask_shard.
        assert batch["padding_mask"].shape == batch["tokens"].shape == (1, C)
        assert torch.equal(batch["padding_mask"], full.batch["padding_mask"])
        assert step.padding_mask_shard.shape == (1, shard)
        assert torch.equal(step.padding_mask_shard,
                           full.batch["padding_mask"][:, tp_rank * shard:(tp_rank + 1) * shard])
        assert full.padding_mask_shard is None


def test_bundle_host_code(tmp_path, make_step, monkeypatch):
    """GraphStep(bundle=..., device="cpu") runs the bundle's host code."""
    tool = thdc_command()
    C, cp, N = 64, 2, 9
    pipeline = tmp_path / "last.mlir"
    pipeline.write_text(thdc.stages.pipeline("last"))
    bundle = tmp_path / "last.bundle"
    subprocess.run([tool, str(pipeline), "--param", f"C={C}", "--param", f"cp={cp}",
                    "--param", f"N={N}", "-o", str(bundle)], check=True)
    backends = []
    load = thdc.load
    monkeypatch.setattr(thdc._kernel, "load", lambda *a, **k: backends.append(k.get("backend"))
                        or load(*a, **k))
    step = make_step(C, N, cp, 1, stage="last", bundle=str(bundle))
    assert backends == ["host"]  # also where a GPU would make "auto" the CUDA code
    assert step.kernel.backend == "host" and step.kernel.compile_info["source"] == "bundle"
    rng = np.random.default_rng(9)
    for trial in range(10):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        step(**inputs(mb, C, cp))
        assert compare(outputs(step), expect(mb, C, cp, N, stage="last")) == [], \
            f"trial {trial}"
    with pytest.raises(ValueError, match="not the step for stage='first'"):
        make_step(C, N, cp, 1, stage="first", bundle=str(bundle))
    with pytest.raises(ValueError, match="compiled for"):
        make_step(C, N + 1, cp, 1, stage="last", bundle=str(bundle))
    # A manifest that lies about N (its hash rewritten, as anyone who edits a
    # carried bundle can) used to load, and the step sized its copies by the
    # lie: 404 bytes into a 28-byte buffer. The code states its parameters.
    import hashlib
    manifest = bundle / "manifest.json"
    text = manifest.read_text()
    lie = text.replace(f'"N": {N}', '"N": 100', 1)
    assert lie != text
    manifest.write_text(lie)
    (bundle / "manifest.json.sha256").write_text(hashlib.sha256(lie.encode()).hexdigest() + "\n")
    with pytest.raises(RuntimeError, match=f"params.N is 100, but the host code was compiled "
                                           f"with N = {N}"):
        make_step(C, 100, cp, 1, stage="last", bundle=str(bundle))


def test_cuda_only_things_are_refused_by_name(make_step):
    """Streams do not exist on the CPU: run(stream=) and step(..., stream=)
    raise ValueError naming them, whatever the stream's form. check_async
    raises at once on an invalid microbatch. Tensors on another device
    are refused by name."""
    C, cp, N = 64, 2, 9
    step = make_step(C, N, cp, 1, cp_order_index=True)
    mb = random_microbatch(np.random.default_rng(4), C, cp, N, rank=1)
    for stream in (0, 7, object()):
        with pytest.raises(ValueError, match=r"run\(stream=...\).*CPU.*no streams"):
            step.run(stream=stream)
        with pytest.raises(ValueError, match="no streams"):
            step.slot(0)(**inputs(mb, C, cp), stream=stream)
    step.run(stream=None)
    step.check_async()  # valid: nothing happens
    bad = random_microbatch(np.random.default_rng(5), C, cp, N, rank=1)
    bad["num_seqs"][0] = N + 1
    step(**inputs(bad, C, cp))
    with pytest.raises(RuntimeError,
                       match=r"invalid THD microbatch metadata: status \d+ "
                             r"\(num_seqs_out_of_range"):
        step.check_async()
    with pytest.raises(ValueError, match="int64 tensor of shape \\(2,\\) on cpu"):
        step.accumulate_dropped(torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="int64 tensor of shape \\(2,\\) on cpu"):
        step.accumulate_dropped(torch.zeros(2, dtype=torch.int64, device="meta"))
    with pytest.raises(ValueError, match="C\\*cp = 128 rows on cpu"):
        step.restore_cp_order(torch.zeros(C * cp, device="meta"))
    with pytest.raises(ValueError, match="device must be 'cpu' or a CUDA device"):
        thdc.megatron.GraphStep(C, N, cp, 1, device="meta")
    with pytest.raises(ValueError, match="device must be 'cpu' or a CUDA device"):
        thdc.megatron.GraphStep(C, N, cp, 1, device="not-a-device")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="device='cpu'"):
            thdc.megatron.GraphStep(C, N, cp, 1)


def test_no_call_into_torch_cuda(make_step, monkeypatch):
    """The CPU path never calls into torch.cuda: with every public callable
    of torch.cuda replaced by one that fails, a step is built (JIT and
    slots), loaded, run and read through every slot method."""
    def fail(name):
        def called(*args, **kwargs):
            raise AssertionError(f"torch.cuda.{name} was called on the CPU path")
        return called

    for name in dir(torch.cuda):
        if not name.startswith("_") and callable(getattr(torch.cuda, name)):
            monkeypatch.setattr(torch.cuda, name, fail(name))
    C, cp, N = 32, 2, 5
    step = make_step(C, N, cp, 1, slots=2, rope_table_rows=64, cp_order_index=True)
    flag, counts = torch.zeros(1, dtype=torch.int32), torch.zeros(2, dtype=torch.int64)
    rng = np.random.default_rng(6)
    for i in range(4):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        slot = step.slot(i)
        slot.load_inputs(**inputs(mb, C, cp))
        slot.run()
        slot.accumulate_status(flag)
        slot.accumulate_dropped(counts)
        slot.describe_status()
        slot.restore_cp_order(torch.zeros(C * cp, 2))
        assert compare(outputs(slot), expect(mb, C, cp, N)) == []
        if int(slot.status[0]) == 0:
            slot.check_async()


def test_the_package_logs_what_it_builds(make_step, caplog):
    """Through Python's logging, under "thdc": a step says what it built at
    INFO, a compile how it was served at DEBUG; nothing is printed unless
    the application asks."""
    import logging

    with caplog.at_level(logging.DEBUG, logger="thdc"):
        make_step(64, 9, 2, 1, capacities=[32, 64], slots=2)
    messages = [r.getMessage() for r in caplog.records if r.name == "thdc"]
    assert any(m.startswith("GraphStep(C=64, N=9, cp=2, stage='first_last'): 2 kernel(s) "
                            "(2 rung(s) x 1 CP size(s)), 2 slot(s)") for m in messages), messages
    assert any("(host) " in m and " ms, key " in m for m in messages), messages


def test_importing_the_drop_in_leaves_megatron_core_until_it_is_needed():
    """`import thdc.megatron` does not import megatron-core (seconds and
    warnings on a machine that only plans), and is quiet: nothing on stdout
    or stderr, no warning even with every warning shown (-W always: those
    Python hides by default too). Its PackedSeqParams is looked up where a
    step first needs it, or its names are read."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("PYTHONWARNINGS", None)
    quiet = subprocess.run([sys.executable, "-W", "always", "-c", "import thdc.megatron"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stdout == "" and quiet.stderr == "", (
        f"import thdc.megatron printed:\nstdout:\n{quiet.stdout[-3000:]}\n"
        f"stderr:\n{quiet.stderr[-3000:]}")
    code = ("import sys, thdc.megatron as m\n"
            "assert 'megatron.core' not in sys.modules, 'imported with thdc.megatron'\n"
            "fields = m.packed_seq_params_fields()\n"
            "assert ('megatron.core' in sys.modules) == m.USING_MEGATRON_CORE\n"
            "assert m.PackedSeqParams.__name__ == 'PackedSeqParams' and 'seq_idx' in fields\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_two_tp_ranks_broadcast_over_gloo(tmp_path):
    """Two TP ranks on the CPU under torchrun: replicate and broadcast
    (slot.broadcast over gloo), both equal on both ranks and to the
    reference (test/python/torchrun_tp.py --device cpu)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
               THDC_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run(
        # torchrun of this interpreter's torch (a torchrun on PATH may be
        # another Python's).
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         os.path.join(os.path.dirname(__file__), "torchrun_tp.py"), "--device", "cpu",
         "--C", "64", "--N", "9", "--microbatches", "20"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "tp ranks agree" in result.stdout


def test_tp_ranks_of_other_steps_are_refused_before_the_broadcast(tmp_path):
    """Two TP ranks over gloo whose steps differ (another C, another ladder):
    their buffers differ in size, and gloo aborts a receiver given another
    size; the first broadcast of a step on a group agrees on the steps with
    one small collective and raises ValueError naming what differs, on
    every rank. The same steps agree once and broadcast as before
    (test/python/torchrun_tp_agree.py)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
               THDC_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         os.path.join(os.path.dirname(__file__), "torchrun_tp_agree.py")],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "tp agreement checked" in result.stdout
    for rank in (0, 1):
        assert f"rank {rank}: ValueError: broadcast: " in result.stdout


class _FakeBroadcast:
    """torch.distributed for two TP ranks in one process, each sender's call
    made before the receivers': get_rank, get_world_size, broadcast (the
    sender's bytes reach the receiver up to the shorter buffer, what a
    transport that does not compare counts delivers) and all_gather (the
    tensor of each rank that has called it, the caller's for the others: the
    sender sees its own)."""

    def __init__(self, monkeypatch):
        import torch.distributed as dist

        self.rank, self.sent, self.gathered, self.gathers = 0, None, {}, 0
        for name in ("get_rank", "get_world_size", "broadcast", "all_gather"):
            monkeypatch.setattr(dist, name, getattr(self, name))

    def get_rank(self, group=None):
        return self.rank

    def get_world_size(self, group=None):
        return 2

    def broadcast(self, tensor, src, group=None):
        if self.rank == src:
            self.sent = tensor.clone()
        else:
            count = min(tensor.numel(), self.sent.numel())
            tensor[:count].copy_(self.sent[:count])

    def all_gather(self, tensors, tensor, group=None):
        self.gathers += 1
        self.gathered[self.rank] = tensor.clone()
        for rank, out in enumerate(tensors):
            out.copy_(self.gathered.get(rank, tensor))


def _sent_microbatch(step):
    """Loads and runs two sequences on the step (52 rows, cp = 2)."""
    rows = torch.arange(1, 53).view(1, -1)
    step(tokens=rows, labels=rows, position_ids=rows, loss_mask=torch.ones(1, 52),
         cu_seqlens=torch.tensor([0, 20, 46], dtype=torch.int32),
         cu_seqlens_padded=torch.tensor([0, 24, 52], dtype=torch.int32))
    assert int(step.status[0]) == 0


@pytest.mark.parametrize("rung", [None, 0])
def test_broadcast_header_names_the_senders_layout(make_step, monkeypatch, rung):
    """A TP rank receives the sender's outputs only when it expects the
    layout the sender ran: of the same step, another rung (what can change
    from one microbatch to the next) is flagged layout_mismatch on the
    device and the receiver keeps an empty microbatch of its own layout
    (all padding, no row trained), never rows laid out for another rung.
    The steps are agreed on once, at the first broadcast."""
    fake = _FakeBroadcast(monkeypatch)
    cp = 2
    options = dict(tp=2, capacities=[32, 64], sequence_capacities=[5, 9])
    sender = make_step(64, 9, cp, 1, tp_rank=0, **options)
    got = make_step(64, 9, cp, 1, tp_rank=1, **options)
    _sent_microbatch(sender)
    sender.broadcast(src=0)
    fake.rank = 1
    view = got.slot(0).rung(-1 if rung is None else rung)
    empty = view.empty.clone()
    view.outputs.status.fill_(0)
    view.broadcast(src=0)
    view.broadcast(src=0)
    assert fake.gathers == 2  # once for each step
    mismatch = thdc.STATUS_BITS["layout_mismatch"]
    if rung is None:  # the rung the sender ran: its outputs
        assert torch.equal(got.buffer, sender.buffer)
        assert int(got.status[0]) == 0 and got.batch["loss_mask"].sum() > 0
        return
    assert int(view.status[0]) == mismatch
    assert thdc.describe_status(int(view.status[0])) == "layout_mismatch"
    # The receiver's own empty microbatch, but for the status bit.
    status = view.outputs.status.clone()
    view.outputs.status.fill_(0)
    assert torch.equal(view.output_bytes, empty)
    view.outputs.status.copy_(status)
    assert not view.padding_mask_full.logical_not().any()  # every row padding
    if "loss_mask" in view.batch:
        assert view.batch["loss_mask"].sum() == 0
    # One sequence, the dummy over every row.
    assert view.outputs.cu_seqlens_padded[1:].tolist() == [view.C * cp] * view.N


@pytest.mark.parametrize("receiver, named", [
    (dict(N=10), "N = 10 (rank 0: 9)"),
    (dict(C=72), "C = 72 (rank 0: 64), size = "),  # a buffer of another size
    (dict(rank=0), "cp_rank = 0 (rank 0: 1)"),
    (dict(stage="last"), "stage = 'last' (rank 0: 'first_last')"),
    (dict(cp_mode="contiguous"), "other options (cp_mode"),
    (dict(seq_idx=False), "other options (cp_mode"),  # other outputs
    (dict(capacities=[32, 64]), "other rungs (capacities"),
])
def test_broadcast_refuses_a_rank_of_another_step_by_name(make_step, monkeypatch, receiver,
                                                          named):
    """The first broadcast of a step on a group gathers every rank's step: a
    TP rank that built another one than the sender (C, N, CP rank, stage,
    options, ladder) gets ValueError naming what differs, before any byte
    of the buffer is sent (a real transport aborts a receiver given another
    size)."""
    fake = _FakeBroadcast(monkeypatch)
    sent_options = dict(C=64, N=9, rank=1, tp=2, tp_rank=0)
    make = lambda o: make_step(o.pop("C"), o.pop("N"), 2, o.pop("rank"), **o)
    sender = make(dict(sent_options))
    got = make(dict(sent_options, tp_rank=1, **receiver))
    _sent_microbatch(sender)
    sender.broadcast(src=0)
    fake.rank = 1
    before = got.buffer.clone()
    with pytest.raises(ValueError, match=re.escape(
            "broadcast: rank 1 built another step than the sender, rank 0: " + named)):
        got.broadcast(src=0)
    assert torch.equal(got.buffer, before)


def test_the_sender_sends_the_layout_of_the_rung_that_ran(make_step, monkeypatch):
    """A sender whose view is not the rung that wrote its buffer last (the
    rungs share it, each laying it out for its own sizes) sends the header
    of the rung that did: a receiver expecting the sender's view refuses the
    bytes (layout_mismatch), one expecting the rung that ran reads them, and
    the sender's own view is emptied and flagged rung_not_run."""
    fake = _FakeBroadcast(monkeypatch)
    options = dict(tp=2, capacities=[32, 64], sequence_capacities=[5, 9])
    sender = make_step(64, 9, 2, 1, tp_rank=0, **options)
    got = make_step(64, 9, 2, 1, tp_rank=1, **options)
    rows = torch.arange(1, 53).view(1, -1)
    sender.load_inputs(tokens=rows, labels=rows, position_ids=rows, loss_mask=torch.ones(1, 52),
                       cu_seqlens=torch.tensor([0, 20, 46], dtype=torch.int32),
                       cu_seqlens_padded=torch.tensor([0, 24, 52], dtype=torch.int32))
    sender.rung(0).run()
    assert int(sender.rung(0).status[0]) == 0
    ran = sender.rung(0).output_bytes.clone()
    view = sender.rung(1)
    empty = view.empty.clone()
    view.broadcast(src=0)
    not_run = thdc.STATUS_BITS["rung_not_run"]
    assert int(view.status[0]) == not_run
    view.outputs.status.fill_(0)
    assert torch.equal(view.output_bytes, empty)  # its own empty microbatch
    fake.rank = 1
    expecting = got.rung(1)
    expecting.broadcast(src=0)
    assert int(expecting.status[0]) == thdc.STATUS_BITS["layout_mismatch"]
    assert expecting.batch["loss_mask"].sum() == 0
    reading = got.rung(0)
    reading.broadcast(src=0)
    assert int(reading.status[0]) == 0 and torch.equal(reading.output_bytes, ran)


def test_broadcast_needs_a_tp_step(make_step):
    with pytest.raises(ValueError, match=r"broadcast: the step was made for one TP rank"):
        make_step(64, 9).broadcast(src=0)


def test_get_batch_as_megatron_calls_it_tp2_cp2(tmp_path):
    """get_batch_on_this_rank_for_sequence_packing under torchrun, TP = 2 x
    CP = 2 ranks on CPU tensors over gloo, a data iterator on TP rank 0 only,
    every stage form, sequence parallelism, the ring of slots: every rank's
    7-tuple equal to the reference, TP ranks equal (torchrun_megatron.py)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
               THDC_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
         os.path.join(os.path.dirname(__file__), "torchrun_megatron.py"), "--device", "cpu",
         "--microbatches", "15"],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "megatron ranks agree: tp 2 x cp 2, 75 calls" in result.stdout


def test_quickstart_runs_the_step_on_the_cpu():
    """examples/python/quickstart.py with PyTorch and no GPU: GraphStep on
    the CPU, every microbatch checked against the reference."""
    if torch.cuda.is_available():
        pytest.skip("with a GPU the quickstart takes its CUDA-graph path")
    quickstart = os.path.join(SOURCE_DIR, "examples", "python", "quickstart.py")
    result = subprocess.run([sys.executable, quickstart], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                            timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "GraphStep(device='cpu'), all equal to the reference" in result.stdout


def test_load_inputs_takes_the_megatron_batch_dict(make_step):
    """The batch dict of the reference framework's sequence-packing loader
    (its keys and dtypes: int64 data, float32 loss mask, int32 cu arrays,
    max_seqlen an int or an int32 tensor) loads as it is, into the step and
    a slot; local_cp_size (dynamic CP) is refused by name."""
    C, cp, N = 64, 2, 9
    step = make_step(C, N, cp, 1, slots=2)
    for seed, as_tensor in ((70, False), (71, True)):
        mb = random_microbatch(np.random.default_rng(seed), C, cp, N, rank=1)
        batch = inputs(mb, C, cp)
        lengths = np.diff(mb["cu_seqlens_padded"])
        longest = int(lengths.max()) if lengths.size else 0
        batch["max_seqlen"] = torch.tensor(longest, dtype=torch.int32) if as_tensor else longest
        got, _ = step(**batch)
        expected = expect(mb, C, cp, N)
        assert not step_mismatches(outputs(step), expected)
        step.slot(1).load_inputs(**batch)
        step.slot(1).run()
        assert not step_mismatches(outputs(step.slot(1)), expected)
    with pytest.raises(ValueError, match="local_cp_size=2.*dynamic context parallelism"):
        step(**batch, local_cp_size=2)
    with pytest.raises(TypeError, match="'max_seqlens' \\(did you mean 'max_seqlen'\\?\\)"):
        step.load_inputs(**dict(batch, max_seqlens=1))


def _config(**fields):
    from types import SimpleNamespace

    base = dict(max_seqlen_per_dp_cp_rank=64, thd_max_packed_sequences=9,
                pad_packed_seq_alignment="max", cuda_graph_impl="local",
                context_parallel_size=2)
    return SimpleNamespace(**dict(base, **fields))


def test_get_batch_stage_slots_and_outputs_from_megatron_arguments(cache_dir):
    """One process per call (tp = 1): the stage from the PP rank, vp_stage
    and MTP; the ring's size from megatron-core's warm-up count; the 7-tuple
    equal to the reference; the ring keeps the microbatches in flight."""
    M = thdc.megatron
    batches = M.SequencePackingBatches(device="cpu", cache_dir=cache_dir)
    C, cp, N = 64, 2, 9
    config = _config()
    rng = np.random.default_rng(95)
    for pp, pp_rank, form, stage, slots in (
            (1, 0, {}, "first_last", 1),
            (4, 0, {}, "first", 4), (4, 1, {}, "middle", 3), (4, 3, {}, "last", 1),
            (4, 2, dict(mtp_on_this_rank=True), "first_last", 2),
            (2, 0, dict(vpp_size=2, vp_stage=1), "middle", 2 * 1 + 1 * 2 + 1),
            (2, 1, dict(vpp_size=2, vp_stage=1), "last", 2 * 0 + 1 * 2 + 1)):
        pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(1, cp), pp=LocalGroup(pp_rank, pp))
        mbs = [random_microbatch(rng, C, cp, N, rank=1) for _ in range(slots + 2)]
        iterator = iter([dict(inputs(mb, C, cp), max_seqlen=C * cp) for mb in mbs])
        results = []
        for mb in mbs:
            results.append(batches(iterator, pg_collection=pg, config=config, **form))
        step = batches.last.step
        assert step.stage == stage and len(step.slots) == slots
        assert M.slots_in_flight(pp, pp_rank, form.get("vpp_size")) == slots
        # The last `slots` results are intact in their slots.
        for mb, result in list(zip(mbs, results))[-slots:]:
            tokens, labels, loss_mask, attention_mask, position_ids, params, mask = result
            expected = expect(mb, C, cp, N, stage=stage)
            got = dict(tokens=tokens, labels=labels, loss_mask=loss_mask,
                       position_ids=position_ids)
            for k in DATA:
                if k in thdc.stages.data_keys(stage):
                    assert np.array_equal(got[k].numpy().reshape(-1), expected[k]), (stage, k)
                else:
                    assert got[k] is None
            assert attention_mask is None and mask.shape == (1, C)
            assert np.array_equal(mask.numpy().reshape(-1), expected["padding_mask"])
            assert np.array_equal(params.cu_seqlens_q_padded.numpy(),
                                  expected["cu_seqlens_padded"])
            assert params.max_seqlen_q == C * cp


@pytest.mark.parametrize("fields, call, message", [
    (dict(thd_max_packed_sequences=None), {}, "config.thd_max_packed_sequences is not set"),
    (dict(max_seqlen_per_dp_cp_rank=None), {}, "config.max_seqlen_per_dp_cp_rank is not set"),
    (dict(pad_packed_seq_alignment=None), {}, "config.pad_packed_seq_alignment is not set"),
    (dict(pad_packed_seq_alignment=16, cuda_graph_impl="none"), {},
     "without CUDA graphs 16 pads each rank to a multiple of 16"),
    (dict(pad_packed_seq_alignment=128), {},
     "or 64); the reference framework's graph mode accepts only those"),
    (dict(sequence_parallel=True, tensor_model_parallel_size=1), {}, None),
    (dict(thd_tail_padding_policy="extend_last"), {},
     "config.thd_tail_padding_policy='extend_last'"),
    (dict(cp_partition_mode="ring"), {}, "config.cp_partition_mode='ring'"),
    (dict(dynamic_context_parallel=True), {},
     "config.dynamic_context_parallel=True but the call has dynamic_cp=False"),
    (dict(context_parallel_size=4), {}, "config.context_parallel_size=4 but the process group"),
    (dict(fp8="e4m3", fp8_recipe="mxfp8", max_seqlen_per_dp_cp_rank=48), {},
     "config.fp8_recipe='mxfp8': C = 48 is not a multiple of m = 32"),
    (dict(moe_token_dispatcher_type="flex", moe_flex_dispatcher_backend="hybridep",
          max_seqlen_per_dp_cp_rank=96), {},
     "config.moe_flex_dispatcher_backend='hybridep': C = 96 is not a multiple of m = 64"),
    ({}, dict(dynamic_cp=True), "dynamic_cp=True: the DP x CP group comes from "
                                "pg_collection.dp_cp"),
])
def test_get_batch_refuses_what_it_cannot_honour_by_name(fields, call, message):
    M = thdc.megatron
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(1, 2), pp=LocalGroup(0, 1))
    batches = M.SequencePackingBatches(device="cpu")
    if message is None:  # accepted: sequence parallelism means nothing at tp = 1
        assert M.step_options(_config(**fields), tp=1, cp=2)["sequence_parallel"] is False
        return
    with pytest.raises(M.ConfigError, match=re.escape(message)):
        batches(iter([]), pg_collection=pg, config=_config(**fields), **call)


def test_get_batch_refusals_name_the_config_field_or_argument():
    """Refusals that misled: a str C named C rather than the field; fp8=False
    (FP8 off) was held to the delayed recipe's multiple; a vp_stage outside
    the virtual stages gave the middle stage silently."""
    M = thdc.megatron
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(1, 2), pp=LocalGroup(0, 1))
    for fields, message in ((dict(max_seqlen_per_dp_cp_rank="64"),
                             "config.max_seqlen_per_dp_cp_rank='64': an int is needed"),
                            (dict(thd_max_packed_sequences=9.0),
                             "config.thd_max_packed_sequences=9.0: an int is needed")):
        with pytest.raises(M.ConfigError, match=re.escape(message)):
            M.SequencePackingBatches(device="cpu")(iter([]), pg_collection=pg,
                                                   config=_config(**fields))
    # fp8=False is FP8 off: C = 40 holds no recipe's multiple, and is accepted.
    assert M.step_options(_config(fp8=False, max_seqlen_per_dp_cp_rank=40), tp=1,
                          cp=2)["multiple"] is None
    with pytest.raises(M.ConfigError, match="config.fp8_recipe='delayed'"):
        M.step_options(_config(fp8="e4m3", max_seqlen_per_dp_cp_rank=40), tp=1, cp=2)
    for vp_stage, vpp_size in ((2, 2), (-1, 2), (1, None)):
        with pytest.raises(M.ConfigError, match=f"vp_stage={vp_stage} is not a virtual stage"):
            M.SequencePackingBatches(device="cpu")(iter([]), pg_collection=pg, config=_config(),
                                                   vp_stage=vp_stage, vpp_size=vpp_size)


def test_get_batch_keeps_a_bounded_number_of_steps(cache_dir, monkeypatch):
    """A config that changes on every call made a step (and its buffers) for
    each, without a bound; now the oldest beyond MAX_STEPS is dropped with a
    warning."""
    M = thdc.megatron
    batches = M.SequencePackingBatches(device="cpu", cache_dir=cache_dir)
    monkeypatch.setattr(batches, "MAX_STEPS", 2)
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(1, 2), pp=LocalGroup(0, 1))
    rng = np.random.default_rng(5)
    for i, C in enumerate((32, 48, 64)):
        item = dict(inputs(random_microbatch(rng, C, 2, 9, rank=1), C, 2), max_seqlen=2 * C)
        if i < 2:
            batches(iter([item]), pg_collection=pg, config=_config(max_seqlen_per_dp_cp_rank=C))
        else:
            with pytest.warns(RuntimeWarning, match="2 steps kept for as many configs"):
                batches(iter([item]), pg_collection=pg,
                        config=_config(max_seqlen_per_dp_cp_rank=C))
    assert len(batches.steps) == 2 and batches.last.step.C == 64
    assert sorted(step.C for step, _ in batches.steps.values()) == [48, 64]


def test_get_batch_keeps_steps_by_value(cache_dir):
    """The training script makes a new config for every call: the same
    values reuse the step and advance its ring; changed values make another
    step. An fp8 config without a recipe is megatron-core's default,
    "delayed" (16)."""
    M = thdc.megatron
    batches = M.SequencePackingBatches(device="cpu", cache_dir=cache_dir, slots=2)
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(1, 2), pp=LocalGroup(0, 1))
    C, cp, N = 64, 2, 9
    rng = np.random.default_rng(97)
    items = [dict(inputs(random_microbatch(rng, C, cp, N, rank=1), C, cp), max_seqlen=C * cp)
             for _ in range(4)]
    iterator = iter(items)
    slots = []
    for _ in range(3):
        batches(iterator, pg_collection=pg, config=_config(fp8="e4m3", fp8_recipe=None))
        slots.append(batches.last)
    assert len(batches.steps) == 1 and slots[0] is slots[2] and slots[0] is not slots[1]
    assert batches.last.step.config.multiple == 16
    batches(iterator, pg_collection=pg, config=_config(max_seqlen_per_dp_cp_rank=2 * C))
    assert len(batches.steps) == 2 and batches.last.step.C == 2 * C
    with pytest.raises(M.ConfigError, match="capacities and sequence_capacities go together"):
        batches.configure(capacities=(32, 64))
    with pytest.raises(M.ConfigError, match="configure\\(tp=...\\): it comes from the config"):
        batches.configure(tp=2)
    with pytest.raises(M.ConfigError, match="max_seqlen_per_dp_cp_rank=66.*multiple of tp"):
        M.SequencePackingBatches(device="cpu")(
            iterator, pg_collection=SimpleNamespace(tp=LocalGroup(0, 4), cp=LocalGroup(1, 2),
                                                    pp=LocalGroup(0, 1)),
            config=_config(max_seqlen_per_dp_cp_rank=66, sequence_parallel=True,
                           tensor_model_parallel_size=4))


def test_slots_in_flight_follows_megatron_cores_schedules():
    M = thdc.megatron
    assert M.slots_in_flight(1, 0) == 1
    # The combined 1F1B schedule without pipelining: i+1's forward beside
    # i's backward (schedules.py:745-746 on dev).
    assert M.slots_in_flight(1, 0, overlap_moe_expert_parallel_comm=True) == 2
    assert [M.slots_in_flight(4, r) for r in range(4)] == [4, 3, 2, 1]
    assert M.slots_in_flight(4, 0, vpp_size=2) == 2 * 3 + 1 * 4 + 1
    assert M.slots_in_flight(4, 0, vpp_size=2, group=2) == 2 * 3 + 1 * 2 + 1
    assert M.slots_in_flight(4, 3, vpp_size=2, overlap_moe_expert_parallel_comm=True) == 6


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((0, 0), {}, ValueError, "the pipeline group has size 0 with this rank at 0"),
    ((4, 4), {}, ValueError, "the pipeline group has size 4 with this rank at 4"),
    ((4, -1), {}, ValueError, "the pipeline group has size 4 with this rank at -1"),
    ((4, 0), dict(vpp_size=0), ValueError, "vpp_size must be >= 1"),
    ((4, 0), dict(vpp_size=2, group=0), ValueError,
     "config.microbatch_group_size_per_vp_stage must be >= 1"),
    ((4, 0), dict(vpp_size=2, group=2.0), TypeError,
     "config.microbatch_group_size_per_vp_stage must be an int; got float"),
    ((4.0, 0), {}, TypeError, "pipeline group size must be an int"),
])
def test_slots_in_flight_names_what_is_wrong(args, kwargs, error, message):
    """A bad pipeline group and a bad microbatch group each say which they
    are (both once said only that slots must be >= 1)."""
    with pytest.raises(error, match=re.escape(message)):
        thdc.megatron.slots_in_flight(*args, **kwargs)


def test_a_step_larger_than_memory_is_refused_before_allocating(make_step):
    """C, N and slots whose buffers exceed what the host has are refused by
    name before a byte is allocated (not a MemoryError from deep inside
    torch, or the machine swapping)."""
    with pytest.raises(MemoryError, match=r"GraphStep\(C=1073741822, N=9, cp=2, slots=64\): "
                                          r"its buffers take [0-9.]+ GiB .*lower C, N or slots"):
        make_step(2**30 - 2, 9, 2, 0, slots=64)
    with pytest.raises(MemoryError, match=r"N=2147483640, cp=1, slots=64"):
        make_step(64, 2**31 - 8, slots=64)


def test_get_batch_reads_the_iterator_on_tp_rank_0_only():
    M = thdc.megatron
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(0, 1), pp=LocalGroup(0, 1))
    with pytest.raises(ValueError, match="TP rank 0 reads the microbatch"):
        M.SequencePackingBatches(device="cpu")(None, pg_collection=pg,
                                               config=_config(context_parallel_size=1))
    with pytest.raises(KeyError, match="the batch lacks labels, loss_mask"):
        M.SequencePackingBatches(device="cpu")(
            iter([dict(cu_seqlens=None, cu_seqlens_padded=None, max_seqlen=0, tokens=None,
                       position_ids=None)]),
            pg_collection=pg, config=_config(context_parallel_size=1))


def _all_slots(rng, C, cp, N, granularity, tail):
    """A microbatch of N sequences (every slot) whose padded lengths,
    multiples of `granularity`, sum to C*cp - tail."""
    units = (C * cp - tail) // granularity
    cuts = np.sort(np.concatenate([[0, units], rng.integers(0, units + 1, size=N - 1)]))
    cup = (cuts * granularity).astype(np.int32)
    valid = [int(rng.integers(0, p + 1)) for p in np.diff(cup)]
    mb = random_microbatch(rng, C, cp, N)
    mb["cu_seqlens_padded"] = cup
    mb["cu_seqlens"] = np.concatenate([[0], np.cumsum(valid)]).astype(np.int32)
    mb["num_seqs"] = np.array([N], dtype=np.int32)
    return mb


@pytest.mark.parametrize("cp", [2, 3, 4])
def test_contiguous_cp_keeps_offsets_not_divisible_by_cp(make_step, cp):
    """Contiguous CP slices the buffer padded to C*cp rows and needs no offset
    to be a multiple of cp (megatron-core dev d48bd6be0a checks only the
    padded total, data_schedule_utils.py:26-100): such microbatches are kept,
    every rank's rows are the cp = 1 step's over the whole buffer, cut."""
    C, N = 24, 7
    ranks = [make_step(C, N, cp, r, cp_mode="contiguous") for r in range(cp)]
    rng = np.random.default_rng(90 + cp)
    odd = 0
    for trial in range(24):
        mb = random_microbatch(rng, C, cp, N)
        n = int(mb["num_seqs"][0])
        if trial % 2:  # lengths of any size, most not multiples of cp
            lengths = rng.integers(0, 2 * C * cp // max(n, 1) + 1, size=n)
            while lengths.sum() > C * cp:
                lengths //= 2
            mb["cu_seqlens_padded"][:n + 1] = np.concatenate([[0], np.cumsum(lengths)])
            mb["cu_seqlens"][:n + 1] = np.concatenate(
                [[0], np.cumsum([int(rng.integers(0, p + 1)) for p in lengths])])
        if trial % 6 == 5:
            mb = _all_slots(rng, C, cp, N, 1, 0)
        cup = mb["cu_seqlens_padded"][:int(mb["num_seqs"][0]) + 1]
        odd += bool(np.any(cup % cp))
        whole = reference(dict(mb, cp_rank=np.array([0], np.int32)), C * cp, 1, N,
                          rows_given=given_rows(mb, C, cp))
        assert whole["status"] == 0, f"trial {trial}: a valid microbatch"
        for r, step in enumerate(ranks):
            step(**inputs(dict(mb, cp_rank=np.array([r], np.int32)), C, cp))
            got = outputs(step)
            assert got["status"][0] == 0, f"trial {trial} rank {r}: {got['status']}"
            for key in DATA + ("padding_mask",):
                assert np.array_equal(got[key], whole[key][r * C:(r + 1) * C]), (trial, r, key)
            for key in ("cu_seqlens_padded", "cu_seqlens", "max_seqlen"):
                assert np.array_equal(got[key].reshape(-1), np.reshape(whole[key], -1)), \
                    (trial, r, key)
    assert odd >= 6


@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
def test_every_slot_a_real_sequence_needs_no_tail(make_step, cp_mode):
    """N real sequences (every slot, num_seqs = N) are valid exactly when
    their padded total is C*cp: no tail, so no dummy sequence needs a slot
    (megatron-core dev d48bd6be0a, packed_seq_params.py:446-700); the cu
    arrays are the input's N+1 entries. With a tail they are emptied
    (num_seqs_out_of_range), as is N+1."""
    C, cp, N = 24, 2, 6
    step = make_step(C, N, cp, 1, cp_mode=cp_mode)
    rng = np.random.default_rng(7 + len(cp_mode))
    for trial in range(12):
        tail = 4 * int(rng.integers(1, 3)) if trial % 3 == 2 else 0
        mb = _all_slots(rng, C, cp, N, 2 * cp, tail)
        mb["cp_rank"][0] = 1
        step(**inputs(mb, C, cp))
        got = outputs(step)
        expected = expect(mb, C, cp, N, cp_mode)
        assert compare(got, expected) == [], f"trial {trial}"
        if tail:
            assert got["status"][0] == thdc.STATUS_BITS["num_seqs_out_of_range"]
        else:
            assert got["status"][0] == 0
            assert np.array_equal(got["cu_seqlens_padded"], mb["cu_seqlens_padded"])
            assert np.array_equal(got["cu_seqlens"], mb["cu_seqlens"])
            assert got["max_seqlen"][0] == C * cp


def test_an_emptied_microbatchs_counters_depend_on_its_load_alone(cache_dir):
    """A load whose num_seqs claims more sequences than its cu arrays give is
    emptied; what it counts as dropped read the entries an earlier
    microbatch left past the given ones (0 or 48 tokens for the same load).
    Every entry after the given is -1 now: the same load, the same counts."""
    step = thdc.megatron.GraphStep(64, 9, 1, 0, device="cpu", cache_dir=cache_dir)
    rows = lambda n: dict(  # noqa: E731
        tokens=torch.zeros(1, n, dtype=torch.int64), labels=torch.zeros(1, n, dtype=torch.int64),
        loss_mask=torch.ones(1, n), position_ids=torch.zeros(1, n, dtype=torch.int64))
    claim = torch.tensor([0, 10, 20], dtype=torch.int32)
    counts = []
    for before in (torch.tensor([0, 8, 16, 24, 32, 40, 48], dtype=torch.int32),
                   torch.tensor([0, 2], dtype=torch.int32)):
        step.load_inputs(**rows(int(before[-1])), cu_seqlens=before, cu_seqlens_padded=before)
        step.run()
        assert int(step.outputs.status[0]) == 0
        step.load_inputs(**rows(20), cu_seqlens=claim, cu_seqlens_padded=claim, num_seqs=6)
        step.run()
        assert thdc.describe_status(int(step.outputs.status[0])) == "not_monotonic"
        counts.append((int(step.outputs.dropped_seqs[0]), int(step.outputs.dropped_tokens[0])))
    assert counts[0] == counts[1], counts
