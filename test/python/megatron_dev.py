"""The reference framework's own batch function, run beside thdc's.

megatron-core `dev` (NVIDIA/Megatron-LM d48bd6be0a) holds the reference
framework's per-microbatch THD preparation:
`get_batch_on_this_rank_for_sequence_packing` in
megatron/core/datasets/data_schedule.py:564-874, with `get_cp_slice_for_thd`
(data_schedule_utils.py:26-100) and `pad_sequence_for_thd`
(packed_seq_params.py:446-700). This module imports that code from a
checkout (`THDC_MEGATRON_DEV`, a folder holding the `megatron` package) and
calls it for one simulated rank (tp = 1, any cp rank, any pipeline stage) on
the CPU or a GPU, changing nothing in it but what a single process lacks:

- the process groups are stand-ins with `rank()` and `size()` (all the
  function reads of them at tp = 1), and the TP broadcasts of a group of one
  rank are the identity they are;
- `parallel_state`'s CP size and rank, which `pad_sequence_for_thd` reads
  when the params carry no CP group (`_resolve_thd_cp_geometry`,
  packed_seq_params.py:421-443), are the simulated rank's;
- on the CPU, `torch.cuda.current_device` is the CPU, and TransformerEngine's
  zigzag index (`get_thd_partitioned_indices`, the only TE call on this
  path) is `te_partitioned_indices`, a restatement of TE's kernel with TE's
  own refusals (TE common/fused_attn/context_parallel.cu:83-106 and the
  NVTE_CHECKs of thd_get_partitioned_indices); with TransformerEngine
  installed and a GPU, TE's own function runs.

A call that dev refuses (an assert, TE's check) returns the exception in
place of the 7-tuple: thdc empties such a microbatch instead (status bits),
and the comparison says so.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from types import SimpleNamespace

import numpy as np

DEV_COMMIT = "d48bd6be0a"


class LocalGroup:
    """A process group's rank and size and nothing else: what
    get_batch_on_this_rank_for_sequence_packing reads of a group when it
    needs no collective (tp = 1), for one process standing in for a rank."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


class TERefusal(RuntimeError):
    """What TransformerEngine's thd_get_partitioned_indices refuses."""


def te_partitioned_indices(cu_seqlens, total_tokens, cp, rank):
    """TE's zigzag partition index of CP rank `rank` over `total_tokens`
    rows with padded offsets `cu_seqlens` (int32, 1-D), as a torch int64
    tensor on the offsets' device: sequence s of padded length L gives rank
    r its chunks r and 2cp-1-r of L/(2cp) rows. TE's checks: cu int32, 1-D, at least two
    entries, 0 <= rank < cp, total > 0 and divisible by 2cp, and every
    offset divisible by 2cp (a device assert in TE's kernel)."""
    import torch

    cu = cu_seqlens.detach().to("cpu").numpy().astype(np.int64)
    if cu_seqlens.dtype != torch.int32 or cu.ndim != 1 or cu.size < 2:
        raise TERefusal(f"cu_seqlens must be int32, 1-D, >= 2 entries; got {cu_seqlens.dtype}, "
                        f"shape {tuple(cu_seqlens.shape)}")
    if not 0 <= rank < cp:
        raise TERefusal(f"rank {rank} outside [0, {cp})")
    if total_tokens <= 0 or total_tokens % (2 * cp):
        raise TERefusal(f"total_tokens {total_tokens} must be > 0 and divisible by 2*cp")
    if (cu % (2 * cp)).any():
        raise TERefusal(f"an offset of {cu.tolist()} is not divisible by 2*cp = {2 * cp}")
    if total_tokens != cu[-1]:
        # Rows past the last offset: only the metadata-only length probe of
        # pad_sequence_for_thd asks for them, which this path never takes.
        raise NotImplementedError(f"total_tokens {total_tokens} != the last offset {cu[-1]}")
    rows = []
    for start, end in zip(cu[:-1], cu[1:]):
        half = int(end - start) // (2 * cp)
        rows += range(start + rank * half, start + (rank + 1) * half)
        rows += range(start + (2 * cp - 1 - rank) * half, start + (2 * cp - rank) * half)
    return torch.tensor(rows, dtype=torch.int64, device=cu_seqlens.device)


def dev_path():
    """The checkout named by THDC_MEGATRON_DEV, or None."""
    path = os.environ.get("THDC_MEGATRON_DEV")
    if path and os.path.isdir(os.path.join(path, "megatron", "core")):
        return path
    return None


def load(path=None):
    """dev's data_schedule module, imported from `path` (default
    THDC_MEGATRON_DEV). Raises ImportError naming what is missing."""
    path = path or dev_path()
    if path is None:
        raise ImportError("megatron-core dev is not available: set THDC_MEGATRON_DEV to a "
                          f"checkout of NVIDIA/Megatron-LM at {DEV_COMMIT}")
    if path not in sys.path:
        sys.path.insert(0, path)
    module = importlib.import_module("megatron.core.datasets.data_schedule")
    origin = os.path.abspath(module.__file__)
    if not origin.startswith(os.path.abspath(path)):
        raise ImportError(f"megatron.core was imported from {origin}, not from {path}: "
                          "another megatron-core is installed first on sys.path")
    return module


def has_te_index():
    """Whether TransformerEngine's own get_thd_partitioned_indices is there."""
    try:
        from megatron.core.extensions import transformer_engine as te_ext
        import transformer_engine_torch  # noqa: F401
    except Exception:
        return False
    return getattr(te_ext, "HAVE_TE", False)


