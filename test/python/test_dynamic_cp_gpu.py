"""Dynamic CP on a GPU: a global batch planned for dynamic CP over four
DP x CP ranks (thdc.planner.dynamic_cp_plan), the ranks simulated in one
process, each with GraphStep(cp=4, cp_sizes=(1, 2, 4)). For every sub-group
(CP size, block of ranks) one CUDA graph holds its ranks' steps at that size,
the rows put back in sequence order (restore_cp_order) and PyTorch's varlen
attention with its backward; the graphs share one memory pool and are
replayed in the plan's order under set_sync_debug_mode("error"). Every valid
row's output and gradients equal fp32 SDPA on the unpadded sequences
within 2% of scale; no value is non-finite."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402
import thdc.attention as attention  # noqa: E402
import thdc.planner as planner  # noqa: E402
from microbatches import step_inputs  # noqa: E402
from test_attention_gpu import HEADS, TOLERANCE, VOCAB, import_or_skip, reference, report  # noqa: E402

RANKS, SIZES, C, N = 4, (1, 2, 4), 512, 9
BATCHES = int(os.environ.get("THDC_DYNAMIC_CP_BATCHES", "6"))


def planned_microbatches(rng):
    """The sub-group microbatches of one random global batch: (size, block,
    mb) with mb in the form the reference and step_inputs read."""
    valid = [int(v) for v in rng.integers(1, 900, size=int(rng.integers(8, 24)))]
    padded = planner.align_lengths(np.array(valid, np.int32), cp=RANKS, dynamic_cp=True)
    padded = [int(p) for p in padded]
    plan = planner.dynamic_cp_plan(padded, C, cp=RANKS, max_packed_sequences=N)
    out = []
    for m in range(len(plan)):
        j = 0
        while j < RANKS:
            block, ids = plan.sub_group(m, j), plan.groups[m][j]
            cu, cup = [0], [0]
            for i in ids:
                cu.append(cu[-1] + valid[i])
                cup.append(cup[-1] + padded[i])
            rows = cup[-1]
            mask = np.concatenate([np.r_[np.ones(valid[i]), np.zeros(padded[i] - valid[i])]
                                   for i in ids]).astype(np.float32)
            out.append((len(block), block, dict(
                tokens=rng.integers(0, 50000, size=rows, dtype=np.int64),
                labels=rng.integers(0, 50000, size=rows, dtype=np.int64),
                position_ids=np.zeros(rows, np.int64), loss_mask=mask,
                cu_seqlens=np.array(cu, np.int32), cu_seqlens_padded=np.array(cup, np.int32),
                num_seqs=np.array([len(ids)], np.int32))))
            j = block.stop
    return out


@pytest.mark.parametrize("head_dim", [64, 128])
def test_dynamic_cp_captured_with_attention(head_dim):
    where = dict(consumer="torch_varlen", convention="graph", cp="dynamic", head_dim=head_dim)
    import_or_skip(**where)
    steps = [thdc.megatron.GraphStep(C, N, RANKS, j, cp_sizes=SIZES, cp_order_index=True)
             for j in range(RANKS)]
    gen = torch.Generator(device="cuda").manual_seed(head_dim)
    tables = [torch.randn(VOCAB, HEADS, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
              for _ in range(4)]

    def body(size, block):
        variants = [steps[k].slot(0).variant(size) for k in block]
        for v in variants:
            v.run()
        first = variants[0]
        tok = first.restore_cp_order(torch.cat([v.batch["tokens"][0] for v in variants])) % VOCAB
        lm = first.restore_cp_order(torch.cat([v.batch["loss_mask"][0] for v in variants]))
        q, k, v = (t[tok].requires_grad_() for t in tables[:3])
        out = attention.varlen_attn(q, k, v, first)
        loss = (out.float() * tables[3][tok].float() * lm[:, None, None]).sum()
        return (out.detach(), tok, *torch.autograd.grad(loss, (q, k, v)))

    def load(size, block, given):
        for k in block:
            steps[k].slot(0).variant(size).load_inputs(**given)

    rng = np.random.default_rng(head_dim)
    work = [w for _ in range(BATCHES) for w in planned_microbatches(rng)]
    # The device copies of the inputs, made before the loop (from pageable
    # host memory they would synchronise).
    given = [step_inputs(mb, C, size) for size, _, mb in work]
    keys = sorted({(size, block.start) for size, block, _ in work}, reverse=True)
    example = {(size, block.start): (size, block, g) for (size, block, _), g in zip(work, given)}
    # Warm-up on a side stream, then one graph per sub-group, one pool.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for key in keys:
            load(*example[key])
            body(*example[key][:2])
    torch.cuda.current_stream().wait_stream(side)
    pool = torch.cuda.graph_pool_handle()
    graphs, static = {}, {}
    for key in keys:
        load(*example[key])
        graphs[key] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[key], pool=pool):
            static[key] = body(*example[key][:2])

    results = []
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for (size, block, _), inputs in zip(work, given):
            load(size, block, inputs)
            graphs[size, block.start].replay()
            results.append([x.clone() for x in static[size, block.start]])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()

    worst, rows_checked, nonfinite, sizes_seen = 0.0, 0, 0, {}
    for index, ((size, block, mb), got) in enumerate(zip(work, results)):
        out, tok, *grads = got
        for x in (out, *grads):
            nonfinite += int((~torch.isfinite(x.float())).sum())
        rows, ref_out, ref_grads = reference(mb, tables)
        assert torch.equal(tok[rows], torch.from_numpy(mb["tokens"]).cuda()[rows] % VOCAB), \
            f"microbatch {index} (CP size {size}): rows out of place"
        for name, a, b in [("out", out[rows], ref_out)] + [
                (n, g[rows], r) for n, g, r in zip(("dq", "dk", "dv"), grads, ref_grads)]:
            error = float((a.float() - b).abs().max()) / max(float(b.abs().max()), 1e-6)
            worst = max(worst, error)
            assert error <= TOLERANCE, f"microbatch {index}: {name} off by {error:.3g}"
        rows_checked += len(rows)
        sizes_seen[size] = sizes_seen.get(size, 0) + 1
    report(**where, result="ok" if nonfinite == 0 else "nonfinite", captured=True, backward=True,
           microbatches=len(work), graphs=len(graphs), per_size=sizes_seen,
           valid_rows=rows_checked, worst_relative_error=worst, nonfinite=nonfinite,
           sync_debug="error")
    assert nonfinite == 0
    assert len(sizes_seen) > 1, "the batches exercise more than one CP size"


def test_megatron_function_with_dynamic_cp_never_waits():
    """get_batch_on_this_rank_for_sequence_packing(dynamic_cp=True) on the
    GPU, four DP x CP ranks simulated in one process: 20 microbatches laid
    out in sub-groups of 1, 2 and 4 ranks (valid and invalid), every call
    under set_sync_debug_mode("error") with the batch on the device and
    local_cp_size a host int; each rank's outputs, kept in a ring of 20
    slots, equal to the reference's for its CP rank in its sub-group."""
    from types import SimpleNamespace

    from microbatches import LocalGroup, invalidate, random_microbatch, step_mismatches
    from test_megatron_cpu import expect

    C, N, layouts = 64, 9, ((4,), (2, 2), (2, 1, 1), (1, 1, 2), (1, 1, 1, 1))
    M = thdc.megatron
    groups = {size: object() for size in SIZES}
    batches = [M.SequencePackingBatches(cp_groups=groups, slots=20) for _ in range(RANKS)]
    config = SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                             pad_packed_seq_alignment="max", cuda_graph_impl="local",
                             context_parallel_size=1, dynamic_context_parallel=True,
                             min_dynamic_context_parallel_size=1)
    pgs = [SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(0, 1), pp=LocalGroup(0, 1),
                           dp_cp=LocalGroup(j, RANKS)) for j in range(RANKS)]
    rng = np.random.default_rng(31)
    calls = []  # (rank, size, local rank, mb, batch dict on the device)
    for m in range(20):
        start = 0
        for size in layouts[m % len(layouts)]:
            mb = invalidate(rng, random_microbatch(rng, C, size, N, rank=0), N)
            given = dict(step_inputs(mb, C, size), max_seqlen=C * size, local_cp_size=size)
            calls += [(k, size, k - start, mb, given) for k in range(start, start + size)]
            start += size
    for k in range(RANKS):  # each rank's first call makes its step (it synchronises)
        first = next(c for c in calls if c[0] == k)
        batches[k](iter([first[4]]), dynamic_cp=True, pg_collection=pgs[k], config=config)
    torch.cuda.synchronize()
    made = []
    torch.cuda.set_sync_debug_mode("error")
    try:
        for k, size, local, mb, given in calls:
            *_, params, _ = batches[k](iter([given]), dynamic_cp=True, pg_collection=pgs[k],
                                       config=config)
            made.append((batches[k].last, params))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    for (k, size, local, mb, _), (slot, params) in zip(calls, made):
        assert slot.cp == size and params.local_cp_size == size and params.cp_group is groups[size]
        got = {name: v.cpu().numpy() for name, v in slot.outputs._asdict().items()}
        expected = expect(dict(mb, cp_rank=np.array([local], np.int32)), C, size, N)
        assert not step_mismatches(got, expected), (k, size)
    assert {size for _, size, *_ in calls} == set(SIZES)
