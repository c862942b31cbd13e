#!/usr/bin/env python3
"""cuDNN's SDPA on ragged THD rows, forward and backward, against float64 on
the host: the graph thdc.attention.CudnnAttention builds (TransformerEngine's
THD graph: ragged q/k/v/o offsets, padding mask with per-entry lengths,
causal; a batch of N entries, the last ones of zero length), standalone
(PyTorch and nvidia-cudnn-frontend only), for reporting to cuDNN.

Measured on an H100 (driver 580.159.04, nvidia-cudnn-frontend 1.32.0):
cuDNN 9.14.0 gives dq, dk, dv off by 40%, 34%, 13% of their largest
magnitude at head_dim 256 (forward right, head_dim 64 and 128 right);
cuDNN 9.19.0 is within 0.6% everywhere (bf16 inputs). The cuDNN the
frontend runs is printed (FACTS): the frontend loads the first libcudnn.so.9
in LD_LIBRARY_PATH, else the nvidia-cudnn wheel's; a library imported first
(--import transformer_engine.pytorch) may have loaded another.

  python3 bench/cudnn_ragged_sdpa.py [--head-dims 64,128,256] [--import MODULE]
  LD_LIBRARY_PATH=/path/to/cudnn/lib python3 bench/cudnn_ragged_sdpa.py

Prints one RESULT line (JSON) per head_dim: the largest error of out, dq,
dk, dv over the valid rows, relative to the reference's largest magnitude,
and the fp32 SDPA reference's own distance from float64; exit 1 when one
is over --tolerance."""
import argparse
import importlib
import json
import math
import os
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--import", dest="imports", action="append", default=[],
                help="a module to import before cudnn (repeatable)")
ap.add_argument("--tolerance", type=float, default=0.02)
ap.add_argument("--head-dims", default="64,128,256")
ap.add_argument("--convention", default="compact")
ap.add_argument("--trials", type=int, default=4)
args = ap.parse_args()

env0 = dict(os.environ)
import torch  # noqa: E402

flags0 = None


def flags():
    b = torch.backends
    return dict(matmul_tf32=b.cuda.matmul.allow_tf32, cudnn_tf32=b.cudnn.allow_tf32,
                f32_prec=torch.get_float32_matmul_precision(),
                flash=b.cuda.flash_sdp_enabled(), mem=b.cuda.mem_efficient_sdp_enabled(),
                math=b.cuda.math_sdp_enabled(), cudnn_sdp=b.cuda.cudnn_sdp_enabled(),
                det=torch.are_deterministic_algorithms_enabled(),
                cudnn_det=b.cudnn.deterministic, bench=b.cudnn.benchmark,
                reduced_bf16=b.cuda.matmul.allow_bf16_reduced_precision_reduction)


flags0 = flags()
for name in args.imports:
    importlib.import_module(name)
import cudnn  # noqa: E402


def libs():
    maps = open("/proc/self/maps").read()
    return sorted({os.path.realpath(p) for p in re.findall(r"\S*/libcudnn\S*\.so\S*", maps)})


HEADS, S, N = 4, 2048, 9
gen = torch.Generator().manual_seed(5)


def microbatch():
    """valid and padded offsets of N entries: n real sequences, the dummy over
    the tail, spare zero-length entries."""
    n = int(torch.randint(1, N - 1, (1,), generator=gen))
    valid, padded = [0], [0]
    for _ in range(n):
        room = S - padded[-1]
        if room < 16:
            break
        length = int(torch.randint(1, max(2, min(room - 8, 700)), (1,), generator=gen))
        pad = length + (-length) % 8
        valid.append(valid[-1] + length)  # cu_seqlens (unpadded offsets)
        padded.append(padded[-1] + pad)
    lengths = [valid[i + 1] - valid[i] for i in range(len(valid) - 1)]
    # the dummy covers the tail
    valid_lens = lengths + [S - padded[-1]]
    padded.append(S)
    while len(padded) < N + 1:
        padded.append(S)
        valid_lens.append(0)
    return padded, valid_lens, len(lengths)


