"""thdc.megatron on a GPU, for every rank, stage and microbatch in flight:
the per-stage forms against the reference, a ring of K >= 4 buffer sets
replayed from captured graphs with K microbatches alive at once, the global
seq_idx (against megatron-core's own computation where it is installed), the
RoPE rows, the index that undoes the CP partition (every rank's rows put back
in sequence order equal the cp = 1 step), the dropped-work counters, the
sequence-parallel shard, two TP ranks under torchrun, PackedSeqParams for the
installed megatron-core release or the fallback class, and no host
synchronisation in the per-microbatch path. Skipped without PyTorch or a GPU.

Kernels come from bundles (THDC_BUNDLES, written by
scripts/make-gpu-bundles.sh) or, where thdc has a JIT, are compiled here."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
import thdc.stages  # noqa: E402
from conftest import SOURCE_DIR  # noqa: E402
from microbatches import (LocalGroup, check_packed_seq_params, given_rows,  # noqa: E402
                          random_microbatch, reference, rope_rows, step_inputs,
                          step_mismatches, with_step_counts)

BUNDLES = os.environ.get("THDC_BUNDLES", os.path.join(SOURCE_DIR, "build-gpu-bundles"))


def make_step(C, N, cp=1, rank=0, *, stage="first_last", R=None, cp_mode="zigzag",
              seq_idx=True, cp_order_index=False, **kwargs):
    """A GraphStep from its bundle, or through the JIT where there is one."""
    options = dict(cp_mode=cp_mode, seq_idx=seq_idx, cp_order_index=cp_order_index)
    path = os.path.join(BUNDLES, "python", thdc.stages.bundle_name(C, cp, N, stage, R=R,
                                                                    **options))
    if not os.path.isdir(path):
        if not thdc.has_jit:
            pytest.skip(f"no bundle {path} and no JIT")
        path = None
    return thdc.megatron.GraphStep(C, N, cp, rank, stage=stage, rope_table_rows=R,
                                   bundle=path, **options, **kwargs)


def host(outputs):
    return {k: v.cpu().numpy() for k, v in outputs._asdict().items()}


def expect(mb, C, cp, N, stage="first_last"):
    """The reference's outputs, seq_idx over every rank's rows, dropped counts,
    for the microbatch as step_inputs() gives it: a stage that reads data
    checks the rows given."""
    rows = given_rows(mb, C, cp) if thdc.stages.data_keys(stage) else None
    expected = reference(mb, C, cp, N, rows_given=rows)
    return with_step_counts(expected, mb, C, cp)


def compare(got, expected):
    """Names of a stage's outputs that differ from the reference."""
    return step_mismatches(got, expected)


@pytest.mark.parametrize("stage", list(thdc.stages.STAGES))
def test_each_stage_computes_its_keys_and_the_shared_metadata(stage):
    C, cp, N = 1024, 2, 33
    step = make_step(C, N, cp, 1, stage=stage)
    keys = thdc.stages.data_keys(stage)
    assert set(step.batch) == set(keys) | {"padding_mask"}
    assert list(step.outputs._fields) == thdc.stages.outputs(stage)
    rng = np.random.default_rng(31)
    for trial in range(60):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        if trial % 5 == 4:  # invalid: more sequences than the capacity holds
            mb["num_seqs"][0] = N
        step(**step_inputs(mb, C, cp))  # every key given: the stage reads its own
        got = host(step.outputs)
        bad = compare(got, expect(mb, C, cp, N, stage))
        assert bad == [], f"stage {stage}, trial {trial}: {bad}"
    with pytest.raises(TypeError, match="reads cu_seqlens"):
        step.load_inputs(cu_seqlens_padded=torch.zeros(1, dtype=torch.int32, device="cuda"))
    if keys:
        mb = step_inputs(random_microbatch(rng, C, cp, N, rank=1), C, cp)
        del mb[keys[0]]
        with pytest.raises(TypeError, match=f"reads {keys[0]}"):
            step.load_inputs(**mb)


def test_a_kernel_for_other_options_is_refused():
    C, cp, N = 1024, 2, 33
    first = os.path.join(BUNDLES, "python", thdc.stages.bundle_name(C, cp, N, "first"))
    if not os.path.isdir(first):
        pytest.skip(f"no bundle {first}")
    with pytest.raises(ValueError, match="not the step for stage='last'"):
        thdc.megatron.GraphStep(C, N, cp, 0, stage="last", bundle=first)


