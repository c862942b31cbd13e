"""GraphStep(..., linear_attention_chunk=BT) at every small size: the step's
pipeline compiles with both lowerings (thd-opt --thd-to-ptx and
--thd-to-host, the passes of thdc's GPU and host compiles), and on the CPU
each step, and each rung of a capacity ladder, computes S15's chunk metadata
over its own padded offsets (thdc.reference.linear_chunks).

The sizes include every (C, cp, BT) whose chunk indices have as many entries
as the step has rows, 2*NT = C with NT = ceil(C*cp/BT) + N: the indices are
then computed in the loop of the step's first outputs, and their chunk count,
a sum over the padded offsets, is the first to ask for the padded offsets'
scalars (pad_tail_metadata's count and tail). With zigzag CP and cp > 1 the
lowering placed those scalars after the sum's loop, which read them, and
the kernel did not verify ("operand #1 does not dominate this use"), e.g.
GraphStep(8, 3, 2, linear_attention_chunk=16). Skipped without PyTorch."""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.stages  # noqa: E402
from microbatches import invalidate, random_microbatch, step_inputs  # noqa: E402

from conftest import megatron_or_skip  # noqa: E402

megatron_or_skip()
import thdc.megatron  # noqa: E402


def chunk_rows(C, cp, N, BT):
    """NT, the rows of the step's linear_chunk_indices."""
    return math.ceil(C * cp / BT) + N


def sizes():
    """(C, cp, BT, N): the smallest sequence capacity (a step needs one
    entry for the dummy besides a sequence), the one that makes 2*NT = C,
    and C - 1 (N+1 = C: the offsets are as long as the rows)."""
    out = []
    for C in (8, 16, 32, 48):
        for cp in (1, 2, 4):
            for BT in (16, 64):
                same = C // 2 - math.ceil(C * cp / BT)
                for N in sorted({2, same, C - 1}):
                    if N >= 2:
                        out.append((C, cp, BT, N))
    return out


SIZES = sizes()
# The sizes that failed: GraphStep(8, 3, 2), (32, 8, 4), (32, 12, 2),
# (48, 18, 2) with linear_attention_chunk=16.
REPORTED = {(8, 2, 16, 3), (32, 4, 16, 8), (32, 2, 16, 12), (48, 2, 16, 18)}


# The sizes whose chunk indices are as long as the step's rows.
SAME_LENGTH = [(C, cp, BT, N) for C, cp, BT, N in SIZES if 2 * chunk_rows(C, cp, N, BT) == C]


def test_the_sizes_include_every_step_whose_indices_are_as_long_as_its_rows():
    assert REPORTED <= set(SAME_LENGTH)
    assert len(SAME_LENGTH) == 24  # one for each (C, cp, BT)


def pipeline_at(cp_mode, BT, C, cp, N):
    """The step's pipeline text with its parameters set to (C, cp, N)."""
    text = thdc.stages.pipeline("first_last", cp_mode=cp_mode, linear_chunk=BT)
    default = "thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}"
    assert text.count(default) == 1, "the pipeline's parameters moved"
    return text.replace(default, f"thd.params = {{C = {C} : i64, cp = {cp} : i64, "
                                 f"N = {N} : i64}}")


def thd_opt(*args):
    """The package's thd-opt (its entry point, as the installed command runs)."""
    code = f"import sys; sys.argv = {['thd-opt', *args]!r}; from thdc import _tools; _tools.thd_opt()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)


