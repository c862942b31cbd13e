"""S15, the chunk metadata of linear attention's varlen chunked kernels
(thdc.reference.linear_chunks): the golden vectors of docs/semantics.md,
the errors, and randomized packs against flash-linear-attention's own
definitions. Where fla is installed its functions run (on CPU tensors);
elsewhere the test recomputes them as fla 0.6.0's fla/ops/utils/index.py
writes them (prepare_chunk_indices, lines 155-164; prepare_chunk_offsets,
167-172; prepare_chunk_indices_static, 186-211). The packs include the
step's own cu_seqlens_padded (thdc.reference.graph_step) for valid and
emptied microbatches, split dummies and every cp."""
import math
import re

import numpy as np
import pytest

import thdc
from microbatches import invalidate, random_microbatch, reference

try:  # flash-linear-attention, where installed (it needs torch and triton)
    import torch
    from fla.ops.utils.index import (prepare_chunk_indices, prepare_chunk_offsets,
                                     prepare_chunk_indices_static)
    FLA = True
except Exception:  # not installed, or it fails to import here
    FLA = False


def fla_metadata(cu, BT, rows):
    """(chunk_indices [NT, 2] of the real chunks, chunk_offsets [N+1],
    fla's static indices at nt_max = ceil(rows/BT) + N - 1) as fla computes
    them: fla's functions where installed, else their code restated."""
    if FLA:
        t = torch.as_tensor(cu, dtype=torch.int32)
        static, _ = prepare_chunk_indices_static(t, BT, math.ceil(rows / BT) + len(cu) - 2)
        return (prepare_chunk_indices(t, BT).numpy(), prepare_chunk_offsets(t, BT).numpy(),
                static.numpy())
    lens = np.diff(np.asarray(cu, np.int64))
    counts = (lens + BT - 1) // BT                               # index.py:160 (ceil)
    indices = np.array([[i, t] for i, c in enumerate(counts) for t in range(c)],
                       np.int64).reshape(-1, 2)                  # index.py:161-164
    offsets = np.concatenate([[0], np.cumsum(counts)])          # index.py:171-172
    nt_max = math.ceil(rows / BT) + len(lens) - 1               # kda/chunk.py:75's bound
    static = np.full((nt_max, 2), [-1, 0], np.int64)            # index.py:203-208
    static[:len(indices)] = indices
    return indices, offsets, static


def test_golden():
    out = thdc.reference.linear_chunks(np.array([0, 5, 64, 200, 200, 200], np.int32), 64, 8)
    assert out["chunk_indices"].tolist() == [[0, 0], [1, 0], [2, 0], [2, 1], [2, 2],
                                             [4, 0], [4, 0], [4, 0]]
    assert out["chunk_offsets"].tolist() == [0, 1, 2, 5, 5, 5]
    assert out["chunk_count"] == 5
    assert thdc.reference.linear_chunk_capacity(200, 5, 64) == 9
    # No zero-length entry: the sentinel is the chunk after the last one.
    out = thdc.reference.linear_chunks(np.array([0, 3, 8], np.int32), 4, 4)
    assert out["chunk_indices"].tolist() == [[0, 0], [1, 0], [1, 1], [1, 2]]


@pytest.mark.parametrize("cu, BT, capacity, message", [
    ([0, 4], 48, 4, "BT = 48 is not a power of two"),
    ([0], 4, 4, "it needs N+1 >= 2"),
    ([0, 4, 3], 4, 4, "cu decreases"),
    ([0, 9, 9], 4, 2, "more than the 2 rows of the chunk capacity"),
])
def test_errors_name_the_value(cu, BT, capacity, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        thdc.reference.linear_chunks(np.array(cu, np.int32), BT, capacity)


def check_against_fla(cu, BT, rows):
    N = len(cu) - 1
    capacity = thdc.reference.linear_chunk_capacity(rows, N, BT)
    assert capacity == math.ceil(rows / BT) + N
    out = thdc.reference.linear_chunks(np.asarray(cu, np.int32), BT, capacity)
    indices, offsets, static = fla_metadata(cu, BT, rows)
    count = out["chunk_count"]
    assert count == len(indices) < capacity
    assert out["chunk_offsets"].tolist() == offsets.tolist()
    assert out["chunk_indices"][:count].tolist() == indices.tolist()
    # fla's static form: the same real rows, its sentinel (-1, 0) after them.
    assert static[:count].tolist() == indices.tolist() and len(static) == capacity - 1
    # Ours: the last sequence's chunk past its end, a chunk of no rows.
    last = len(cu) - 2
    past = math.ceil((cu[-1] - cu[-2]) / BT)
    assert (out["chunk_indices"][count:] == [last, past]).all()
    assert past * BT >= cu[-1] - cu[-2]


def test_random_packs_equal_flas_metadata():
    rng = np.random.default_rng(15)
    for _ in range(300):
        BT = 2 ** int(rng.integers(0, 8))
        rows = int(rng.integers(0, 700))
        N = int(rng.integers(1, 14))
        cuts = np.sort(rng.integers(0, rows + 1, size=N))
        check_against_fla([0] + cuts.tolist(), BT, rows)


@pytest.mark.parametrize("cp", [1, 2, 4, 8])
def test_the_steps_offsets(cp):
    """The step's cu_seqlens_padded (C*cp rows, N+1 entries, the dummy over
    the tail): valid, emptied (invalid) microbatches and split dummies."""
    rng = np.random.default_rng(cp)
    C, N = 64, 9
    for trial in range(60):
        mb = random_microbatch(rng, C, cp, N)
        if trial % 4 == 3:
            mb = invalidate(rng, mb, N)
        dummy = 2 * cp * int(rng.integers(1, 4)) if trial % 5 == 4 else None
        out = reference(mb, C, cp, N, dummy_length=dummy)
        cup = out["cu_seqlens_padded"].tolist()
        assert cup[-1] == C * cp
        for BT in (16, 64):
            check_against_fla(cup, BT, C * cp)
        if out["status"]:
            # Emptied: every chunk is over the dummies' rows, which train
            # nothing; none over a row the caller gave.
            assert out["loss_mask"].sum() == 0
