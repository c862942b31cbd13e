"""thdc.megatron.IterationGraphs with real CUDA graphs: a schedule whose
microbatches each run the step, a small model's forward and its backward
(gradients accumulated into a parameter, as a training iteration does),
captured once per iteration shape in one memory pool, replayed on new data
under set_sync_debug_mode("error"), equal to the same iterations run
eagerly. The CPU twin, with the policy's every case, is
test_iteration_graphs_cpu.py. Skipped without PyTorch or a GPU."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc  # noqa: E402

if not thdc.has_jit:
    pytest.skip("this build of thdc has no JIT", allow_module_level=True)
import thdc.megatron as tm  # noqa: E402
from test_iteration_graphs_cpu import (C, CAPACITIES, N, SEQUENCES, SLOTS,  # noqa: E402
                                       microbatch)

VOCAB, WIDTH = 1000, 16


def make_step():
    return tm.GraphStep(C, N, 1, 0, convention="compact", slots=SLOTS, capacities=CAPACITIES,
                        sequence_capacities=SEQUENCES)


def schedule(forward_step_func, data_iterator, model, num_microbatches, seq_length,
             micro_batch_size, forward_only=False):
    """Forward and backward per microbatch, as megatron-core's schedule
    without pipelining does: the loss is a masked sum, its gradient goes into
    model.grad."""
    reports = []
    for _ in range(num_microbatches):
        tokens, labels, loss_mask, _, position_ids, params, padding_mask = \
            tm.IterationGraphs.get_batch(data_iterator)
        rows = model[tokens.view(-1)] * (1 + 0.01 * position_ids.view(-1, 1).float())
        target = model[labels.view(-1)].detach()
        per_row = ((rows - target) ** 2).sum(-1) * loss_mask.view(-1)
        loss = per_row.sum() + 0.0 * padding_mask.float().sum()
        loss.backward()
        ends = params.cu_seqlens_q_padded[-1].float()
        reports.append({"lm loss": torch.stack([loss.detach(), loss_mask.sum(), ends])})
    return reports


def run_iteration(graphs, model, items):
    model.grad.zero_()
    losses = graphs(forward_step_func=None, data_iterator=iter(items), model=model,
                    num_microbatches=len(items), seq_length=C, micro_batch_size=1)
    return torch.stack([r["lm loss"] for r in losses]), model.grad.clone()


def twin_models(seed):
    """A parameter with a zeroed gradient and an equal copy for the eager run."""
    torch.manual_seed(seed)
    model = torch.randn(VOCAB, WIDTH, device="cuda", requires_grad=True)
    model.grad = torch.zeros_like(model)
    eager_model = model.detach().clone().requires_grad_(True)
    eager_model.grad = torch.zeros_like(eager_model)
    return model, eager_model


def run_checked(graphs, model, items, rungs):
    """run_iteration, under set_sync_debug_mode("error") where it replays a
    graph."""
    strict = graphs.captured(rungs)
    torch.cuda.synchronize()
    if strict:
        torch.cuda.set_sync_debug_mode("error")
    try:
        return run_iteration(graphs, model, items)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def to_device(items, pinned):
    """On the GPU, or in page-locked host memory (the loader's one copy)."""
    move = (lambda v: v.pin_memory()) if pinned else (lambda v: v.cuda())
    return [({k: (move(v) if torch.is_tensor(v) else v) for k, v in b.items()}, r)
            for b, r in items]


def test_graphs_equal_eager_and_never_synchronise():
    rng = np.random.default_rng(29)
    model, eager_model = twin_models(0)
    graphs = tm.IterationGraphs(schedule, make_step(), warmup=1,
                                pool=torch.cuda.graph_pool_handle(),
                                capture_stream=torch.cuda.Stream())
    eager = tm.IterationGraphs(schedule, make_step(), warmup=1, max_graphs=0)
    plan = [[2, 0], [2, 0], [0, 2], [1, 0], [1, 0], [2, 1, 0, 0], [0], [2, 1, 0, 0], [0, 2],
            [1, 0], [0]]
    kinds = []
    for i, rungs in enumerate(plan):
        items = to_device([microbatch(rng, r) for r in rungs], pinned=i % 2 == 1)
        got, grad = run_checked(graphs, model, items, rungs)
        kinds.append(graphs.last_kind)
        want, want_grad = run_iteration(eager, eager_model, items)
        assert eager.last_order == graphs.last_order
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-4)
        # every valid row once in the loss, the rung's own padded length
        assert got[:, 1].sum().item() == sum(float(b["loss_mask"].sum()) for b, _ in items)
        assert sorted(got[:, 2].tolist(), reverse=True) == \
            [float(CAPACITIES[r]) for r in sorted(rungs, reverse=True)]
    assert kinds == ["eager", "capture", "replay", "eager", "capture", "capture", "capture",
                     "replay", "replay", "replay", "replay"]
    assert graphs.stats["captured"] == 4 and graphs.stats["replayed"] == 5
    graphs.reset()


def test_a_planned_shape_holds_smaller_iterations():
    """Planned shapes (choose_shapes, one graph here): every iteration of two
    microbatches replays the one graph, its microbatches padded to that
    shape's rungs, equal to the same microbatches run eagerly at those rungs
    and never synchronising."""
    rng = np.random.default_rng(31)
    model, eager_model = twin_models(1)
    plan = [[2, 0], [1, 0], [1, 1], [2, 1], [0, 0], [0, 1]]
    shapes = tm.choose_shapes(plan, CAPACITIES, 1)
    assert shapes == [(2, 1)]
    graphs = tm.IterationGraphs(schedule, make_step(), warmup=1, max_graphs=1, shapes=shapes,
                                pool=torch.cuda.graph_pool_handle(),
                                capture_stream=torch.cuda.Stream())
    eager = tm.IterationGraphs(schedule, make_step(), warmup=1, max_graphs=0)
    kinds = []
    for rungs in plan:
        items = to_device([microbatch(rng, r) for r in rungs], pinned=True)
        got, grad = run_checked(graphs, model, items, rungs)
        kinds.append(graphs.last_kind)
        assert graphs.last_rungs == [2, 1]
        # the same microbatches in the same order, each at the rung it ran
        held = [(items[m][0], r) for m, r in zip(graphs.last_order, graphs.last_rungs)]
        want, want_grad = run_iteration(eager, eager_model, held)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-4)
        assert got[:, 2].tolist() == [float(CAPACITIES[2]), float(CAPACITIES[1])]
    assert kinds == ["eager", "capture", "replay", "replay", "replay", "replay"]
    assert graphs.stats["promoted"] == 5
    graphs.reset()
