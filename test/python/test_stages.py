"""The pipelines behind thdc.megatron.GraphStep (thdc.stages), through the
CPU path on NumPy arrays: every pipeline-parallel stage against the
reference, the global seq_idx, the RoPE rows (against the S8 rule restated
in NumPy), the dropped-work counts of emptied microbatches, and the CP order
index: every rank's rows, gathered and put back with it, equal the cp = 1
step over all C*cp rows, in zigzag and contiguous CP. Also the package's
shipped pipeline against the generator, and the generator's errors."""
import os
import subprocess
import sys

import numpy as np
import pytest

import thdc
import thdc.stages as stages
from microbatches import (dropped, invalidate, random_microbatch, reference, rope_rows,
                          stage_mismatches)

DATA = ("tokens", "labels", "position_ids", "loss_mask")


@pytest.fixture(scope="module")
def compile_stage(cache_dir):
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")

    def compile_(C, cp, N, stage="first_last", R=None, **options):
        params = {"C": C, "cp": cp, "N": N, **({"R": R} if R is not None else {})}
        text = stages.pipeline(stage, rope=R is not None, **options)
        return thdc.compile(text, params, backend="host", cache_dir=cache_dir)

    return compile_


def run(kernel, mb, cp_order_index=False):
    """The kernel on a microbatch, by input name (the stage's own inputs)."""
    names = [a.name for a in thdc.signature(kernel) if a.direction == "input"]
    values = dict(mb)
    values.setdefault("num_rows", np.array([len(mb["tokens"])], np.int32))  # every row given
    if cp_order_index:
        values["rows"] = np.arange(len(mb["tokens"]), dtype=np.int32)
    return kernel(**{n: values[n] for n in names})._asdict()


@pytest.mark.parametrize("stage", list(stages.STAGES))
@pytest.mark.parametrize("C,cp,N", [(64, 1, 9), (96, 2, 17), (128, 4, 9)])
def test_stage_against_reference(compile_stage, stage, C, cp, N):
    kernel = compile_stage(C, cp, N, stage)
    assert [a.name for a in thdc.signature(kernel) if a.direction == "output"] == \
        stages.outputs(stage)
    keys = stages.data_keys(stage)
    rng = np.random.default_rng(sum(map(ord, stage)) * 1000 + C + cp)
    statuses, short = set(), 0
    for trial in range(40):
        mb = random_microbatch(rng, C, cp, N)
        if trial % 3 == 2:
            mb = invalidate(rng, mb, N)
        rows = None
        if keys:  # the rows given: all, or (one trial in four) fewer, maybe too few
            rows = C * cp if trial % 4 else int(rng.integers(0, C * cp + 1))
            mb["num_rows"] = np.array([rows], np.int32)
        got = run(kernel, mb)
        expected = reference(mb, C, cp, N, rows_given=rows)
        short += bool(expected["status"] & thdc_status("rows_not_given"))
        statuses.add(expected["status"] != 0)
        bad = stage_mismatches(got, expected)
        assert bad == [], f"trial {trial}: {bad}"
        assert set(keys) <= set(got) and not (set(DATA) - set(keys)) & set(got)
        assert np.array_equal(got["seq_idx"],
                              thdc.reference.seq_idx(expected["cu_seqlens_padded"], C * cp))
        assert (int(got["dropped_seqs"][0]), int(got["dropped_tokens"][0])) == \
            dropped(mb, expected["status"]), f"trial {trial}"
    assert statuses == {False, True}
    assert (short > 0) == bool(keys)


def thdc_status(name):
    """The status bit thdc.describe_status calls `name`."""
    bits = [1 << b for b in range(31) if thdc.describe_status(1 << b) == name]
    assert len(bits) == 1, name
    return bits[0]


@pytest.mark.parametrize("C,cp,N,R", [(64, 1, 9, 32), (64, 1, 9, 200), (96, 2, 17, 192),
                                      (96, 2, 17, 1000), (64, 4, 9, 300)])
def test_rope_rows(compile_stage, C, cp, N, R):
    kernel = compile_stage(C, cp, N, R=R)
    rng = np.random.default_rng(C + cp + R)
    for _ in range(30):
        mb = random_microbatch(rng, C, cp, N)
        got = run(kernel, mb)
        rank = int(mb["cp_rank"][0])
        expected = rope_rows(got["cu_seqlens_padded"], int(got["max_seqlen"][0]), cp, rank, C, R)
        assert np.array_equal(got["rope_rows"], expected)


