"""The calls of thdc.attention: each kernel on the step's rows with the
arguments of _args, forward and backward where the kernel has one."""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np

from .._checks import _check_int, _import_torch
from ._args import (KeepRows, _check_causal, _check_convention, _metadata, computed_rows,
                    cudnn_args, flash_attn_4_args, varlen_attn_args)

torch = _import_torch("thdc.attention")


def _check_thd(q, k, v, rows: int):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[0] != rows:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name} must be a [C*cp = {rows}, heads, head_dim] tensor in "
                             f"sequence order; got {shape}")


def varlen_attn(q, k, v, source, causal: bool = True):
    """PyTorch's variable-length attention on the step's rows ("graph")."""
    args = varlen_attn_args(source)
    _check_causal("graph", causal)
    _check_thd(q, k, v, args["max_q"])
    from torch.nn.attention.varlen import varlen_attn as kernel

    mask = (dict(window_size=(-1, 0) if causal else (-1, -1)) if _takes_window(kernel)
            else dict(is_causal=causal))
    return kernel(q, k, v, args["cu_seq_q"], args["cu_seq_k"], args["max_q"], args["max_k"],
                  **mask)


@functools.lru_cache(maxsize=None)
def _takes_window(kernel) -> bool:
    """Whether this release's varlen_attn spells causal as window_size."""
    import inspect

    return "window_size" in inspect.signature(kernel).parameters


def flash_attn_4(q, k, v, source, convention: str = "seqused", causal: bool = True):
    """FlashAttention 4 (flash-attn-4's flash_attn.cute) on the step's rows;
    with "seqused" the rows it leaves unwritten are zero in the output and
    in the gradients."""
    args = flash_attn_4_args(source, convention)
    _check_causal(convention, causal)
    _check_thd(q, k, v, args["max_seqlen_q"])
    from flash_attn.cute import flash_attn_varlen_func

    if convention == "graph":
        return _first(flash_attn_varlen_func(q, k, v, causal=causal, **args))
    keep = computed_rows(source, convention)
    q, k, v = (KeepRows.apply(x, keep) for x in (q, k, v))
    out = _first(flash_attn_varlen_func(q, k, v, causal=causal, **args))
    return KeepRows.apply(out, keep)


def _first(out):
    """The output of a kernel that may also return its softmax statistics."""
    return out[0] if isinstance(out, tuple) else out


# cuDNN's SDPA backward on ragged THD rows (the graph CudnnAttention builds)
# at head_dim > 128, as measured against fp64 on an H100: cuDNN 9.14.0 gave
# dq, dk, dv off by 40%, 34% and 13% of their scale at head_dim 256 (the
# forward right), 9.19.0 right on the same inputs; head_dim 64 and 128 were
# right on both (bench/cudnn_ragged_sdpa.py). The releases between were not
# checked, so below this one head_dim > 128 is refused.
CUDNN_LARGE_HEAD_DIM_RELEASE = (9, 19, 0)


def _loaded_cudnn() -> list:
    """The folders of the libcudnn files mapped into this process (Linux),
    where two copies of cuDNN can hide."""
    import os
    import re

    try:
        with open("/proc/self/maps") as f:
            paths = set(re.findall(r"\S*/libcudnn\S*\.so\S*", f.read()))
    except OSError:
        return []
    return sorted({os.path.dirname(os.path.realpath(p)) for p in paths})