def test_ring_of_slots_keeps_k_microbatches_alive_in_captured_graphs():
    """K from the planner's bound (>= 4); one graph captured per slot;
    microbatch i goes to slot i mod K; after K microbatches are loaded and
    replayed, every one of them is still intact and equal to the reference.
    The loop runs under set_sync_debug_mode("error")."""
    C, cp, N = 1024, 2, 33
    K = thdc.megatron.slot_count(global_batch_size=6, max_seqlen=C * cp, C=C, cp=cp, N=N)
    assert K >= 4
    step = make_step(C, N, cp, 0, slots=K)
    assert len(step.slots) == K and step.slot(K) is step.slot(0) is step.slots[0]
    graphs = []
    for k in range(K):
        graphs.append(torch.cuda.CUDAGraph())
        with torch.cuda.graph(graphs[-1]):
            step.slot(k).run()
    rng = np.random.default_rng(32)
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    counts = torch.zeros(2, dtype=torch.int64, device="cuda")
    total_dropped = np.zeros(2, np.int64)
    checked = 0
    for round_ in range(4):
        batches = [random_microbatch(rng, C, cp, N, rank=0) for _ in range(K)]
        if round_ == 2:
            batches[1]["num_seqs"][0] = N  # more sequences than the step holds
        staged = [step_inputs(mb, C, cp) for mb in batches]
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for i, inputs in enumerate(staged):
                microbatch = round_ * K + i
                slot = step.slot(microbatch)
                slot.load_inputs(**inputs)
                graphs[microbatch % K].replay()
                slot.accumulate_status(flag)
                slot.accumulate_dropped(counts)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        for i, mb in enumerate(batches):  # all K alive: none overwritten
            expected = expect(mb, C, cp, N)
            bad = compare(host(step.slot(i).outputs), expected)
            assert bad == [], f"round {round_}, slot {i}: {bad}"
            total_dropped += expected["dropped"]
            checked += 1
    assert checked == 4 * K
    assert int(flag.item()) != 0 and total_dropped[0] > 0
    assert counts.cpu().tolist() == total_dropped.tolist()


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_global_seq_idx(cp):
    """seq_idx holds every rank's C*cp rows, the same on every rank, and
    equals the reference's (and megatron-core's own computation, from the
    same padded offsets with total_tokens = C*cp, where it is installed)."""
    C, N = 1024, 33
    ranks = [make_step(C, N, cp, r) for r in range(cp)]
    theirs_cls = None
    if thdc.megatron.USING_MEGATRON_CORE and "total_tokens" in \
            thdc.megatron.packed_seq_params_fields():
        theirs_cls = thdc.megatron.PackedSeqParams
    rng = np.random.default_rng(33 + cp)
    for _ in range(40):
        mb = random_microbatch(rng, C, cp, N)
        seq_idx = []
        for r, step in enumerate(ranks):
            _, params = step(**step_inputs(mb, C, cp))
            assert step.seq_idx.shape == (1, C * cp)
            if "seq_idx" in thdc.megatron.packed_seq_params_fields():
                assert params.seq_idx is step.seq_idx
            seq_idx.append(step.seq_idx.clone())
        expected = thdc.reference.seq_idx(reference(mb, C, cp, N)["cu_seqlens_padded"], C * cp)
        for s in seq_idx:
            assert np.array_equal(s.cpu().numpy()[0], expected)
        if theirs_cls is not None:
            theirs = theirs_cls(qkv_format="thd",
                                cu_seqlens_q_padded=ranks[0].outputs.cu_seqlens_padded.clone(),
                                total_tokens=C * cp)
            assert torch.equal(seq_idx[0], theirs.seq_idx)


@pytest.mark.parametrize("cp,R", [(1, 512), (2, 1024), (2, 4096), (4, 4096)])
def test_rope_rows(cp, R):
    """Each local row's RoPE table row, against the S8 rule restated in
    NumPy: a table no longer than max_seqlen (C*cp) is indexed by the
    position in the sequence, a longer one is shifted by the sequence's
    start; always clamped into the table."""
    C, N = 512, 17
    rng = np.random.default_rng(40 + cp + R)
    for rank in range(cp):
        step = make_step(C, N, cp, rank, R=R, cp_order_index=True)
        for _ in range(20):
            mb = random_microbatch(rng, C, cp, N, rank=rank)
            step(**step_inputs(mb, C, cp))
            got = host(step.outputs)
            expected = rope_rows(got["cu_seqlens_padded"], C * cp, cp, rank, C, R)
            assert np.array_equal(got["rope_rows"], expected)
            assert step.rope_rows is step.outputs.rope_rows


@pytest.mark.parametrize("cp_mode,cp,C,N,R", [("zigzag", 2, 512, 17, 4096),
                                              ("zigzag", 4, 512, 17, 4096),
                                              ("contiguous", 2, 1024, 33, None)])
