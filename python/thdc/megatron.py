"""A drop-in for the reference framework's per-microbatch THD step in CUDA-graph
mode (Megatron-LM with TransformerEngine), on static buffers.

    step = thdc.megatron.GraphStep(C=32768, N=64, cp=2, cp_rank=rank)
    batch, params = step(tokens, labels, loss_mask, position_ids,
                         cu_seqlens, cu_seqlens_padded)
    # batch: tokens, labels, loss_mask, position_ids, padding_mask, [1, C]
    # params: megatron-core's PackedSeqParams (thdc's own class without it)

One fused kernel does the padding mask, sanitises padded slots, slices the
rank's zigzag CP chunks, pads the rank's rows to C with a dummy sequence,
pads the cu arrays to N+1 entries and computes `seq_idx`; nothing waits for
the host, so `step.run()` (the kernel on the static buffers) can be captured
in a CUDA graph and replayed after new data is copied into `step.inputs`.

The outputs map onto TransformerEngine's attention arguments as follows:

    argument                                 "graph" (default)   "compact"
    cu_seqlens_q, cu_seqlens_kv              padded offsets      valid offsets
    cu_seqlens_q_padded, cu_seqlens_kv_padded  padded offsets    padded offsets
    max_seqlen_q, max_seqlen_kv              C*cp                C*cp
    pad_between_seqs                         False               True
    qkv_format                               "thd"               "thd"

"graph" is the reference framework's convention in graph mode: every padding
row is attended as a token of its sequence, which leaves real tokens
unaffected because attention is causal and the padding follows them.
"compact" gives attention the valid lengths and needs a backend that supports
`pad_between_seqs` (cuDNN, FlashAttention 3).

Offsets are global (all CP ranks); every array has N+1 entries, the last ones
repeating the total; the dummy sequence covers the rows after the real ones.

A microbatch whose metadata is invalid (see `thd.validate`: too many
sequences, over capacity, lengths not divisible by 2*cp, decreasing offsets,
valid longer than padded, a bad rank) sets bits in `step.outputs.status`, and
its outputs are those of an empty microbatch: a loss mask of zeros and one
dummy sequence, so it contributes nothing to the loss or the gradients.
Reading `status` on the host would synchronise; instead fold it into a
device flag with `step.accumulate_status(flag)` and look at the flag where
the training loop synchronises anyway (e.g. with the loss, at the end of the
step), skipping or logging the batch there. `step.check_async()` is the
strict alternative: a device-side assert, which ends the process on a bad
microbatch.
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Optional, Tuple

import torch

import thdc

try:  # megatron-core's class when it is installed, else the same fields here
    from megatron.core.packed_seq_params import PackedSeqParams

    USING_MEGATRON_CORE = True
except Exception:  # ImportError, or a megatron-core that fails to import
    USING_MEGATRON_CORE = False

    @dataclasses.dataclass
    class PackedSeqParams:  # type: ignore[no-redef]
        """The fields of megatron-core's PackedSeqParams that THD attention reads."""

        qkv_format: Optional[str] = None
        cu_seqlens_q: Optional[torch.Tensor] = None
        cu_seqlens_kv: Optional[torch.Tensor] = None
        cu_seqlens_q_padded: Optional[torch.Tensor] = None
        cu_seqlens_kv_padded: Optional[torch.Tensor] = None
        max_seqlen_q: Optional[int] = None
        max_seqlen_kv: Optional[int] = None
        local_cp_size: Optional[int] = None
        cp_group: Optional[object] = None
        total_tokens: Optional[int] = None
        seq_idx: Optional[torch.Tensor] = None
        tokens_per_sample: Optional[int] = None
        pad_between_seqs: Optional[bool] = None


PIPELINE = "megatron_step"
CONVENTIONS = ("graph", "compact")
_DATA_KEYS = ("tokens", "labels", "position_ids", "loss_mask")