def _cudnn_wheel_folder() -> Optional[str]:
    """The nvidia-cudnn wheel's folder (PyTorch's cuDNN), if installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia.cudnn")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return locations[0] if locations else None


def cudnn_refusal(head_dim: int) -> Optional[str]:
    """Why CudnnAttention refuses head_dim with the cuDNN this process runs
    (the one cuDNN's frontend reports), or None: head_dim > 128 below
    CUDNN_LARGE_HEAD_DIM_RELEASE, whose backward gave wrong gradients. An
    older cuDNN is often not PyTorch's own but one another library loaded
    first: TransformerEngine loads the system's libcudnn (transformer_engine/
    common/__init__.py, _load_cuda_library), and the nvidia-cudnn wheel's
    libcudnn then runs with the older one's engines (measured: CUDNN_PATH
    naming the wheel's folder does not stop it). Imports cudnn."""
    head_dim = _check_int(head_dim, "head_dim")
    import cudnn

    version = int(cudnn.backend_version())
    release = (version // 10000, version // 100 % 100, version % 100)
    if head_dim <= 128 or release >= CUDNN_LARGE_HEAD_DIM_RELEASE:
        return None
    wanted = ".".join(map(str, CUDNN_LARGE_HEAD_DIM_RELEASE))
    folders = _loaded_cudnn()
    wheel = _cudnn_wheel_folder()
    others = [f for f in folders if not (wheel and f.startswith(wheel))]
    where = (f"; besides PyTorch's ({wheel}) another copy is loaded from "
             f"{', '.join(others)}, which TransformerEngine loads ahead of it"
             if wheel and others and len(folders) > 1 else
             f" (libcudnn loaded from {', '.join(folders) or 'unknown folders'})")
    return (f"cuDNN attention at head_dim {head_dim} needs cuDNN >= {wanted}: this process "
            f"runs cuDNN {cudnn.backend_version_string()}{where}. Its SDPA backward on ragged "
            f"rows gave wrong gradients at head_dim 256 (9.14.0: dq off by 40% of its scale; "
            f"bench/cudnn_ragged_sdpa.py checks a cuDNN). Make cuDNN >= {wanted} the only "
            f"one the process can load (upgrade or remove the older one), or use head_dim "
            f"<= 128 or another attention consumer")


class CudnnAttention:
    """cuDNN's SDPA (nvidia-cudnn-frontend) on the step's rows, forward and
    backward, the graph TransformerEngine builds for THD: ragged q/k/v/o,
    padding mask with seq_len_q/kv, causal. RuntimeError where
    cudnn_refusal(head_dim) names a reason (a cuDNN release whose backward
    gave wrong gradients at that head_dim). Built for one (heads, head_dim,
    N, C*cp) on the first call; capturable after that (the workspace is
    static; call once outside a capture first). Output and
    gradients are allocated zeroed, so rows cuDNN does not write are 0."""

    def __init__(self, heads: int, head_dim: int, N: int, rows: int, *,
                 kv_heads: Optional[int] = None, convention: str = "compact",
                 causal: bool = True, dtype=None, device=None):
        import cudnn

        refusal = cudnn_refusal(head_dim)
        if refusal:
            raise RuntimeError(refusal)
        self.cudnn = cudnn
        self.heads, self.head_dim, self.N, self.rows = heads, head_dim, N, rows
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.convention = _check_convention("cudnn", convention)
        _check_causal(convention, causal)
        self.causal, self.dtype = causal, dtype or torch.bfloat16
        self.device = torch.device(device or torch.cuda.current_device())
        self.scale = 1.0 / math.sqrt(head_dim)
        self.handle = cudnn.create_handle()
        self._fwd = self._bwd = None

    def _types(self):
        cudnn = self.cudnn
        io = {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}
        if self.dtype not in io:
            raise ValueError(f"cuDNN's SDPA takes bfloat16 or float16; got {self.dtype}")
        return io[self.dtype]

    def _graph(self):
        cudnn = self.cudnn
        return cudnn.pygraph(io_data_type=self._types(),
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)

    def _layout(self, heads: int) -> dict:
        """[N, heads, C*cp, head_dim] over THD rows: a row holds every head."""
        N, S, d = self.N, self.rows, self.head_dim
        return dict(dim=[N, heads, S, d], stride=[S * heads * d, d, heads * d, 1])

    def _tensors(self, g, names):
        cudnn = self.cudnn
        N = self.N
        t = {}
        for name in names:
            h = self.kv_heads if name in ("k", "v", "dk", "dv") else self.heads
            t[name] = g.tensor(name=name, **self._layout(h), data_type=self._types())
        for name in ("off_q", "off_kv"):
            t[name] = g.tensor(name=name, dim=[N + 1, 1, 1, 1], stride=[1, 1, 1, 1],
                               data_type=cudnn.data_type.INT64)
        t["seq_len"] = g.tensor(name="seq_len", dim=[N, 1, 1, 1], stride=[1, 1, 1, 1],
                                data_type=cudnn.data_type.INT32)
        return t

    def _finish(self, g):
        """The build steps of every cuDNN graph."""
        heuristics = self.cudnn.heur_mode
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([heuristics.A, heuristics.FALLBACK])
        g.check_support()
        g.build_plans()

    def _build(self):
        cudnn = self.cudnn
        N, S = self.N, self.rows
        g = self._graph()
        t = self._tensors(g, ("q", "k", "v"))
        for name, off in (("q", "off_q"), ("k", "off_kv"), ("v", "off_kv")):
            t[name].set_ragged_offset(t[off])
        o, stats = g.sdpa(name="sdpa", q=t["q"], k=t["k"], v=t["v"], generate_stats=True,
                          attn_scale=self.scale, use_padding_mask=True,
                          seq_len_q=t["seq_len"], seq_len_kv=t["seq_len"],
                          use_causal_mask=self.causal)
        h = self.heads
        layout = self._layout(h)
        o.set_output(True).set_dim(layout["dim"]).set_stride(layout["stride"])
        o.set_ragged_offset(t["off_q"])
        stats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
        self._finish(g)
        self._fwd = (g, t, o, stats)

        g = self._graph()
        b = self._tensors(g, ("q", "k", "v", "o", "do"))
        stats_in = g.tensor(name="stats", dim=[N, h, S, 1], stride=[h * S, S, 1, 1],
                            data_type=cudnn.data_type.FLOAT)
        for name, off in (("q", "off_q"), ("k", "off_kv"), ("v", "off_kv"), ("o", "off_q"),
                          ("do", "off_q")):
            b[name].set_ragged_offset(b[off])
        dq, dk, dv = g.sdpa_backward(name="sdpa_backward", q=b["q"], k=b["k"], v=b["v"],
                                     o=b["o"], dO=b["do"], stats=stats_in,
                                     attn_scale=self.scale, use_padding_mask=True,
                                     seq_len_q=b["seq_len"], seq_len_kv=b["seq_len"],
                                     max_total_seq_len_q=S, max_total_seq_len_kv=S,
                                     use_causal_mask=self.causal)
        for grad, name, heads in ((dq, "off_q", h), (dk, "off_kv", self.kv_heads),
                                  (dv, "off_kv", self.kv_heads)):
            layout = self._layout(heads)
            grad.set_output(True).set_dim(layout["dim"]).set_stride(layout["stride"])
            grad.set_ragged_offset(b[name])
        self._finish(g)
        self._bwd = (g, b, stats_in, dq, dk, dv)
        size = max(self._fwd[0].get_workspace_size(), g.get_workspace_size(), 1)
        self.workspace = torch.empty(size, dtype=torch.uint8, device=self.device)

    def _execute(self, g, pack):
        self.cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream().cuda_stream)
        g.execute(pack, self.workspace, handle=self.handle)

    def __call__(self, q, k, v, source):
        args = cudnn_args(source, self.heads, self.head_dim, self.kv_heads, self.convention)
        if args["batch"] != self.N or args["max_seqlen"] != self.rows:
            raise ValueError(f"this CudnnAttention was built for N = {self.N}, C*cp = {self.rows}; "
                             f"the step has N = {args['batch']}, C*cp = {args['max_seqlen']}")
        _check_thd(q, k, v, self.rows)
        if self._fwd is None:
            self._build()
        return _CudnnFunction.apply(q, k, v, args["ragged_offset_q"], args["ragged_offset_kv"],
                                    args["seq_len_q"], self)