@pytest.mark.parametrize("cp_mode", stages.CP_MODES)
@pytest.mark.parametrize("C,cp,N", [(48, 2, 9), (64, 4, 9), (96, 3, 17), (32, 1, 5)])
def test_cp_order_index_restores_sequence_order(compile_stage, cp_mode, C, cp, N):
    """Each rank's outputs, concatenated rank by rank and indexed with the CP
    order index, are the cp = 1 step's over C*cp rows; the index is the same
    on every rank and a permutation, also for emptied microbatches."""
    ranks = compile_stage(C, cp, N, cp_mode=cp_mode, cp_order_index=True)
    whole = compile_stage(C * cp, 1, N)
    rng = np.random.default_rng(C * cp + len(cp_mode))
    compared = 0
    for trial in range(30):
        mb = random_microbatch(rng, C, cp, N)
        if trial % 5 == 4:
            mb = invalidate(rng, mb, N)
        outs = []
        for r in range(cp):
            mb["cp_rank"][0] = r
            outs.append(run(ranks, mb, cp_order_index=True))
        index = outs[0]["cp_order_index"]
        assert np.array_equal(np.sort(index), np.arange(C * cp))
        for o in outs[1:]:
            assert np.array_equal(o["cp_order_index"], index)
        mb["cp_rank"][0] = 0
        full = run(whole, mb)
        if outs[0]["status"][0] or full["status"][0]:
            continue
        compared += 1
        for key in DATA + ("padding_mask",):
            restored = np.concatenate([o[key] for o in outs])[index]
            assert np.array_equal(restored, full[key]), f"{key}, trial {trial}"
        for key in ("cu_seqlens_padded", "cu_seqlens", "max_seqlen", "seq_idx"):
            assert np.array_equal(outs[0][key], full[key]), key
    assert compared >= 15


@pytest.mark.parametrize("cp_mode", stages.CP_MODES)
@pytest.mark.parametrize("C,cp,N,BT,dummy", [(64, 1, 9, 16, None), (96, 2, 17, 64, None),
                                             (64, 4, 9, 32, None), (32, 8, 9, 64, None),
                                             (64, 2, 9, 16, 8), (64, 4, 17, 4, 16)])
def test_linear_chunks_of_the_step(compile_stage, cp_mode, C, cp, N, BT, dummy):
    """With linear_chunk=BT the pipeline adds S15's chunk metadata over its
    own padded offsets: equal to the reference's on every rank, for valid
    and emptied microbatches and split dummies; the other outputs are the
    pipeline's without it; chunks cover every row, and an emptied
    microbatch's chunks are the dummies' over rows nobody gave."""
    if dummy is not None and cp_mode == "zigzag" and dummy % (2 * cp):
        pytest.skip("zigzag dummies are multiples of 2*cp")
    options = dict(cp_mode=cp_mode, dummy_length=dummy)
    with_chunks = compile_stage(C, cp, N, linear_chunk=BT, **options)
    without = compile_stage(C, cp, N, **options)
    names = [a.name for a in thdc.signature(with_chunks) if a.direction == "output"]
    assert names == stages.outputs("first_last", linear_chunk=BT)
    NT = stages.linear_chunk_capacity(C, cp, N, BT)
    assert NT == thdc.reference.linear_chunk_capacity(C * cp, N, BT)
    rng = np.random.default_rng(C * cp * BT + len(cp_mode))
    emptied = 0
    for trial in range(30):
        mb = random_microbatch(rng, C, cp, N)
        if trial % 3 == 2:
            mb = invalidate(rng, mb, N)
        mb["cp_rank"][0] = int(rng.integers(0, cp))
        got, plain = run(with_chunks, mb), run(without, mb)
        for key, value in plain.items():
            assert np.array_equal(got[key], value), f"{key}, trial {trial}"
        cup = got["cu_seqlens_padded"]
        expected = thdc.reference.linear_chunks(cup, BT, NT)
        indices, offsets, count = (expected[k] for k in ("chunk_indices", "chunk_offsets",
                                                         "chunk_count"))
        assert got["linear_chunk_indices"].shape == (2 * NT,)
        assert np.array_equal(got["linear_chunk_indices"].reshape(NT, 2), indices), trial
        assert np.array_equal(got["linear_chunk_offsets"], offsets), trial
        assert int(got["linear_chunk_count"][0]) == count
        starts = cup[indices[:count, 0]] + indices[:count, 1] * BT
        covered = np.zeros(C * cp, bool)
        for start, seq in zip(starts, indices[:count, 0]):
            covered[start:min(start + BT, cup[seq + 1])] = True
        assert covered.all(), f"trial {trial}: rows no chunk covers"
        if got["status"][0]:
            # emptied: the chunks of a microbatch of no sequences, the
            # dummies' alone, none over a sequence the caller gave
            emptied += 1
            empty = dict(mb, num_seqs=np.array([0], np.int32))
            nothing = run(with_chunks, empty)
            assert nothing["status"][0] == 0
            for key in ("cu_seqlens_padded",) + stages.LINEAR_CHUNK_OUTPUTS:
                assert np.array_equal(got[key], nothing[key]), f"{key}, trial {trial}"
    assert emptied > 0