@pytest.mark.parametrize("lowering", ["--thd-to-ptx", "--thd-to-host"])
@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
def test_every_size_compiles(tmp_path, cp_mode, lowering):
    """All sizes in one -split-input-file run per lowering: static shapes,
    fusion, then the GPU (NVVM) or host (LLVM) lowering."""
    chunks, starts, line = [], [], 1
    for C, cp, BT, N in SIZES:
        chunk = (f"// C={C} cp={cp} BT={BT} N={N}\n"
                 + pipeline_at(cp_mode, BT, C, cp, N))
        starts.append((line, (C, cp, BT, N)))
        chunks.append(chunk)
        line += chunk.count("\n") + 1  # the separator's line
    source = tmp_path / "sizes.mlir"
    source.write_text("\n// -----\n".join(chunks))
    result = thd_opt(str(source), "-split-input-file", "--thd-force-static-shapes",
                     "--thd-fuse", lowering, "-o", os.devnull)

    def size_at(where):
        return [size for start, size in starts if start <= where][-1]

    failed = sorted({size_at(int(m)) for m in
                     re.findall(r"sizes\.mlir:(\d+):\d+: error", result.stderr)})
    assert result.returncode == 0 and not failed, (
        f"{lowering} ({cp_mode}) failed at (C, cp, BT, N) = {failed}:\n"
        + result.stderr[:3000])


def check_chunks(view, C, cp, N, BT, label):
    """The view's chunk metadata is S15's over its own padded offsets."""
    chunks = view.linear_chunks
    NT = chunk_rows(C, cp, N, BT)
    assert NT == thdc.stages.linear_chunk_capacity(C, cp, N, BT)
    expected = thdc.reference.linear_chunks(view.outputs.cu_seqlens_padded.numpy(), BT, NT)
    assert tuple(chunks.indices.shape) == (NT, 2), label
    assert np.array_equal(chunks.indices.numpy(), expected["chunk_indices"]), label
    assert np.array_equal(chunks.offsets.numpy(), expected["chunk_offsets"]), label
    assert int(chunks.count[0]) == expected["chunk_count"], label


@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
def test_steps_whose_indices_are_as_long_as_their_rows_compute_the_reference_chunks(
        cache_dir, cp_mode):
    """On the host (thdc's JIT, as GraphStep compiles for a CPU device): two
    valid microbatches and an emptied one (status != 0) a size, on the last
    CP rank."""
    for C, cp, BT, N in SAME_LENGTH:
        step = thdc.megatron.GraphStep(C, N, cp, cp - 1, cp_mode=cp_mode, device="cpu",
                                       cache_dir=cache_dir, linear_attention_chunk=BT)
        rng = np.random.default_rng(C * 1000 + cp * 100 + N + BT)
        for trial in range(3):
            mb = random_microbatch(rng, C, cp, N)
            if trial == 2:
                mb["num_seqs"][0] = -1  # refused: the step empties the microbatch
            step(**step_inputs(mb, C, cp, device="cpu"))
            assert (int(step.status[0]) != 0) == (trial == 2)
            check_chunks(step, C, cp, N, BT, f"(C, cp, BT, N) = {(C, cp, BT, N)}, "
                                             f"trial {trial}")


def test_a_ladder_rung_whose_indices_are_as_long_as_its_rows(cache_dir):
    """The rung (32 rows, 12 sequences) at cp = 2 and BT = 16 has 2*NT = 32
    entries of chunk indices."""
    capacities, sequences, cp, BT = [16, 32, 64], [5, 12, 20], 2, 16
    assert 2 * chunk_rows(32, cp, 12, BT) == 32
    step = thdc.megatron.GraphStep(64, 20, cp, 1, capacities=capacities,
                                   sequence_capacities=sequences, device="cpu",
                                   cache_dir=cache_dir, linear_attention_chunk=BT)
    rng = np.random.default_rng(32)
    for r, (B, N_r) in enumerate(zip(capacities, sequences)):
        view = step.slot(0).variant(cp, r)
        for trial in range(4):
            mb = random_microbatch(rng, B, cp, N_r)
            if trial == 3:
                mb = invalidate(rng, mb, N_r)
            view.load_inputs(**step_inputs(mb, B, cp, device="cpu"))
            view.run()
            check_chunks(view, B, cp, N_r, BT, f"rung {r}, trial {trial}")