class _CudnnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, off_q, off_kv, seq_len, attention):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        g, t, o_t, stats_t = attention._fwd
        out = torch.zeros_like(q)
        stats = torch.empty(attention.N, attention.heads, attention.rows, 1,
                            dtype=torch.float32, device=q.device)
        attention._execute(g, {t["q"]: q, t["k"]: k, t["v"]: v, t["off_q"]: off_q,
                               t["off_kv"]: off_kv, t["seq_len"]: seq_len, o_t: out,
                               stats_t: stats})
        ctx.save_for_backward(q, k, v, out, stats, off_q, off_kv, seq_len)
        ctx.attention = attention
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, stats, off_q, off_kv, seq_len = ctx.saved_tensors
        attention = ctx.attention
        g, b, stats_t, dq_t, dk_t, dv_t = attention._bwd
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        attention._execute(g, {b["q"]: q, b["k"]: k, b["v"]: v, b["o"]: out,
                               b["do"]: grad.contiguous(), stats_t: stats, b["off_q"]: off_q,
                               b["off_kv"]: off_kv, b["seq_len"]: seq_len, dq_t: dq, dk_t: dk,
                               dv_t: dv})
        return dq, dk, dv, None, None, None, None


class FlashInferAttention:
    """FlashInfer's ragged prefill (flashinfer-python), forward only (the
    library has no backward), in its CUDA-graph mode: the wrapper reads the
    step's own padded-offset buffer (given as its indptr buffer), so a
    captured graph of step + attention replays with the new offsets; the
    plan, which FlashInfer computes on the host, takes the host offsets
    (`host_padded_offsets`) and must run before each replay, outside the
    capture.

    FlashInfer's plan writes its schedule into a page-locked buffer and
    copies it to the device on the stream; a second plan before that copy
    has run would overwrite the first's schedule. `plan` therefore waits for
    the previous plan's copy (an event, not a stream synchronisation), which
    lets the host run one microbatch ahead of the device."""

    def __init__(self, source, heads: int, head_dim: int, *, kv_heads: Optional[int] = None,
                 causal: bool = True, dtype=None, backend: str = "fa2",
                 workspace_bytes: int = 128 << 20):
        import flashinfer

        _check_causal("graph", causal)
        padded, _, rows = _metadata(source, "FlashInferAttention")
        self.rows, self.N = rows, padded.numel() - 1
        self.heads, self.head_dim = heads, head_dim
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.causal, self.dtype = causal, dtype or torch.bfloat16
        self.workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device=padded.device)
        self.wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(
            self.workspace, "NHD", use_cuda_graph=True, qo_indptr_buf=padded,
            kv_indptr_buf=padded, backend=backend)
        self._indptr = padded
        self._host = torch.empty(self.N + 1, dtype=torch.int32, pin_memory=True)
        self._planned = torch.cuda.Event()

    def plan(self, host_offsets) -> None:
        """Plans the next run on the host from the step's padded offsets as the
        host knows them (host_padded_offsets); nothing is read from the device."""
        host = np.asarray(host_offsets, dtype=np.int32)
        if host.shape != (self.N + 1,):
            raise ValueError(f"host_offsets must have N+1 = {self.N + 1} entries; got {host.shape}")
        self._planned.synchronize()
        self._host.copy_(torch.from_numpy(host))
        self.wrapper.plan(self._indptr, self._indptr, self.heads, self.kv_heads, self.head_dim,
                          causal=self.causal, q_data_type=self.dtype,
                          qo_indptr_cpu=self._host, kv_indptr_cpu=self._host)
        self._planned.record()

    def __call__(self, q, k, v):
        _check_thd(q, k, v, self.rows)
        return self.wrapper.run(q, k, v)
