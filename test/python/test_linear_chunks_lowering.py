"""thd.linear_chunks on its own, compiled for the host CPU (the JIT): on
offsets that the reference accepts, entries up to int32 max included, its
outputs are S15's (thdc.reference.linear_chunks); on offsets that
thd.validate refuses, which the reference refuses too, they are what the
op documents (dialect/THDAttentionOps.td): a decreasing entry gives its sequence no
chunk, only the first NT chunks are listed, chunk_offsets and chunk_count
count the listed chunks (the running sums capped at NT), and every entry
stays in bounds (entry 0 is read as 0, as in every cumulative-offset
array of the lowering). The lowering used to take lengths and sums in i32, which
wrapped there: negative offsets and counts, chunk indices before their
sequence's start."""
import numpy as np
import pytest

import thdc

INT32_MAX = 2**31 - 1
INT32_MIN = -2**31

PIPELINE = """
module attributes {thd.params = {N = 5 : i64, R = 16 : i64, BT = 1 : i64}} {
  func.func @chunks(%cup: tensor<?xi32> {thd.name = "cu_seqlens_padded",
                                         thd.capacity = #thd.expr<"N+1">})
      -> (tensor<?xi32> {thd.name = "chunk_indices"}, tensor<?xi32> {thd.name = "chunk_offsets"},
          tensor<1xi32> {thd.name = "chunk_count"}) {
    %i, %o, %c = thd.linear_chunks %cup chunk_size "BT" rows "R"
        : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
    return %i, %o, %c : tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  }
}
"""


@pytest.fixture(scope="module")
def chunks(cache_dir):
    """Runs the op on `cu` (N+1 entries) at chunk size BT and `rows`:
    (indices [NT, 2], offsets, count, NT)."""
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")

    def run(cu, BT, rows):
        N = len(cu) - 1
        kernel = thdc.compile(PIPELINE, {"N": N, "R": rows, "BT": BT}, backend="host",
                              cache_dir=cache_dir)
        out = kernel(cu_seqlens_padded=np.asarray(cu, np.int32))
        NT = thdc.reference.linear_chunk_capacity(rows, N, BT)
        return (out.chunk_indices.reshape(-1, 2), out.chunk_offsets, int(out.chunk_count[0]),
                NT)

    return run


def read(cu):
    """The offsets as the op reads them: entry 0 is 0, exact integers."""
    return [0] + [int(v) for v in cu[1:]]


def documented(cu, BT, NT):
    """The op's outputs as its description states them, in exact integers:
    S15 where the reference accepts the offsets."""
    N = len(cu) - 1
    cu = read(cu)
    counts = [-(-max(cu[i + 1] - cu[i], 0) // BT) for i in range(N)]
    sums = np.concatenate([[0], np.cumsum(counts, dtype=object)])
    offsets = [min(int(s), NT) for s in sums]
    count = offsets[N]
    indices = []
    for r in range(NT):
        pos = min(r, count)
        i = max([k for k in range(N) if offsets[k] <= pos])  # the last sequence at pos
        indices.append((i, pos - offsets[i]))
    return np.array(indices, np.int64), np.array(offsets, np.int64), count


def check(got, cu, BT):
    indices, offsets, count, NT = got
    want_indices, want_offsets, want_count = documented(cu, BT, NT)
    assert offsets.tolist() == want_offsets.tolist(), cu
    assert count == want_count, cu
    assert indices.tolist() == want_indices.tolist(), cu
    # In bounds: offsets and count in [0, NT], every row a chunk of its
    # sequence or the sentinel, the chunk after the last sequence's last.
    N, cu = len(cu) - 1, read(cu)
    assert 0 <= offsets.min() and offsets.max() <= NT and count <= NT
    assert (np.diff(offsets) >= 0).all()
    for r, (i, t) in enumerate(indices.tolist()):
        length = max(cu[i + 1] - cu[i], 0)
        assert 0 <= i < N and t >= 0
        if r < count:
            assert t * BT < length, (cu, r, i, t)
        else:
            assert (i, t) == (N - 1, count - offsets[N - 1])


@pytest.mark.parametrize("BT", [1, 4, 64, 2**24])
def test_accepted_offsets_give_the_reference_chunks(chunks, BT):
    """Random offsets from 0, not decreasing, within the capacity: entries
    up to int32 max where the chunks are long enough to hold them."""
    rng = np.random.default_rng(BT)
    for trial in range(20):
        N = int(rng.integers(1, 8))
        rows = INT32_MAX if BT == 2**24 else int(rng.integers(0, 200))
        cuts = np.sort(rng.integers(0, rows, size=N, endpoint=True))
        cu = [0] + cuts.tolist()
        if trial == 0:
            cu[-1] = rows  # the last entry at the row count (int32 max for 2^24)
        indices, offsets, count, NT = got = chunks(cu, BT, rows)
        want = thdc.reference.linear_chunks(np.asarray(cu, np.int32), BT, NT)
        assert indices.tolist() == want["chunk_indices"].tolist(), cu
        assert offsets.tolist() == want["chunk_offsets"].tolist(), cu
        assert count == want["chunk_count"], cu
        check(got, cu, BT)  # the documented outputs are the reference's here


@pytest.mark.parametrize("cu", [
    [0, INT32_MAX, 0, INT32_MAX, 0, INT32_MAX],        # 3 * (2^31 - 1) chunks
    [0, INT32_MAX, INT32_MIN, INT32_MAX, 0, 5],        # a length of 2^32 - 1
    [0, INT32_MIN, INT32_MAX, 0, 5, 5],
    [INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX],
    [0, 8, 4, 12, 12, 16],                             # decreasing, fewer than NT
], ids=["sum-past-int32", "length-past-int32", "negative-entry", "extremes", "decreasing"])
@pytest.mark.parametrize("BT", [1, 4])
def test_refused_offsets_keep_the_documented_bounds(chunks, cu, BT):
    with pytest.raises(ValueError):
        thdc.reference.linear_chunks(np.asarray(cu, np.int32), BT,
                                     thdc.reference.linear_chunk_capacity(16, len(cu) - 1, BT))
    check(chunks(cu, BT, 16), cu, BT)


def test_random_refused_offsets_keep_the_documented_bounds(chunks):
    rng = np.random.default_rng(15)
    for trial in range(40):
        BT = int(2 ** rng.integers(0, 5))
        big = bool(trial % 2)
        low, high = (INT32_MIN, INT32_MAX) if big else (-40, 40)
        cu = rng.integers(low, high, size=6, endpoint=True).tolist()
        check(chunks(cu, BT, 16), cu, BT)