class Attn:
    def __init__(self, d, convention):
        self.d, self.conv = d, convention
        self.handle = cudnn.create_handle()
        self.scale = 1.0 / math.sqrt(d)
        self.build()

    def layout(self):
        d = self.d
        return dict(dim=[N, HEADS, S, d], stride=[S * HEADS * d, d, HEADS * d, 1])

    def graph(self):
        return cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)

    def tensors(self, g, names):
        t = {n: g.tensor(name=n, **self.layout(), data_type=cudnn.data_type.BFLOAT16) for n in names}
        t["off"] = g.tensor(name="off", dim=[N + 1, 1, 1, 1], stride=[1, 1, 1, 1],
                            data_type=cudnn.data_type.INT64)
        t["len"] = g.tensor(name="len", dim=[N, 1, 1, 1], stride=[1, 1, 1, 1],
                            data_type=cudnn.data_type.INT32)
        for n in names:
            t[n].set_ragged_offset(t["off"])
        return t

    def finish(self, g):
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()

    def build(self):
        g = self.graph()
        t = self.tensors(g, ("q", "k", "v"))
        o, st = g.sdpa(name="sdpa", q=t["q"], k=t["k"], v=t["v"], generate_stats=True,
                       attn_scale=self.scale, use_padding_mask=True, seq_len_q=t["len"],
                       seq_len_kv=t["len"], use_causal_mask=True)
        o.set_output(True).set_dim(self.layout()["dim"]).set_stride(self.layout()["stride"])
        o.set_ragged_offset(t["off"])
        st.set_output(True).set_data_type(cudnn.data_type.FLOAT)
        self.finish(g)
        self.fwd = (g, t, o, st)
        g = self.graph()
        b = self.tensors(g, ("q", "k", "v", "o", "do"))
        sin = g.tensor(name="stats", dim=[N, HEADS, S, 1], stride=[HEADS * S, S, 1, 1],
                       data_type=cudnn.data_type.FLOAT)
        dq, dk, dv = g.sdpa_backward(name="bwd", q=b["q"], k=b["k"], v=b["v"], o=b["o"],
                                     dO=b["do"], stats=sin, attn_scale=self.scale,
                                     use_padding_mask=True, seq_len_q=b["len"], seq_len_kv=b["len"],
                                     max_total_seq_len_q=S, max_total_seq_len_kv=S,
                                     use_causal_mask=True)
        for x in (dq, dk, dv):
            x.set_output(True).set_dim(self.layout()["dim"]).set_stride(self.layout()["stride"])
            x.set_ragged_offset(b["off"])
        self.finish(g)
        self.bwd = (g, b, sin, dq, dk, dv)
        size = max(self.fwd[0].get_workspace_size(), g.get_workspace_size(), 1)
        self.ws = torch.empty(size, dtype=torch.uint8, device="cuda")
        self.wsizes = (self.fwd[0].get_workspace_size(), g.get_workspace_size())

    def run(self, q, k, v, do, off, ln):
        cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream().cuda_stream)
        g, t, o_t, st_t = self.fwd
        out = torch.zeros_like(q)
        stats = torch.empty(N, HEADS, S, 1, dtype=torch.float32, device="cuda")
        g.execute({t["q"]: q, t["k"]: k, t["v"]: v, t["off"]: off, t["len"]: ln, o_t: out,
                   st_t: stats}, self.ws, handle=self.handle)
        g, b, sin, dq_t, dk_t, dv_t = self.bwd
        dq, dk, dv = (torch.zeros_like(x) for x in (q, k, v))
        g.execute({b["q"]: q, b["k"]: k, b["v"]: v, b["o"]: out, b["do"]: do, sin: stats,
                   b["off"]: off, b["len"]: ln, dq_t: dq, dk_t: dk, dv_t: dv}, self.ws,
                  handle=self.handle)
        return out, dq, dk, dv


def reference(q, k, v, do, padded, valid_lens, n, dtype):
    outs = []
    for i in range(n):
        a, L = padded[i], valid_lens[i]
        qi, ki, vi = (x[a:a + L].to(dtype).transpose(0, 1).requires_grad_() for x in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(qi, ki, vi, is_causal=True)
        g = torch.autograd.grad(o, (qi, ki, vi), do[a:a + L].to(dtype).transpose(0, 1))
        outs.append((a, L, o.detach().transpose(0, 1), *(x.transpose(0, 1) for x in g)))
    return outs


results = []
for d in [int(x) for x in args.head_dims.split(",")]:
    attn = Attn(d, args.convention)
    worst = {k: 0.0 for k in ("out", "dq", "dk", "dv")}
    worst64 = dict(worst)
    refdiff = 0.0
    for trial in range(args.trials):
        padded, valid_lens, n = microbatch()
        q, k, v, do = (torch.randn(S, HEADS, d, generator=gen).to(torch.bfloat16).cuda()
                       for _ in range(4))
        seq = valid_lens if args.convention == "compact" else \
            [padded[i + 1] - padded[i] for i in range(N)]
        off = (torch.tensor(padded, dtype=torch.int64) * HEADS * d).view(N + 1, 1, 1, 1).cuda()
        ln = torch.tensor(seq, dtype=torch.int32).view(N, 1, 1, 1).cuda()
        got = attn.run(q, k, v, do, off, ln)
        torch.cuda.synchronize()
        ref32 = reference(q, k, v, do, padded, valid_lens, n, torch.float32)
        ref64 = reference(q.cpu(), k.cpu(), v.cpu(), do.cpu(), padded, valid_lens, n, torch.float64)
        for (a, L, *r32), (_, _, *r64) in zip(ref32, ref64):
            for name, g, x32, x64 in zip(worst, got, r32, r64):
                scale = float(x64.abs().max()) or 1e-6
                worst[name] = max(worst[name], float((g[a:a + L].double().cpu() - x64).abs().max()) / scale)
                refdiff = max(refdiff, float((x32.double().cpu() - x64).abs().max()) / scale)
    results.append(dict(imports=args.imports, head_dim=d, convention=args.convention,
                        err_vs_fp64=worst, fp32_ref_vs_fp64=refdiff, workspace=attn.wsizes))
def torch_cudnn():
    try:
        return torch.backends.cudnn.version()
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:120]}"


facts = dict(imports=args.imports, cudnn_backend=cudnn.backend_version_string(),
             torch_cudnn=torch_cudnn(), libcudnn=libs(),
             flags_before=flags0, flags_after=flags(),
             env_added={k: v for k, v in os.environ.items() if env0.get(k) != v})
print("FACTS", json.dumps(facts))
for r in results:
    print("RESULT", json.dumps(r))
sys.exit(int(any(e > args.tolerance for r in results for e in r["err_vs_fp64"].values())))