@contextlib.contextmanager
def simulated_rank(module, *, cp, cp_rank, device, te_index):
    """Patches what one process lacks (module docstring) while the function
    runs, and restores it after."""
    import torch

    utils = sys.modules["megatron.core.datasets.data_schedule_utils"]
    packed = sys.modules["megatron.core.packed_seq_params"]
    parallel_state = module.parallel_state
    saved = [(module, "broadcast_tensor", module.broadcast_tensor),
             (module.torch.distributed, "get_process_group_ranks",
              module.torch.distributed.get_process_group_ranks),
             (parallel_state, "get_context_parallel_world_size",
              parallel_state.get_context_parallel_world_size),
             (parallel_state, "get_context_parallel_rank", parallel_state.get_context_parallel_rank),
             (utils, "get_thd_partitioned_indices", utils.get_thd_partitioned_indices),
             (torch.cuda, "current_device", torch.cuda.current_device)]
    te_ext = sys.modules.get("megatron.core.extensions.transformer_engine")

    def broadcast(item, src_rank, group):
        if group.size() != 1:
            raise NotImplementedError("a TP group of more than one rank needs processes")

    module.broadcast_tensor = broadcast
    module.torch.distributed.get_process_group_ranks = lambda group: [0]
    parallel_state.get_context_parallel_world_size = lambda: cp
    parallel_state.get_context_parallel_rank = lambda: cp_rank
    if not te_index:
        utils.get_thd_partitioned_indices = te_partitioned_indices
        if te_ext is not None:
            saved.append((te_ext, "get_thd_partitioned_indices",
                          te_ext.get_thd_partitioned_indices))
            te_ext.get_thd_partitioned_indices = te_partitioned_indices
    if device == "cpu":
        torch.cuda.current_device = lambda: "cpu"
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        del packed


def config(C, N, *, graphs=True, cp_mode="zigzag", cp=1):
    """The config fields dev's function reads, graph mode by default
    (pad_packed_seq_alignment "max", cuda_graph_impl "transformer_engine")."""
    return SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                           pad_packed_seq_alignment="max" if graphs else None,
                           cuda_graph_impl="transformer_engine" if graphs else "none",
                           cp_partition_mode=cp_mode, context_parallel_size=cp,
                           thd_tail_padding_policy=None)


def call(module, batch, *, cfg, cp, cp_rank, pp=1, pp_rank=0, form=None, device="cpu",
         te_index=False):
    """dev's function on `batch` (a dict as dev's packing loader yields it)
    for one rank; the 7-tuple, or the exception dev (or TE) raised."""
    pg = SimpleNamespace(tp=LocalGroup(0, 1), cp=LocalGroup(cp_rank, cp),
                         pp=LocalGroup(pp_rank, pp))
    with simulated_rank(module, cp=cp, cp_rank=cp_rank, device=device, te_index=te_index):
        try:
            return module.get_batch_on_this_rank_for_sequence_packing(
                iter([batch]), pg_collection=pg, config=cfg, **(form or {}))
        except (AssertionError, RuntimeError, TERefusal, ValueError) as error:
            return error


# The fields of the 7-tuple, in order.
TUPLE = ("tokens", "labels", "loss_mask", "attention_mask", "position_ids",
         "packed_seq_params", "padding_mask")
PARAMS = ("qkv_format", "cu_seqlens_q", "cu_seqlens_kv", "cu_seqlens_q_padded",
          "cu_seqlens_kv_padded", "max_seqlen_q", "max_seqlen_kv", "local_cp_size",
          "cp_group", "total_tokens", "pad_between_seqs", "cp_partition_mode")


def flatten(result):
    """A 7-tuple as plain JSON-able values: tensors as lists, the params'
    fields by name (PARAMS), None kept; an exception as {"error": text}."""
    if isinstance(result, BaseException):
        return {"error": f"{type(result).__name__}: {result}"}

    def value(v):
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if hasattr(v, "detach"):
            return v.detach().to("cpu").reshape(-1).tolist()
        return repr(v)

    out = {name: value(v) for name, v in zip(TUPLE, result) if name != "packed_seq_params"}
    params = result[TUPLE.index("packed_seq_params")]
    out["packed_seq_params"] = {f: value(getattr(params, f, None)) for f in PARAMS}
    return out


# The data keys of the 7-tuple, in its order.
DATA = ("tokens", "labels", "loss_mask", "position_ids")


def differences(got: dict, dev: dict, *, layout_field: bool = True) -> list:
    """What of a flattened 7-tuple `got` (thdc's) differs from dev's, in
    words: each data key, attention_mask, padding_mask, and each
    PackedSeqParams field dev gives (cp_partition_mode only where the
    installed class has it: layout_field)."""
    bad = [f"{name}: thdc {got[name]} != dev {dev[name]}"
           for name in DATA + ("attention_mask", "padding_mask") if got[name] != dev[name]]
    for field, value in dev["packed_seq_params"].items():
        if field == "cp_partition_mode" and not layout_field:
            continue
        mine = got["packed_seq_params"][field]
        if mine != value:
            bad.append(f"packed_seq_params.{field}: thdc {mine} != dev {value}")
    return bad


def write_golden(path: str, what: str, generator: str, seed: int, C: int, N: int,
                 results: list) -> None:
    """A golden file of dev's outputs (`results`, each with its case, layout
    and dev's flattened outputs or error) for `what` (the path dev took),
    written by `generator`; says how many cases dev refused."""
    import json

    with open(path, "w") as f:
        json.dump(dict(source=f"megatron-core dev {DEV_COMMIT}, "
                              f"get_batch_on_this_rank_for_sequence_packing, {what}, "
                              f"run by {generator}",
                       seed=seed, C=C, N=N, cases=results), f, separators=(",", ":"))
    errors = sum("error" in r["dev"] for r in results)
    print(f"{len(results)} cases, {errors} refused by dev -> {path}")