def test_restore_cp_order_undoes_the_partition(cp_mode, cp, C, N, R):
    """Every rank's outputs gathered rank-major ([cp*C]) and put back with
    restore_cp_order equal the cp = 1 step over all C*cp rows: the same
    sanitised data, mask and seq_idx in sequence order."""
    ranks = [make_step(C, N, cp, r, R=R, cp_mode=cp_mode, cp_order_index=True)
             for r in range(cp)]
    whole = make_step(C * cp, N, 1, 0)
    rng = np.random.default_rng(50 + cp)
    valid = 0
    for _ in range(30):
        mb = random_microbatch(rng, C, cp, N)
        for step in ranks:
            step(**step_inputs(mb, C, cp))
        whole(**step_inputs(mb, C * cp, 1))
        if int(whole.outputs.status[0].item()) or int(ranks[0].outputs.status[0].item()):
            continue
        valid += 1
        index = ranks[0].cp_order_index
        for step in ranks[1:]:
            assert torch.equal(step.cp_order_index, index)
        for key in ("tokens", "labels", "position_ids", "loss_mask", "padding_mask"):
            gathered = torch.cat([getattr(s.outputs, key) for s in ranks])
            restored = ranks[0].restore_cp_order(gathered)
            assert torch.equal(restored, getattr(whole.outputs, key)), key
        # Rows of any shape and type: [cp*C, 3] bfloat16 hidden states.
        hidden = torch.randn(cp * C, 3, device="cuda").to(torch.bfloat16)
        back = ranks[0].restore_cp_order(hidden)
        assert torch.equal(back, hidden[index.long()])
        assert torch.equal(torch.sort(index.long()).values,
                           torch.arange(cp * C, device="cuda"))
    assert valid >= 20


def test_restore_cp_order_does_not_synchronise():
    C, cp, N, R = 512, 2, 17, 4096
    step = make_step(C, N, cp, 1, R=R, cp_order_index=True)
    inputs = step_inputs(random_microbatch(np.random.default_rng(55), C, cp, N, rank=1), C, cp)
    gathered = torch.randn(cp * C, 8, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            step(**inputs)
            restored = step.restore_cp_order(gathered)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(restored, gathered[step.cp_order_index.long()])


def test_sequence_parallel_shard_of_the_padding_mask():
    C, cp, N, tp = 1024, 2, 33, 4
    full = make_step(C, N, cp, 0)
    mb = random_microbatch(np.random.default_rng(60), C, cp, N, rank=0)
    full(**step_inputs(mb, C, cp))
    for tp_rank in range(tp):
        step = make_step(C, N, cp, 0, tp=tp, tp_rank=tp_rank, sequence_parallel=True)
        batch, _ = step(**step_inputs(mb, C, cp))
        shard = C // tp
        # The model takes the whole mask, the tokens' shape (megatron-core's
        # GPTModel asserts it and scatters the mask itself); the shard is
        # padding_mask_shard.
        assert batch["padding_mask"].shape == batch["tokens"].shape == (1, C)
        assert torch.equal(batch["padding_mask"], full.batch["padding_mask"])
        assert step.padding_mask_shard.shape == (1, shard)
        assert torch.equal(step.padding_mask_shard,
                           full.batch["padding_mask"][:, tp_rank * shard:(tp_rank + 1) * shard])
        assert full.padding_mask_shard is None
    with pytest.raises(ValueError, match="multiple of tp"):
        thdc.megatron.GraphStep(C, N, cp, 0, tp=3, sequence_parallel=True, bundle="/unused")


def test_two_tp_ranks_under_torchrun():
    """Two TP ranks (gloo) sharing this GPU: both recipes, outputs equal on
    both ranks and to the reference (test/python/torchrun_tp.py)."""
    C, cp, N = 1024, 2, 33
    path = os.path.join(BUNDLES, "python", thdc.stages.bundle_name(C, cp, N))
    args = ["--bundle", path] if os.path.isdir(path) else []
    if not args and not thdc.has_jit:
        pytest.skip(f"no bundle {path} and no JIT")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run(
        # torchrun of this interpreter's torch (a torchrun on PATH may be
        # another Python's).
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         os.path.join(os.path.dirname(__file__), "torchrun_tp.py"), *args],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "tp ranks agree" in result.stdout


def test_get_batch_as_megatron_calls_it_tp2_cp2():
    """get_batch_on_this_rank_for_sequence_packing under torchrun, TP = 2 x
    CP = 2 ranks sharing this GPU over gloo (torchrun_megatron.py): every
    rank's 7-tuple equal to the reference, TP ranks equal, every stage form."""
    if not thdc.has_jit:
        pytest.skip("the function compiles each stage's step through the JIT")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
         os.path.join(os.path.dirname(__file__), "torchrun_megatron.py"), "--C", "1024",
         "--N", "33", "--microbatches", "40"],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "megatron ranks agree: tp 2 x cp 2, 200 calls" in result.stdout


