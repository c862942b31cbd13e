"""GraphStep(..., linear_attention_chunk=BT) on the GPU: slots and rungs of a
capacity ladder captured in CUDA graphs and replayed over random, emptied
and exactly full microbatches under set_sync_debug_mode("error"); every
view's chunk metadata equals the reference's (S15) over its padded offsets,
which equal the reference step's. The CPU twin is
test_linear_attention_cpu.py; fla's kernels on these outputs run in
bench/linear_attention.py."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
import thdc.stages  # noqa: E402
from microbatches import invalidate, random_microbatch, reference, step_inputs  # noqa: E402

if not thdc.has_jit:
    pytest.skip("this build of thdc has no JIT", allow_module_level=True)


@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
@pytest.mark.parametrize("cp", [1, 2, 4, 8])
def test_captured_views_compute_their_chunks(cp_mode, cp):
    C, N, BT, K = 1024, 33, 64, 3
    capacities, sequences = [512, 1024], [17, 33]
    rank = cp - 1
    step = thdc.megatron.GraphStep(C, N, cp, rank, cp_mode=cp_mode, slots=K,
                                   capacities=capacities, sequence_capacities=sequences,
                                   linear_attention_chunk=BT)
    graphs = {}
    for k in range(K):
        for r in range(len(capacities)):
            graphs[k, r] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graphs[k, r]):
                step.slot(k).rung(r).run()
    rng = np.random.default_rng(44 + cp + len(cp_mode))
    checked = emptied = 0
    for round_ in range(6):
        batches = []
        for k in range(K):
            r = int(rng.integers(0, 2))
            mb = random_microbatch(rng, capacities[r], cp, sequences[r], rank=rank)
            if (round_ + k) % 4 == 3:  # more sequences than the rung holds: emptied
                mb["num_seqs"][0] = sequences[r] + 1
            elif (round_ + k) % 4 == 1:
                mb = invalidate(rng, mb, sequences[r])
            batches.append((r, mb, step_inputs(mb, capacities[r], cp)))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for k, (r, _, inputs) in enumerate(batches):
                step.slot(k).load_inputs(**inputs)
                graphs[k, r].replay()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        for k, (r, mb, _) in enumerate(batches):  # all K alive: none overwritten
            view = step.slot(k).rung(r)
            B, N_r = capacities[r], sequences[r]
            cup = view.outputs.cu_seqlens_padded.cpu().numpy()
            if cp_mode == "zigzag":
                expected_cup = reference(mb, B, cp, N_r)["cu_seqlens_padded"]
                assert np.array_equal(cup, expected_cup), (round_, k)
            NT = thdc.stages.linear_chunk_capacity(B, cp, N_r, BT)
            expected = thdc.reference.linear_chunks(cup, BT, NT)
            chunks = view.linear_chunks
            assert np.array_equal(chunks.indices.cpu().numpy(), expected["chunk_indices"])
            assert np.array_equal(chunks.offsets.cpu().numpy(), expected["chunk_offsets"])
            assert int(chunks.count[0]) == expected["chunk_count"]
            emptied += int(view.status[0]) != 0
            checked += 1
    assert checked == 6 * K and emptied > 0


@pytest.mark.parametrize("kernel", ["gdn", "kda"])
def test_fla_kernels_captured_with_the_step(kernel):
    """flash-linear-attention's chunked kernels (Gated DeltaNet, Kimi Delta
    Attention) on the step's chunk metadata, captured with the step in one
    graph and replayed over random, emptied and exactly full microbatches:
    every valid row's output and gradients against the same kernel run
    eagerly on the unpadded documents with fla's own metadata
    (bench/linear_attention.py's check). Where fla refuses GDN's gated
    backward (Hopper with Triton >= 3.4, < 3.7.1) the forward alone is
    compared; fla's guard is never lifted here. Skipped, with the package's
    name, where fla does not import."""
    import importlib
    import importlib.util
    import os

    from attention_consumers import PACKAGES
    from conftest import SOURCE_DIR

    package = PACKAGES["fla_gdn" if kernel == "gdn" else "fla_kda"]
    try:
        spec = importlib.util.spec_from_file_location(
            "linear_attention_bench", os.path.join(SOURCE_DIR, "bench", "linear_attention.py"))
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)  # turns fla's tensor cache off before fla imports
        importlib.import_module(package)
    except ImportError as error:
        pytest.skip(f"{package} does not import: {type(error).__name__}: {error}")
    backward = not (kernel == "gdn" and bench.gdn_backward_refused())
    figures = bench.check(bench.Kernel(kernel, 4, 64, 64, backward), 1024, 17, 64,
                          microbatches=24, seed=5)
    assert figures["valid"] > 0 and figures["emptied"] > 0 and figures["rows_compared"] > 0