class GraphStep:
    """The THD step of one microbatch for one CP rank, on static buffers.

    C: rows per CP rank (the graph's static sequence length); N: sequence
    capacity including the dummy (cu arrays have N+1 entries, at most N-1
    real sequences); cp, cp_rank: the context-parallel size and this rank.
    bundle: a bundle of `thdc/pipelines/megatron_step.mlir` compiled for these
    parameters (needed where thdc has no JIT); else the pipeline is compiled
    through the JIT. device: the CUDA device (default: the current one).
    convention: "graph" or "compact" (see the module's documentation).
    """

    def __init__(
        self,
        C: int,
        N: int,
        cp: int = 1,
        cp_rank: int = 0,
        *,
        bundle: Optional[str] = None,
        device=None,
        convention: str = "graph",
        cache_dir: str = "",
    ):
        C, N = thdc._check_int(C, "C"), thdc._check_int(N, "N")
        cp, cp_rank = thdc._check_int(cp, "cp"), thdc._check_int(cp_rank, "cp_rank")
        if bundle is not None:
            bundle = thdc._check_path(bundle, "bundle")
        thdc._check_str(convention, "convention")
        thdc._check_str(cache_dir, "cache_dir")
        if convention not in CONVENTIONS:
            raise ValueError(f"convention must be one of {CONVENTIONS}; got {convention!r}")
        if not 0 <= cp_rank < cp:
            raise ValueError(f"cp_rank must be in [0, {cp}); got {cp_rank}")
        if not (device is None or isinstance(device, (str, torch.device))):
            try:
                device = thdc._check_int(device, "device")
            except TypeError:
                raise TypeError("device must be a torch.device, a str such as 'cuda:0' or "
                                f"an int ordinal; got {type(device).__name__}") from None
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = torch.device(device)
        if self.device.type != "cuda" or self.device.index is None:
            raise ValueError(f"device must be a CUDA device with an index; got {device}")
        self.C, self.N, self.cp, self.cp_rank = C, N, cp, cp_rank
        self.convention = convention
        params = {"C": self.C, "cp": self.cp, "N": self.N}
        if bundle is not None:
            self.kernel = thdc.load(bundle, backend="cuda", cache_dir=cache_dir,
                                    device=self.device.index)
        else:
            with torch.cuda.device(self.device):
                self.kernel = thdc.compile(thdc.pipeline_path(PIPELINE), params,
                                           backend="cuda", cache_dir=cache_dir)
        compiled = {k: self.kernel.params.get(k) for k in params}
        if compiled != params:
            raise ValueError(f"the bundle was compiled for {compiled}, not {params}")
        self.kernel.prepare(self.device.index)

        spec = thdc.signature(self.kernel)
        make = lambda a: torch.zeros(a.shape, dtype=getattr(torch, a.dtype), device=self.device)
        self.inputs = SimpleNamespace(**{a.name: make(a) for a in spec if a.direction == "input"})
        self.inputs.cp_rank.fill_(self.cp_rank)
        self._input_list = [getattr(self.inputs, a.name) for a in spec if a.direction == "input"]
        self._output_list = [make(a) for a in spec if a.direction == "output"]
        # A first run on the zeroed inputs (an empty microbatch) names the
        # outputs and leaves them in a valid state.
        self.outputs = self.kernel(*self._input_list, out=self._output_list,
                                   device=self.device.index)
        torch.cuda.synchronize(self.device)

        out, rows = self.outputs, (1, self.C)
        self.batch = {
            "tokens": out.tokens.view(rows),
            "labels": out.labels.view(rows),
            "loss_mask": out.loss_mask.view(rows),
            "position_ids": out.position_ids.view(rows),
            "padding_mask": out.padding_mask.view(rows),
        }
        padded, valid = out.cu_seqlens_padded, out.cu_seqlens
        cu = padded if convention == "graph" else valid
        self.packed_seq_params = PackedSeqParams(
            qkv_format="thd",
            cu_seqlens_q=cu,
            cu_seqlens_kv=cu,
            cu_seqlens_q_padded=padded,
            cu_seqlens_kv_padded=padded,
            max_seqlen_q=self.C * self.cp,
            max_seqlen_kv=self.C * self.cp,
            seq_idx=out.seq_idx.view(rows) if self.cp == 1 else None,
            pad_between_seqs=convention == "compact",
        )

    def run(self, stream=None) -> Tuple[dict, "PackedSeqParams"]:
        """Launches the step on the static inputs (capturable: no allocation,
        no synchronisation) and returns the static batch and parameters."""
        self.kernel(*self._input_list, out=self._output_list, stream=stream,
                    device=self.device.index)
        return self.batch, self.packed_seq_params

    def load_inputs(self, tokens, labels, loss_mask, position_ids,
                    cu_seqlens, cu_seqlens_padded, num_seqs=None) -> None:
        """Copies one packed microbatch into the static inputs, on the current
        stream. Data tensors hold up to C*cp rows ([T] or [1, T]); cu arrays
        up to N+1 entries. num_seqs (int or a device tensor) defaults to
        len(cu_seqlens) - 1 and is required for cu arrays of N+1 entries that
        end in unused slots. Only shapes are read on the host."""
        data = {"tokens": tokens, "labels": labels, "loss_mask": loss_mask,
                "position_ids": position_ids}
        for name, value in (*data.items(), ("cu_seqlens", cu_seqlens),
                            ("cu_seqlens_padded", cu_seqlens_padded)):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
        if not (num_seqs is None or isinstance(num_seqs, torch.Tensor)):
            num_seqs = thdc._check_int(num_seqs, "num_seqs")
        capacity = self.C * self.cp
        for name, value in data.items():
            rows = value.numel()
            if rows > capacity:
                raise ValueError(f"{name} has {rows} rows; the step holds C*cp = {capacity}")
            getattr(self.inputs, name)[:rows].copy_(value.reshape(-1), non_blocking=True)
        entries = None
        for name, value in (("cu_seqlens", cu_seqlens), ("cu_seqlens_padded", cu_seqlens_padded)):
            if value.numel() > self.N + 1:
                raise ValueError(f"{name} has {value.numel()} entries; the step holds N+1 = {self.N + 1}")
            if entries is not None and value.numel() != entries:
                raise ValueError("cu_seqlens and cu_seqlens_padded differ in length")
            entries = value.numel()
            getattr(self.inputs, name)[:entries].copy_(value.reshape(-1), non_blocking=True)
        if num_seqs is None:
            if entries == self.N + 1:
                raise ValueError("cu arrays of N+1 entries need num_seqs")
            self.inputs.num_seqs.fill_(entries - 1)
        elif isinstance(num_seqs, torch.Tensor):
            self.inputs.num_seqs.copy_(num_seqs.reshape(-1)[:1], non_blocking=True)
        else:
            self.inputs.num_seqs.fill_(num_seqs)

    def __call__(self, tokens, labels, loss_mask, position_ids, cu_seqlens,
                 cu_seqlens_padded, num_seqs=None, stream=None):
        """load_inputs, then run."""
        self.load_inputs(tokens, labels, loss_mask, position_ids, cu_seqlens,
                         cu_seqlens_padded, num_seqs)
        return self.run(stream)

    @property
    def status(self) -> torch.Tensor:
        """The last run's status bits, on the device (0: valid)."""
        return self.outputs.status

    def accumulate_status(self, flag: torch.Tensor) -> torch.Tensor:
        """flag |= status, on the device (capturable); returns flag."""
        return flag.bitwise_or_(self.outputs.status)

    def describe_status(self) -> str:
        """The last run's status bits by name ("ok" when valid); reads the
        status back, so it synchronises: for logging after a failure."""
        from . import describe_status
        return describe_status(int(self.outputs.status[0].item()))

    def check_async(self) -> None:
        """A device-side assert that the last microbatch was valid; it does not
        synchronise, but a failure ends the process's CUDA context."""
        torch._assert_async(self.outputs.status[0] == 0,
                            "thdc: invalid THD microbatch metadata (see status bits)")