def test_get_batch_never_synchronises():
    """get_batch_on_this_rank_for_sequence_packing in one process (tp = 1,
    cp = 2, groups that need no collective) over 40 random microbatches of
    the reference framework's batch dicts, under set_sync_debug_mode("error"),
    every output equal to the reference afterwards."""
    from types import SimpleNamespace

    if not thdc.has_jit:
        pytest.skip("the function compiles its step through the JIT")
    C, cp, N = 1024, 2, 33
    config = SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                             pad_packed_seq_alignment="max", cuda_graph_impl="local")
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(1, cp), pp=LocalGroup(0, 1))
    batches = thdc.megatron.SequencePackingBatches(slots=40)
    rng = np.random.default_rng(120)
    mbs = [random_microbatch(rng, C, cp, N, rank=1) for _ in range(40)]
    items = []
    for mb in mbs:
        item = step_inputs(mb, C, cp)
        item["max_seqlen"] = torch.tensor(C, dtype=torch.int32, device="cuda")
        items.append(item)
    batches(iter(items[:1]), pg_collection=pg, config=config)  # compiles, first use
    torch.cuda.synchronize()
    iterator, results = iter(items), []
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in items:
            results.append(batches(iterator, pg_collection=pg, config=config))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    for mb, result in zip(mbs, results):
        expected = reference(mb, C, cp, N, rows_given=given_rows(mb, C, cp))
        tokens, _, loss_mask, _, _, params, padding_mask = result
        assert np.array_equal(tokens.cpu().numpy().reshape(-1), expected["tokens"])
        assert np.array_equal(loss_mask.cpu().numpy().reshape(-1), expected["loss_mask"])
        assert np.array_equal(padding_mask.cpu().numpy().reshape(-1).astype(np.int64),
                              expected["padding_mask"])
        assert np.array_equal(params.cu_seqlens_q_padded.cpu().numpy(),
                              expected["cu_seqlens_padded"])


def test_dropped_counts_and_no_synchronisation():
    C, cp, N = 1024, 2, 33
    step = make_step(C, N, cp, 1)
    rng = np.random.default_rng(70)
    batches = []
    for trial in range(40):
        mb = random_microbatch(rng, C, cp, N, rank=1)
        if trial % 3 == 0:
            mb["cu_seqlens"][1] = mb["cu_seqlens_padded"][1] + 2  # valid above padded
        if trial % 7 == 0:
            mb["num_seqs"][0] = N + 5
        batches.append(mb)
    expected = np.zeros(2, np.int64)
    for mb in batches:
        expected += expect(mb, C, cp, N)["dropped"]
    staged = [step_inputs(mb, C, cp) for mb in batches]
    counts = torch.zeros(2, dtype=torch.int64, device="cuda")
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for inputs in staged:
            step(**inputs)
            step.accumulate_status(flag)
            step.accumulate_dropped(counts)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert expected[0] > 0 and counts.cpu().tolist() == expected.tolist()
    assert int(flag.item()) != 0
    with pytest.raises(ValueError, match="int64"):
        step.accumulate_dropped(torch.zeros(2, dtype=torch.int32, device="cuda"))


def test_packed_seq_params_uses_the_fields_of_the_installed_class():
    """Whatever megatron-core is installed (or none): the params carry the
    fields the class declares, and the 'compact' convention is refused by a
    class that cannot say pad_between_seqs."""
    if os.environ.get("THDC_EXPECT_MEGATRON_CORE"):
        assert thdc.megatron.USING_MEGATRON_CORE, thdc.megatron.MEGATRON_CORE_IMPORT_ERROR
    C, cp, N = 1024, 2, 33
    step = make_step(C, N, cp, 0)
    _, fields = check_packed_seq_params(step, make_step, C, N, cp, 0)
    print("megatron-core" if thdc.megatron.USING_MEGATRON_CORE else "fallback", fields)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="stage must be one of"):
        thdc.megatron.GraphStep(8, 6, stage="second", bundle="/unused")
    with pytest.raises(ValueError, match="zigzag"):
        thdc.megatron.GraphStep(8, 6, 2, cp_mode="contiguous", rope_table_rows=16,
                                bundle="/unused")
    with pytest.raises(ValueError, match="slots"):
        thdc.megatron.GraphStep(8, 6, slots=0, bundle="/unused")
    with pytest.raises(ValueError, match="tp_rank"):
        thdc.megatron.GraphStep(8, 6, tp=2, tp_rank=2, bundle="/unused")
    with pytest.raises(TypeError, match="seq_idx"):
        thdc.megatron.GraphStep(8, 6, seq_idx=1, bundle="/unused")
    step = make_step(1024, 33, 2, 0)
    with pytest.raises(ValueError, match="cp_order_index=True"):
        step.restore_cp_order(torch.zeros(2048, device="cuda"))
    with pytest.raises(ValueError, match="microbatch"):
        step.slot(-1)