def test_shipped_pipeline_is_the_generators():
    with open(thdc.pipeline_path("megatron_step"), encoding="utf-8") as f:
        assert f.read() == stages.pipeline(), \
            "python/thdc/pipelines/megatron_step.mlir differs from thdc.stages.pipeline(): " \
            "regenerate it with `python3 python/thdc/stages.py > ...`"


def test_variant_names_are_distinct():
    names = set()
    for stage in stages.STAGES:
        for cp_mode in stages.CP_MODES:
            for seq_idx in (False, True):
                for rope in ((False, True) if cp_mode == "zigzag" else (False,)):
                    for order in (False, True):
                        names.add(stages.variant(stage, cp_mode=cp_mode, seq_idx=seq_idx,
                                                 rope=rope, cp_order_index=order))
    assert len(names) == 4 * (2 * 2 * 2 + 2 * 2)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="stage must be one of"):
        stages.pipeline("second")
    with pytest.raises(ValueError, match="cp_mode must be one of"):
        stages.pipeline(cp_mode="ring")
    with pytest.raises(ValueError, match="zigzag"):
        stages.pipeline(cp_mode="contiguous", rope=True)
    for bad in (0, 48, -64, 64.0, True, "64", 2**31, 2**40):
        with pytest.raises(ValueError, match=f"linear_chunk must be a power of two.*{bad!r}"):
            stages.pipeline(linear_chunk=bad)
    # A NumPy integer is an integer (it was refused as "not a power of two").
    assert stages.pipeline(linear_chunk=np.int64(64)) == stages.pipeline(linear_chunk=64)
    assert stages.check_linear_chunk(np.int32(2**30)) == 2**30
    with pytest.raises(ValueError, match=r"2\*NT \(linear_chunk_indices\) = .* does not fit"):
        stages.check_params(2**30, 1, 2**30, linear_chunk=1)


def test_command_line_writes_the_same_text():
    script = stages.__file__
    text = subprocess.run([sys.executable, script, "--stage", "last", "--rope"],
                          capture_output=True, text=True, check=True).stdout
    assert text == stages.pipeline("last", rope=True)
    variant = subprocess.run([sys.executable, script, "--stage", "last", "--rope", "--variant"],
                             capture_output=True, text=True, check=True).stdout
    assert variant.strip() == "last_rope"
    text = subprocess.run([sys.executable, script, "--linear-chunk", "64"],
                          capture_output=True, text=True, check=True).stdout
    assert text == stages.pipeline(linear_chunk=64)
    assert stages.variant(linear_chunk=64) == "linear64"
    assert os.path.basename(script) == "stages.py"


@pytest.mark.parametrize("bad", [["--linear-chunk", "0"], ["--linear-chunk", "3"],
                                 ["--linear-chunk", "-64"], ["--linear-chunk", str(2**31)],
                                 ["--dummy-length", "0"], ["--dummy-length", "-2"]])
def test_command_line_refuses_bad_options_without_a_traceback(bad):
    done = subprocess.run([sys.executable, stages.__file__, *bad], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert f"error: {bad[0]} must be" in done.stderr
