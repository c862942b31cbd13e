"""Every attention consumer on the step's outputs, captured with the step in
one CUDA graph (thdc.attention): PyTorch's varlen attention, FlashAttention 4
(graph and seqused), cuDNN's SDPA as TransformerEngine builds it (graph and
compact), FlashInfer's ragged prefill (forward only: it has no backward).

For each (consumer, convention, cp, head_dim): cp GraphSteps (the CP ranks,
in one process) and the attention are captured in one graph: the ranks'
tokens are gathered and put in sequence order with the partition's inverse
(restore_cp_order), q/k/v are looked up from fixed random tables by token,
the loss is the loss-masked dot product of the output with a fourth table,
and the backward gives dq/dk/dv. The graph is replayed over MICROBATCHES
random microbatches with set_sync_debug_mode("error"); every valid row's
output and gradient must equal causal attention in fp32 (SDPA) on the
original unpadded sequences, and no row, padding included, may be NaN.

Tolerance (bf16 inputs against fp32): per microbatch, the largest absolute
error of out, dq, dk, dv is at most TOLERANCE times the reference's largest
magnitude. A consumer whose package is missing is skipped with the import
error; each run appends a line to $THDC_ATTENTION_REPORT (JSON) when set."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import thdc.attention as attention  # noqa: E402
from microbatches import given_rows, random_microbatch, step_inputs  # noqa: E402
from attention_consumers import CONSUMERS, PACKAGES  # noqa: E402
from test_megatron_gpu import make_step  # noqa: E402

MICROBATCHES = int(os.environ.get("THDC_ATTENTION_MICROBATCHES", "40"))
TOLERANCE = 2e-2
ROWS, N, HEADS, VOCAB = 2048, 9, 4, 4096


def report(**row):
    path = os.environ.get("THDC_ATTENTION_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def import_or_skip(consumer, **where):
    import importlib

    try:
        importlib.import_module(PACKAGES[consumer])
    except Exception as error:  # ImportError, or a package that fails to load
        message = f"{type(error).__name__}: {error}"
        report(consumer=consumer, **where, result="not installed", error=message)
        pytest.skip(f"{PACKAGES[consumer]} does not import: {message}")


class Consumer:
    """The attention call of one (consumer, convention) on the step's rows."""

    def __init__(self, name, convention, step, head_dim):
        self.name, self.convention, self.step = name, convention, step
        self.backward = name != "flashinfer"
        if name == "cudnn":
            self.kernel = attention.CudnnAttention(HEADS, head_dim, N, ROWS,
                                                   convention=convention)
        elif name == "flashinfer":
            self.kernel = attention.FlashInferAttention(step, HEADS, head_dim)

    def plan(self, mb, cp):
        """Host work before a replay: FlashInfer's plan, from host offsets."""
        if self.name == "flashinfer":
            self.kernel.plan(attention.host_padded_offsets(
                mb["cu_seqlens"], mb["cu_seqlens_padded"], int(mb["num_seqs"][0]),
                ROWS // cp, cp, N, rows_given=given_rows(mb, ROWS // cp, cp)))

    def __call__(self, q, k, v):
        if self.name == "torch_varlen":
            return attention.varlen_attn(q, k, v, self.step)
        if self.name == "flash_attn_4":
            return attention.flash_attn_4(q, k, v, self.step, self.convention)
        if self.name == "cudnn":
            return self.kernel(q, k, v, self.step)
        return self.kernel(q, k, v)


def reference(mb, tables):
    """Causal attention in fp32 over each sequence's valid rows, its loss's
    gradients; the rows' positions in sequence order."""
    n = int(mb["num_seqs"][0])
    cu, cup = mb["cu_seqlens"], mb["cu_seqlens_padded"]
    rows, seq = [], []
    for i in range(n):
        valid = int(cu[i + 1] - cu[i])
        rows.extend(range(int(cup[i]), int(cup[i]) + valid))
        seq.extend([i] * valid)
    if not rows:
        return None
    rows = torch.tensor(rows, device="cuda")
    seq = torch.tensor(seq, device="cuda")
    tok = torch.from_numpy(mb["tokens"]).cuda()[rows] % VOCAB
    lm = torch.from_numpy(mb["loss_mask"]).cuda()[rows]
    q, k, v = (t[tok].float().requires_grad_() for t in tables[:3])
    mask = (seq[:, None] == seq[None, :]) & torch.ones(len(rows), len(rows), dtype=torch.bool,
                                                       device="cuda").tril()
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask).transpose(0, 1)
    loss = (out * tables[3][tok].float() * lm[:, None, None]).sum()
    grads = torch.autograd.grad(loss, (q, k, v))
    return rows, out.detach(), grads


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("cp", [1, 2, 4])
@pytest.mark.parametrize("consumer,convention", CONSUMERS,
                         ids=[f"{c}-{v}" for c, v in CONSUMERS])
def test_consumer_captured_with_the_step(consumer, convention, cp, head_dim):
    where = dict(consumer=consumer, convention=convention, cp=cp, head_dim=head_dim)
    import_or_skip(**where)
    if consumer == "cudnn":
        # A cuDNN whose backward gave wrong gradients at this head_dim is
        # refused by name, never run (cuDNN 9.14.0 at 256: dq off by 40%).
        refusal = attention.cudnn_refusal(head_dim)
        if refusal:
            with pytest.raises(RuntimeError, match="needs cuDNN >="):
                attention.CudnnAttention(HEADS, head_dim, N, ROWS, convention=convention)
            report(**where, result="refused", error=refusal)
            pytest.skip(f"refused by name: {refusal}")
    C = ROWS // cp
    steps = [make_step(C, N, cp, r, cp_order_index=True) for r in range(cp)]
    gen = torch.Generator(device="cuda").manual_seed(1000 * cp + head_dim)
    tables = [torch.randn(VOCAB, HEADS, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
              for _ in range(4)]
    try:
        kernel = Consumer(consumer, convention, steps[0], head_dim)
    except Exception as error:
        report(**where, result="cannot build", error=f"{type(error).__name__}: {error}")
        raise

    def body():
        for s in steps:
            s.run()
        tok = steps[0].restore_cp_order(torch.cat([s.batch["tokens"][0] for s in steps])) % VOCAB
        lm = steps[0].restore_cp_order(torch.cat([s.batch["loss_mask"][0] for s in steps]))
        q, k, v = (t[tok].requires_grad_(kernel.backward) for t in tables[:3])
        out = kernel(q, k, v)
        if not kernel.backward:
            return out.detach(), tok
        loss = (out.float() * tables[3][tok].float() * lm[:, None, None]).sum()
        return (out.detach(), tok, *torch.autograd.grad(loss, (q, k, v)))

    rng = np.random.default_rng(7 * cp + head_dim)
    mbs = [random_microbatch(rng, C, cp, N) for _ in range(MICROBATCHES)]
    inputs = [step_inputs(mb, C, cp) for mb in mbs]
    # Warm-up on a side stream (kernels compiled and planned), then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for mb, given in zip(mbs[:3], inputs[:3]):
                for s in steps:
                    s.load_inputs(**given)
                kernel.plan(mb, cp)
                body()
        torch.cuda.current_stream().wait_stream(side)
        for s in steps:
            s.load_inputs(**inputs[0])
        kernel.plan(mbs[0], cp)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = body()
    except Exception as error:
        report(**where, result="cannot capture", error=f"{type(error).__name__}: {error}")
        raise

    results = []
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for mb, given in zip(mbs, inputs):
            for s in steps:
                s.load_inputs(**given)
            kernel.plan(mb, cp)
            graph.replay()
            results.append([x.clone() for x in static])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()

    worst, checked_rows, nonfinite = 0.0, 0, 0
    for index, (mb, got) in enumerate(zip(mbs, results)):
        out, tok, *grads = got
        for x in (out, *grads):
            nonfinite += int((~torch.isfinite(x.float())).sum())
        expected = reference(mb, tables)
        if expected is None:
            continue
        rows, ref_out, ref_grads = expected
        assert torch.equal(tok[rows], torch.from_numpy(mb["tokens"]).cuda()[rows] % VOCAB), \
            f"microbatch {index}: rows out of place"
        pairs = [("out", out[rows], ref_out)]
        if kernel.backward:
            pairs += [(n, g[rows], r) for n, g, r in zip(("dq", "dk", "dv"), grads, ref_grads)]
        for name, a, b in pairs:
            error = float((a.float() - b).abs().max()) / max(float(b.abs().max()), 1e-6)
            worst = max(worst, error)
            assert error <= TOLERANCE, f"microbatch {index}: {name} off by {error:.3g} of its scale"
        checked_rows += len(rows)
    report(**where, result="ok" if nonfinite == 0 else "nonfinite", captured=True,
           backward=kernel.backward, microbatches=len(mbs), valid_rows=checked_rows,
           worst_relative_error=worst, nonfinite=nonfinite, sync_debug="error")
    assert nonfinite == 0, f"{nonfinite} non-finite values in the outputs or gradients"
    assert checked_rows > 0


def test_a_captured_ladder_step_names_the_rung_to_read():
    """A ladder's rungs share the slot's buffer: once a run is captured the
    host cannot know which rung a replay wrote, so the step itself is
    refused (it read the top rung's layout whatever ran) and the rung
    given reads its own offsets, replay after replay."""
    import thdc.megatron

    C, N = 256, 9
    step = thdc.megatron.GraphStep(C, N, capacities=[128, 256], sequence_capacities=[5, 9])
    low = step.slot(0).rung(0)
    rng = np.random.default_rng(5)
    mbs = [random_microbatch(rng, 128, 1, 5) for _ in range(4)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step.load_inputs(**step_inputs(mbs[0], 128, 1))
        low.run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        low.run()
        args = attention.varlen_attn_args(low)
    with pytest.raises(ValueError, match=r"slot 0 has 2 views .* pass the view that ran, "
                                         r"slot\.rung\(r\)"):
        attention.varlen_attn_args(step)
    for mb in mbs:
        step.load_inputs(**step_inputs(mb, 128, 1))
        graph.replay()
        torch.cuda.synchronize()
        from microbatches import reference as step_reference
        expected = step_reference(mb, 128, 1, 5)["cu_seqlens_padded"]
        assert np.array_equal(args["cu_seq_q"].cpu().numpy(), expected)
        assert args["max_q"] == 128
