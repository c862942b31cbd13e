#!/usr/bin/env python3
"""Linear attention (flash-linear-attention's Gated DeltaNet and Kimi Delta
Attention) fed the step's chunk metadata at static shape, captured in one
CUDA graph with the step, and what the metadata costs (docs/semantics.md
S15, GraphStep(linear_attention_chunk=BT)).

  check  For each kernel (chunk_gated_delta_rule, chunk_kda): one CUDA graph
         holds the step (stage "middle": metadata only), the kernel's
         forward and its backward (torch.autograd.grad) on static [1, C, ...]
         buffers. Random microbatches (documents with padding between them,
         emptied ones, exactly full ones) are loaded and the graph replayed
         under torch.cuda.set_sync_debug_mode("error"); then every valid
         row's output and gradients (q, k, v, g, beta) are compared with the
         same kernel run eagerly on the unpadded documents with fla's own
         metadata (cu_seqlens alone): max |diff| / max |eager| <= 1e-2. An
         emptied microbatch must give no chunk over a given row: its chunks
         are the dummy's over all C rows.
  cost   For C in --cost-C: host time per call (slot.run(), no sync) and
         device time per replay of the step's graph, with and without the
         chunk outputs; beside them fla's own eager preparation per
         microbatch (prepare_chunk_indices and prepare_chunk_offsets on the
         microbatch's cu_seqlens, its cache off), which reads the chunk
         counts back to the host: wall time per call, synchronised.

fla 0.6.0 refuses the gated backward of GDN (chunk_bwd_dqkwg) on Hopper
with Triton >= 3.4 and < 3.7.1 (fla/ops/common/chunk_o.py:726-731, its
issue #640: incorrect results). There, --gdn-backward decides: "forward"
(the default) captures and compares GDN's forward alone; "lift-guard"
lifts fla's check for this process, so that the graph and the eager run
compare the same kernel, results fla calls unreliable on that Triton
(what it shows is that both get the same metadata, not that the kernel is
right); the figures say which ran.

Needs a GPU, PyTorch, Triton, fla-core 0.6.0 (and einops). FLA's tensor
cache is turned off (FLA_DISABLE_TENSOR_CACHE=1), its TileLang and QLA
backends too (the Triton kernels run).

  python3 bench/linear_attention.py --json out.json
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys

os.environ.setdefault("FLA_DISABLE_TENSOR_CACHE", "1")
os.environ.setdefault("FLA_TILELANG", "0")
os.environ.setdefault("FLA_FLASH_QLA", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import thdc  # noqa: E402
import thdc.attention  # noqa: E402
import thdc.megatron  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402  (bench/timing.py)

TOLERANCE = 1e-2


def random_pack(rng, C, N, kind):
    """(cu_seqlens, cu_seqlens_padded) of n+1 entries as the reference
    framework hands a microbatch over: documents with padding after them
    (valid <= padded), at most N-1 of them within C rows (or N exactly
    filling C, kind "full"), or a bad one the step empties ("over": more
    rows than C; "decreasing": an offset below its predecessor)."""
    if kind == "empty":
        return np.zeros(1, np.int32), np.zeros(1, np.int32)
    n = N if kind == "full" else int(rng.integers(2 if kind == "decreasing" else 1, N))
    cuts = np.sort(rng.choice(np.arange(1, C), size=n - 1, replace=False))
    cup = np.concatenate([[0], cuts, [C]]).astype(np.int64)
    if kind != "full":  # maybe a tail: the last document ends early
        cup[-1] = int(rng.integers(cup[-2] + 1, C + 1))
    valid = np.array([int(rng.integers(max(1, L // 2), L + 1)) for L in np.diff(cup)])
    cu_seqlens = np.concatenate([[0], np.cumsum(valid)]).astype(np.int32)
    if kind == "over":
        cup[-1] = C + 8
    elif kind == "decreasing":
        cup[1] = cup[2] + 1
    return cu_seqlens, cup.astype(np.int32)


def given_rows(cu_seqlens, cup):
    """The rows of the padded buffer holding documents' tokens, in order,
    and the documents' cu_seqlens over them (fla's own metadata)."""
    valid = np.diff(cu_seqlens.astype(np.int64))
    rows = np.concatenate([np.arange(s, s + v) for s, v in zip(cup[:-1], valid)]
                          + [np.zeros(0, np.int64)])
    return rows, np.concatenate([[0], np.cumsum(valid)]).astype(np.int32)


def gdn_backward_refused() -> bool:
    """Whether fla refuses GDN's gated backward on this GPU and Triton
    (chunk_o.py:726-731)."""
    from fla.ops.common import chunk_o
    return bool(chunk_o.IS_NVIDIA_HOPPER and chunk_o.TRITON_ABOVE_3_4_0
                and not chunk_o.TRITON_ABOVE_3_7_1)


class Kernel:
    """One of fla's chunked kernels with its inputs' shapes and gates."""

    def __init__(self, name, H, K, V, backward=True):
        self.name, self.H, self.K, self.V = name, H, K, V
        self.backward = backward
        if name == "gdn":
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule
            self.fn, self.args = chunk_gated_delta_rule, thdc.attention.fla_gdn_args
        else:
            from fla.ops.kda import chunk_kda
            self.fn, self.args = chunk_kda, thdc.attention.fla_kda_args

    def shapes(self, T):
        H, K, V = self.H, self.K, self.V
        g = (1, T, H, K) if self.name == "kda" else (1, T, H)
        return dict(q=(1, T, H, K), k=(1, T, H, K), v=(1, T, H, V), g=g, beta=(1, T, H))

    def fill(self, bufs, gen):
        """Fresh inputs in the static buffers, on the device (no sync)."""
        with torch.no_grad():
            for name, buf in bufs.items():
                x = torch.randn(buf.shape, device=buf.device, generator=gen)
                if name == "k":
                    x = F.normalize(x, dim=-1)
                elif name == "g":
                    x = F.logsigmoid(x).clamp(min=-5)
                elif name == "beta":
                    x = torch.sigmoid(x)
                buf.copy_(x)

    def __call__(self, inputs, **metadata):
        o, _ = self.fn(inputs["q"], inputs["k"], inputs["v"], inputs["g"], inputs["beta"],
                       **metadata)
        return o


def capture(step, kernel, bufs, do):
    """One graph: the step, the kernel's forward and backward on the static
    buffers; returns (graph, output, gradients) (static)."""
    leaves = {k: v.detach().requires_grad_(kernel.backward) for k, v in bufs.items()}

    def body():
        step.run()
        o = kernel(leaves, **kernel.args(step))
        if not kernel.backward:
            return o, ()
        keep = (~step.outputs.padding_mask).view(1, -1, *([1] * (o.dim() - 2)))
        grads = torch.autograd.grad(o, list(leaves.values()), grad_outputs=do * keep)
        return o, grads

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # Triton's autotuning and compilation, outside the capture
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, grads = body()
    return graph, o, dict(zip(leaves, grads)), leaves


def check(kernel, C, N, BT, microbatches, seed):
    """The captured step + kernel against the eager kernel on the unpadded
    documents; returns the figures."""
    step = thdc.megatron.GraphStep(C, N, stage="middle", linear_attention_chunk=BT)
    device = step.device
    shapes = kernel.shapes(C)
    bufs = {k: torch.empty(s, device=device, dtype=torch.bfloat16) for k, s in shapes.items()}
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    kernel.fill(bufs, gen)
    do = torch.empty(shapes["v"], device=device, dtype=torch.bfloat16)
    graph, o, grads, leaves = capture(step, kernel, bufs, do)
    rng = np.random.default_rng(seed)
    kinds = ["doc"] * microbatches
    for i, kind in zip(range(3, microbatches, 7), ("over", "decreasing", "empty", "full",
                                                    "over", "full", "empty")):
        kinds[i] = kind
    worst = {}
    figures = dict(kernel=kernel.name, C=C, N=N, BT=BT, microbatches=microbatches,
                   backward=kernel.backward, emptied=0, valid=0, rows_compared=0)
    for i, kind in enumerate(kinds):
        cu, cup = random_pack(rng, C, N, kind)
        staged = dict(cu_seqlens=torch.from_numpy(cu).to(device),
                      cu_seqlens_padded=torch.from_numpy(cup).to(device), num_seqs=len(cu) - 1)
        # fresh data: the static buffers are the graph's leaves' storage
        kernel.fill({k: leaves[k].data for k in leaves}, gen)
        with torch.no_grad():
            do.copy_(torch.randn(do.shape, device=device, generator=gen))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            step.load_inputs(**staged)
            graph.replay()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        status = int(step.status[0])
        chunks = step.linear_chunks
        out_cup = step.outputs.cu_seqlens_padded.cpu().numpy()
        NT = chunks.indices.shape[0]
        expected = thdc.reference.linear_chunks(out_cup, BT, NT)
        assert np.array_equal(chunks.indices.cpu().numpy(), expected["chunk_indices"]), i
        assert int(chunks.count[0]) == expected["chunk_count"], i
        assert torch.isfinite(o).all() and all(torch.isfinite(g).all() for g in grads.values())
        if kind in ("over", "decreasing"):
            assert status != 0, f"microbatch {i} ({kind}) was not emptied"
            figures["emptied"] += 1
            # the dummy's chunks alone, over all C rows: none over a given row
            assert out_cup[1] == C and int(chunks.count[0]) == math.ceil(C / BT), i
            continue
        assert status == 0, f"microbatch {i} ({kind}): status {status}"
        figures["valid"] += 1
        rows, cu_ref = given_rows(cu, cup)
        if rows.size == 0:
            continue
        index = torch.from_numpy(rows).to(device)
        ref = {k: leaves[k].detach()[:, index].clone().requires_grad_(kernel.backward)
               for k in leaves}
        o_ref = kernel(ref, cu_seqlens=torch.from_numpy(cu_ref).to(device).long(),
                       chunk_size=BT)
        pairs = [("o", o[:, index], o_ref)]
        if kernel.backward:
            o_ref.backward(do[:, index])
            pairs += [(k, grads[k][:, index], ref[k].grad) for k in leaves]
        for name, got, want in pairs:
            scale = want.float().abs().max().item() or 1.0
            err = (got.float() - want.float()).abs().max().item() / scale
            worst[name] = max(worst.get(name, 0.0), err)
            assert err <= TOLERANCE, f"{kernel.name} microbatch {i}: {name} differs by " \
                                     f"{err:.3g} of its scale"
        figures["rows_compared"] += int(rows.size)
    figures["worst_relative_error"] = worst
    return figures


def host_us(fn, calls):
    """Median host time per call, in microseconds (no synchronisation)."""
    return statistics.median(timing.host_samples(fn, calls))


def device_us(graph, replays):
    return timing.replay_time(graph.replay, replays)


def cost(C, N, BT, seed, rounds):
    from fla.ops.utils.index import prepare_chunk_indices, prepare_chunk_offsets
    rng = np.random.default_rng(seed)
    cu, cup = random_pack(rng, C, N, "doc")
    row = dict(C=C, N=N, BT=BT)
    for label, chunk in (("step", None), ("step+chunks", BT)):
        step = thdc.megatron.GraphStep(C, N, stage="middle", linear_attention_chunk=chunk)
        step.load_inputs(cu_seqlens=torch.from_numpy(cu).cuda(),
                         cu_seqlens_padded=torch.from_numpy(cup).cuda(), num_seqs=len(cu) - 1)
        graph = torch.cuda.CUDAGraph()
        step.run()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            step.run()
        host, dev = [], []
        for _ in range(rounds):
            host.append(host_us(step.run, 2000))
            torch.cuda.synchronize()
            dev.append(device_us(graph, 500))
        row[label] = dict(host_us=[round(x, 2) for x in host], device_us=[round(x, 2) for x in dev])
    cup_t = torch.from_numpy(cup).cuda()

    def eager():
        prepare_chunk_indices(cup_t, BT)
        prepare_chunk_offsets(cup_t, BT)
        torch.cuda.synchronize()

    eager()
    row["fla_eager_prepare"] = dict(wall_us=[round(host_us(eager, 500), 2) for _ in range(rounds)])
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--C", type=int, default=4096, help="rows of the check")
    parser.add_argument("--N", type=int, default=33)
    parser.add_argument("--BT", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--microbatches", type=int, default=48)
    parser.add_argument("--kernels", default="gdn,kda")
    parser.add_argument("--gdn-backward", choices=("forward", "lift-guard"), default="forward",
                        help="where fla refuses GDN's gated backward on this GPU and Triton")
    parser.add_argument("--cost-C", default="8192,32768")
    parser.add_argument("--cost-N", type=int, default=129)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import fla
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                  fla=getattr(fla, "__version__", "?"), thdc=thdc.__version__,
                  python=platform.python_version(), checks=[], costs=[])
    refused = gdn_backward_refused()
    result["fla_refuses_gdn_backward_here"] = refused
    for name in filter(None, args.kernels.split(",")):
        backward = not (name == "gdn" and refused and args.gdn_backward == "forward")
        if name == "gdn" and refused and args.gdn_backward == "lift-guard":
            from fla.ops.common import chunk_o
            chunk_o.TRITON_ABOVE_3_7_1 = True  # this process only
        kernel = Kernel(name, args.heads, args.head_dim, args.head_dim, backward)
        with timing.host_window() as window:
            try:
                figures = check(kernel, args.C, args.N, args.BT, args.microbatches, args.seed)
            except Exception as error:  # recorded; the other kernel still runs
                figures = dict(kernel=name, backward=backward,
                               error=f"{type(error).__name__}: {error}")
                print(figures["error"], file=sys.stderr, flush=True)
        figures["fla_guard_lifted"] = name == "gdn" and refused and \
            args.gdn_backward == "lift-guard"
        figures["seconds"] = round(window.seconds, 1)
        print(json.dumps(figures), flush=True)
        result["checks"].append(figures)
        write(args.json, result)
    for C in filter(None, args.cost_C.split(",")):
        row = cost(int(C), args.cost_N, args.BT, args.seed, args.rounds)
        print(json.dumps(row), flush=True)
        result["costs"].append(row)
        write(args.json, result)
    return 0


def write(path, result):
    """The figures so far (a later kernel may run past a time limit)."""
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
