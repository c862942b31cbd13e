#!/usr/bin/env python3
"""PyTorch eager baseline: one microbatch of megatron_graph_step, run the way the
reference framework (Megatron-LM PR #4359 with TransformerEngine) runs it.

The op sequence and host syncs follow the THD semantics specification (S5, S6,
S7, S10 and the "Host syncs / data-dependent shapes" table):

  S5   mask length from cup[-1].item(); searchsorted-based padding mask
  S6   masked_fill_ of tokens, labels, position_ids, loss_mask (in place)
  S7   cup[-1].item(); TE-style partition indices; index_select per key
       (skipped when cp == 1, as in the framework)
  TP   broadcast metadata: len(cu), Tl and max_seqlen read with .item()
  S10  graph mode (target C, N+1 cu entries, dummy sequence): cup[-1].item(),
       longest sequence .item(), F.pad / torch.cat tail padding, dummy
       appended with torch.cat, last padded offset read with .item(), cu
       arrays padded with torch.cat + repeat

That is 8 host syncs per microbatch (7 when cp == 1, where S7 is a no-op).

eager_pack_step is the same step from a pool of samples, the outputs of
examples/pack_microbatch.mlir: S1 + S4 first (each chosen sample sliced
from the pool and padded to its aligned length, the pack joined with
torch.cat, cu_seqlens and cu_seqlens_padded from cumsum), then eager_step.
TE computes the partition indices in one CUDA kernel; so does this file when
CuPy is installed (a RawKernel launched on torch's current stream, one
thread per local row with TE's binary search), otherwise a dozen torch ops
with the same semantics (--index-impl chooses). The outputs equal reference::megatronGraphStep's for valid
microbatches; bad metadata is not handled (the framework asserts), and
`status` is always 0.

Usage (on a machine with PyTorch and a GPU):
  eager.py --selftest                      the golden running example of docs/semantics.md
                                           (eager_step, and eager_pack_step from a pool)
  eager.py --check FILE [FILE ...]         compare with expected outputs (JSON
                                           mapping output names to flat arrays,
                                           e.g. from handwritten_check
                                           --write-expected or thd-run --output)
  eager.py --time [--iters K] [--json OUT] per-microbatch milliseconds for every
                                           configuration and length mix
"""

import argparse
import importlib
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inputs as thd_inputs  # noqa: E402  (bench/inputs.py)
import timing  # noqa: E402  (bench/timing.py)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DATA_KEYS = ("tokens", "labels", "position_ids", "loss_mask")
OUTPUT_NAMES = ("tokens", "labels", "position_ids", "loss_mask", "padding_mask",
                "cu_seqlens_padded", "cu_seqlens", "max_seqlen", "status")


def framework_batch(mb, device="cuda"):
    """The batch the framework's get_batch receives after S4 (packing): 1-D
    buffers of exactly T = cu_seqlens_padded[n] rows, cu arrays of n+1 entries
    and max_seqlen = max(p) as an int32 0-d tensor. Built from a generator
    microbatch (bench/inputs.py) by dropping its garbage; not timed."""
    n, total = mb.num_seqs, mb.packed_length

    def tensor(values, count, dtype):
        return torch.as_tensor(values[:count], dtype=dtype).to(device)

    return {
        "tokens": tensor(mb.tokens, total, torch.int64),
        "labels": tensor(mb.labels, total, torch.int64),
        "position_ids": tensor(mb.position_ids, total, torch.int64),
        "loss_mask": tensor(mb.loss_mask, total, torch.float32),
        "cu_seqlens": tensor(mb.cu_seqlens, n + 1, torch.int32),
        "cu_seqlens_padded": tensor(mb.cu_seqlens_padded, n + 1, torch.int32),
        "max_seqlen": torch.tensor(max(mb.padded_lengths, default=0), dtype=torch.int32,
                                   device=device),
    }


def build_thd_padding_mask(cu, cup):
    """S5: True where a row of the packed buffer is padding."""
    assert cu.numel() == cup.numel(), "cu_seqlens and cu_seqlens_padded differ in length"
    total = int(cup[-1].item())  # host sync
    if total == 0:
        return torch.zeros(0, dtype=torch.bool, device=cup.device)
    if cu.numel() == 1:
        return torch.ones(total, dtype=torch.bool, device=cup.device)
    positions = torch.arange(total, dtype=cup.dtype, device=cup.device)
    seq = torch.searchsorted(cup[1:], positions, right=True)
    valid_lengths = (cu[1:] - cu[:-1]).clamp(min=0)
    return positions >= cup[seq] + valid_lengths[seq]


def sanitize_thd_padding_values(batch, mask):
    """S6: zero the padded slots of the data keys, in place."""
    for key in DATA_KEYS:
        value = batch.get(key)
        if value is None:
            continue
        assert value.dim() == 1 and value.numel() == mask.numel(), \
            f"{key} has shape {tuple(value.shape)}, the mask {tuple(mask.shape)}"
        value.masked_fill_(mask, 0)


def thd_partitioned_indices(cup, total, cp, rank, index_impl="auto"):
    """S7, TE thd_get_partitioned_indices: the rows CP rank `rank` keeps
    (chunks r and 2cp-1-r of every sequence), int32. index_impl: "te-kernel"
    (one CUDA kernel through CuPy, as TE launches one), "torch" (torch ops)
    or "auto" (the kernel when CuPy is installed)."""
    assert cup.dtype == torch.int32 and cup.dim() == 1 and cup.numel() >= 2
    assert 0 <= rank < cp and total > 0 and total % (2 * cp) == 0, \
        f"total_tokens {total} must be > 0 and divisible by 2*cp = {2 * cp}"
    if resolve_index_impl(index_impl) == "te-kernel":
        return _te_kernel_indices(cup, total, cp, rank)
    cs = torch.div(cup, cp, rounding_mode="floor")
    t = torch.arange(total // cp, dtype=torch.int32, device=cup.device)
    seq = torch.searchsorted(cs[1:], t, right=True).clamp_(max=cs.numel() - 2)
    start = cs[seq]
    half = (cs[seq + 1] - start) // 2
    k = t - start
    chunk = rank + (k >= half).to(torch.int32) * (2 * cp - 2 - 2 * rank)
    return (k + start * cp + half * chunk).to(torch.int32)


# TE's thd_partition_indices kernel, restated: one thread per local row, a
# binary search over cs = cup / cp (rows past cs[b] join the last entry).
_TE_INDEX_SOURCE = r"""
extern "C" __global__ void thd_partition_indices(
    unsigned long long cup_address, int entries, int total, int cp, int rank,
    unsigned long long out_address) {
  const int *cup = reinterpret_cast<const int *>(cup_address);
  int *out = reinterpret_cast<int *>(out_address);
  const int local = total / cp;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < local;
       t += gridDim.x * blockDim.x) {
    int lo = 1, hi = entries - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (cup[mid] / cp <= t) lo = mid + 1; else hi = mid;
    }
    const int s = lo - 1;
    const int start = cup[s] / cp;
    const int half = (cup[s + 1] / cp - start) / 2;
    const int k = t - start;
    out[t] = k + start * cp + half * (k < half ? rank : 2 * cp - 2 - rank);
  }
}
"""
_te_kernel = None
_te_streams = {}


_cupy_available = None


def resolve_index_impl(index_impl):
    """"auto" -> "te-kernel" when CuPy is importable, else "torch"."""
    global _cupy_available
    if index_impl != "auto":
        return index_impl
    if _cupy_available is None:
        try:
            importlib.import_module("cupy")
            _cupy_available = True
        except ImportError:
            _cupy_available = False
    return "te-kernel" if _cupy_available else "torch"


def _cupy_stream(cupy, torch_stream):
    """A CuPy view of torch's stream (Stream.from_external in recent CuPy,
    ExternalStream before)."""
    if hasattr(cupy.cuda.Stream, "from_external"):
        try:
            return cupy.cuda.Stream.from_external(torch_stream)
        except (TypeError, ValueError, AttributeError):
            pass
    return cupy.cuda.ExternalStream(torch_stream.cuda_stream)


def _te_kernel_indices(cup, total, cp, rank):
    import cupy
    import numpy
    global _te_kernel
    if _te_kernel is None:
        _te_kernel = cupy.RawKernel(_TE_INDEX_SOURCE, "thd_partition_indices")
    local = total // cp
    out = torch.empty(local, dtype=torch.int32, device=cup.device)
    torch_stream = torch.cuda.current_stream(cup.device)
    stream = _te_streams.get(torch_stream.cuda_stream)
    if stream is None:
        stream = _te_streams[torch_stream.cuda_stream] = _cupy_stream(cupy, torch_stream)
    threads = 256
    with stream:
        _te_kernel(((local + threads - 1) // threads,), (threads,),
                   (numpy.uint64(cup.data_ptr()), numpy.int32(cup.numel()), numpy.int32(total),
                    numpy.int32(cp), numpy.int32(rank), numpy.uint64(out.data_ptr())))
    return out


def get_cp_slice_for_thd(batch, cup, cp, rank, index_impl="auto"):
    """S7: replace every key by this CP rank's rows (no-op when cp == 1)."""
    if cp == 1:
        return batch
    total = int(cup[-1].item())  # host sync
    index = thd_partitioned_indices(cup, total, cp, rank, index_impl)
    for key, value in batch.items():
        if value is not None:
            batch[key] = value.index_select(0, index)
    return batch


def broadcast_metadata_over_tp(cu, cup, max_seqlen, cp):
    """The TP broadcast after the CP slice: sizes travel as device tensors and
    are read back with .item() (with tp = 1 the broadcasts themselves are
    no-ops, the reads are not)."""
    num_entries = torch.tensor(cu.numel(), dtype=torch.int64, device=cu.device)
    local_length = cup[-1] // cp
    return (int(num_entries.item()), int(local_length.item()),  # host syncs
            int(max_seqlen.item()))  # host sync


def pad_cu_seqlens(cu, entries):
    """S10 _pad_cu_seqlens: repeat the last offset up to `entries` entries."""
    count = cu.numel()
    assert count <= entries, \
        f"Actual num_seqs ({count - 1}) exceeds thd_max_packed_sequences ({entries - 1})"
    return torch.cat([cu, cu[-1:].repeat(entries - count)])


def pad_sequence_for_thd(batch, cu, cup, cp, target_len, max_num_seqs):
    """S10 in graph mode: pad every key to target_len local rows, append the
    dummy sequence [T, target_len*cp), pad cu arrays to max_num_seqs+1."""
    global_actual = int(cup[-1].item())  # host sync (cu_seqlens_q is cup in the PR)
    local_actual = batch["tokens"].shape[-1]
    local_target = target_len
    global_target = local_target * cp
    if cup.numel() > 1:
        longest = int((cup[1:] - cup[:-1]).max().item())  # host sync
        assert longest <= global_target, \
            f"Individual request length {longest} exceeds {global_target}"
    assert local_actual <= local_target and global_actual <= global_target, \
        "refusing to silently truncate"
    pad = local_target - local_actual
    for key in DATA_KEYS:
        batch[key] = F.pad(batch[key], (0, pad), value=0)
    old_mask = batch["padding_mask"]
    tail = torch.arange(local_target, device=old_mask.device) >= local_actual
    batch["padding_mask"] = torch.cat([old_mask, old_mask.new_ones(1, pad)], dim=-1) | tail
    if global_target > global_actual:
        dummy = global_target - global_actual
        assert cp == 1 or dummy % (2 * cp) == 0, \
            f"dummy length {dummy} is not divisible by 2*cp = {2 * cp}"
        cup = torch.cat([cup, cup.new_tensor([global_target])])
        cu = torch.cat([cu, cu[-1:] + dummy])  # compact valid coordinates
    # The framework reads the last padded offset back (.item()) when it pads
    # the cu arrays of PackedSeqParams (all four are cup under the PR).
    last = int(cup[-1].item())  # host sync
    assert last == global_target
    cup = pad_cu_seqlens(cup, max_num_seqs + 1)
    cu = pad_cu_seqlens(cu, max_num_seqs + 1)
    return batch, cu, cup, global_target


def eager_step(batch, C, cp, N, rank, index_impl="auto"):
    """One microbatch for CP rank `rank`: the outputs of megatron_graph_step
    (names as in examples/megatron_graph_step.mlir; tokens, labels,
    position_ids, loss_mask, padding_mask of C rows; cu arrays of N+1
    entries; max_seqlen and status of one entry).

    `batch` is a framework batch (framework_batch). As in the framework, S6
    sanitises its data tensors in place; the dict itself is not changed.
    index_impl: see thd_partitioned_indices."""
    batch = dict(batch)
    cu = batch.pop("cu_seqlens")
    cup = batch.pop("cu_seqlens_padded")
    max_seqlen = batch.pop("max_seqlen")

    mask = build_thd_padding_mask(cu, cup)
    sanitize_thd_padding_values(batch, mask)
    batch["padding_mask"] = mask
    batch = get_cp_slice_for_thd(batch, cup, cp, rank, index_impl)
    _, local_length, _ = broadcast_metadata_over_tp(cu, cup, max_seqlen, cp)
    for key in list(batch):
        batch[key] = batch[key].view(1, local_length)
    # S9: the PR sets all four cu fields of PackedSeqParams to cup; the valid
    # cu is carried along for the cu_seqlens output (compact dummy, as the
    # reference defines it).
    batch, cu, cup, max_seqlen_static = pad_sequence_for_thd(batch, cu, cup, cp, C, N)

    device = cup.device
    outputs = {key: batch[key].view(-1) for key in DATA_KEYS}
    outputs["padding_mask"] = batch["padding_mask"].view(-1)
    outputs["cu_seqlens_padded"] = cup
    outputs["cu_seqlens"] = cu
    outputs["max_seqlen"] = torch.tensor([max_seqlen_static], dtype=torch.int32, device=device)
    outputs["status"] = torch.zeros(1, dtype=torch.int32, device=device)
    return outputs


def pack_samples(pools, sample_offsets, sample_lengths, sample_ids, cp, pad_id=0):
    """S1 + S4 the framework's way: the framework batch (framework_batch's
    layout) of one pack. The varlen dataset gives every sample aligned to
    p = round_up(v, G) rows (G = 2*cp, or 1 when cp == 1): its tokens and
    labels right-padded with pad_id, its loss mask with 0.0, its position ids
    counting 0..p-1; the scheduler joins the pack's samples with torch.cat
    and builds cu_seqlens and cu_seqlens_padded as cumulative sums of the
    lengths.

    pools: device tensors "token_pool", "label_pool" (int64) and
    "loss_mask_pool" (float32), sample k at rows [offset, offset + v);
    sample_offsets, sample_lengths: the dataset's index (host sequences);
    sample_ids: the pack's samples in pack order (host, from the planner)."""
    device = pools["token_pool"].device
    granularity = 2 * cp if cp > 1 else 1
    parts = {key: [] for key in DATA_KEYS}
    valid, padded = [], []
    for sample in sample_ids:
        start, length = int(sample_offsets[sample]), int(sample_lengths[sample])
        aligned = -(-length // granularity) * granularity
        rows = slice(start, start + length)
        tail = (0, aligned - length)
        parts["tokens"].append(F.pad(pools["token_pool"][rows], tail, value=pad_id))
        parts["labels"].append(F.pad(pools["label_pool"][rows], tail, value=pad_id))
        parts["loss_mask"].append(F.pad(pools["loss_mask_pool"][rows], tail, value=0.0))
        parts["position_ids"].append(torch.arange(aligned, dtype=torch.int64, device=device))
        valid.append(length)
        padded.append(aligned)
    dtypes = {"tokens": torch.int64, "labels": torch.int64, "position_ids": torch.int64,
              "loss_mask": torch.float32}
    batch = {key: torch.cat(values) if values else torch.empty(0, dtype=dtypes[key], device=device)
             for key, values in parts.items()}
    for name, lengths in (("cu_seqlens", valid), ("cu_seqlens_padded", padded)):
        lengths = torch.tensor(lengths, dtype=torch.int32, device=device)
        batch[name] = F.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    batch["max_seqlen"] = torch.tensor(max(padded, default=0), dtype=torch.int32, device=device)
    return batch


def eager_pack_step(pools, sample_offsets, sample_lengths, sample_ids, C, cp, N, rank,
                    pad_id=0, index_impl="auto"):
    """One microbatch packed from a pool for CP rank `rank`, the way the
    reference framework does it: pack_samples (S1 + S4), then eager_step (S5,
    S6, S7, S10 with their host syncs). The outputs of
    examples/pack_microbatch.mlir (and of reference::packMicrobatchStep) for
    a valid pack; the framework cannot pack an empty one under CP."""
    batch = pack_samples(pools, sample_offsets, sample_lengths, sample_ids, cp, pad_id)
    return eager_step(batch, C, cp, N, rank, index_impl)


#
# Timing
#

def _time_samples(config, mix, iters, rank=0, seed=1, warmup=10, index_impl="auto"):
    C, cp, N = config
    mb = thd_inputs.generate(C, cp, N, mix, seed)
    batch = framework_batch(mb, "cuda")
    for _ in range(warmup):
        eager_step(batch, C, cp, N, rank, index_impl)
    torch.cuda.synchronize()
    windows = timing.device_windows(iters)
    with timing.gc_paused():
        for window in windows:
            with window:
                eager_step(batch, C, cp, N, rank, index_impl)
        torch.cuda.synchronize()
    return [window.millis for window in windows]


def time_eager(config, mix, iters, rank=0, seed=1, warmup=10, index_impl="auto"):
    """Median milliseconds per microbatch of eager_step for config = (C, cp, N)
    and length mix "long"/"short": `warmup` untimed runs, a synchronize, then
    `iters` runs each between two torch.cuda.Event records on the current
    stream, with Python's garbage collector paused (the host syncs inside the
    step make each sample the wall time of one microbatch)."""
    return statistics.median(_time_samples(config, mix, iters, rank, seed, warmup, index_impl))


#
# Checking
#

def _expected_tensor(values, like):
    if like.dtype == torch.float32:
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        return torch.tensor([special.get(v, v) if isinstance(v, str) else v for v in values],
                            dtype=torch.float32)
    if like.dtype == torch.bool:
        return torch.tensor([bool(v) for v in values], dtype=torch.bool)
    return torch.tensor(values, dtype=like.dtype)


def _first_difference(name, actual, expected):
    actual = actual.detach().cpu()
    if actual.shape != expected.shape:
        return f"{name}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if actual.dtype == torch.float32:  # bit for bit
        actual_bits, expected_bits = actual.view(torch.int32), expected.view(torch.int32)
    else:
        actual_bits, expected_bits = actual, expected
    differs = (actual_bits != expected_bits).nonzero()
    if differs.numel() == 0:
        return None
    i = int(differs[0, 0])
    return f"{name}[{i}] = {actual[i].item()}, expected {expected[i].item()}"


def _selftest_failures(what, out, expected):
    """The outputs of the running example's step that differ from the
    golden `expected` data keys and its graph-mode metadata, each printed."""
    expected = dict(expected, cu_seqlens_padded=[0, 4, 8, 12, 16, 16, 16],
                    cu_seqlens=[0, 3, 5, 9, 13, 13, 13], max_seqlen=[16], status=[0])
    failures = 0
    for name, values in expected.items():
        difference = _first_difference(name, out[name], _expected_tensor(values, out[name]))
        if difference:
            print(f"FAIL {what}: {difference}")
            failures += 1
    return failures


def check_file(path, defaults, index_impl="auto"):
    """Returns (passed, message)."""
    with open(path) as f:
        expected = json.load(f)
    case = dict(defaults)
    case.update(expected.get("_case", {}))
    C, cp, N = case["C"], case["cp"], case["N"]
    label = f"{path} (C={C} cp={cp} N={N} mix={case['mix']} seed={case['seed']} rank={case['rank']})"
    status = expected.get("status", [0])
    if status and status[0] != 0:
        return False, f"{label}: expected status {status[0]}; eager handles valid microbatches only"
    mb = thd_inputs.generate(C, cp, N, case["mix"], case["seed"])
    outputs = eager_step(framework_batch(mb, "cuda"), C, cp, N, case["rank"], index_impl)
    compared = 0
    for name in OUTPUT_NAMES:
        if name not in expected:
            continue
        compared += 1
        difference = _first_difference(name, outputs[name],
                                       _expected_tensor(expected[name], outputs[name]))
        if difference:
            return False, f"{label}: {difference}"
    if compared == 0:
        return False, f"{label}: no output of megatron_graph_step in the file"
    return True, f"{label}: {compared} outputs equal"


def selftest(index_impl="auto"):
    """The running example of docs/semantics.md (S10 "graph: cp=2, target 8,
    N=6"), through eager_step and through eager_pack_step."""
    device = "cuda"
    base = {
        "tokens": [11, 12, 13, 99, 21, 22, 99, 99, 31, 32, 33, 34],
        "labels": [12, 13, 1, 99, 22, 2, 99, 99, 32, 33, 34, 3],
        "position_ids": [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3],
        "loss_mask": [1.0] * 12,
    }
    golden = {
        0: {"tokens": [11, 0, 21, 0, 31, 34, 0, 0],
            "padding_mask": [False, True, False, True, False, False, True, True],
            "loss_mask": [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]},
        1: {"tokens": [12, 13, 22, 0, 32, 33, 0, 0],
            "padding_mask": [False, False, False, True, False, False, True, True],
            "loss_mask": [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]},
    }
    failures = 0
    for rank, expected in golden.items():
        batch = {key: torch.tensor(values, device=device,
                                   dtype=torch.float32 if key == "loss_mask" else torch.int64)
                 for key, values in base.items()}
        batch["cu_seqlens"] = torch.tensor([0, 3, 5, 9], dtype=torch.int32, device=device)
        batch["cu_seqlens_padded"] = torch.tensor([0, 4, 8, 12], dtype=torch.int32, device=device)
        batch["max_seqlen"] = torch.tensor(4, dtype=torch.int32, device=device)
        out = eager_step(batch, 8, 2, 6, rank, index_impl)
        failures += _selftest_failures(f"selftest rank {rank}", out, expected)
    checks = sum(len(e) + 4 for e in golden.values())

    # The same microbatch packed from a pool (the samples out of order, with
    # gaps): A = [11,12,13] at row 5, B = [21,22] at row 0, C = [31..34] at
    # row 20; all-ones loss masks.
    tokens = [0] * 32
    for start, values in ((5, [11, 12, 13]), (0, [21, 22]), (20, [31, 32, 33, 34])):
        tokens[start:start + len(values)] = values
    pools = {"token_pool": torch.tensor(tokens, dtype=torch.int64, device=device),
             "label_pool": torch.tensor(tokens, dtype=torch.int64, device=device) + 100,
             "loss_mask_pool": torch.ones(32, dtype=torch.float32, device=device)}
    for rank, expected in golden.items():
        out = eager_pack_step(pools, [5, 0, 20], [3, 2, 4], [0, 1, 2], 8, 2, 6, rank,
                              pad_id=99, index_impl=index_impl)
        failures += _selftest_failures(f"selftest (from a pool) rank {rank}", out, expected)
        checks += len(expected) + 4
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", nargs="+", metavar="FILE",
                        help="compare with expected outputs in JSON files")
    parser.add_argument("--selftest", action="store_true",
                        help="check the golden running example of docs/semantics.md")
    parser.add_argument("--time", action="store_true",
                        help="time every configuration and length mix")
    parser.add_argument("--config", type=thd_inputs.parse_config, action="append",
                        metavar="C,cp,N",
                        help="configuration (repeatable; default: all for --time, the "
                             "first for --check files without a _case)")
    parser.add_argument("--mix", choices=thd_inputs.MIXES, action="append")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json", metavar="OUT", help="with --time: also write the results here")
    parser.add_argument("--index-impl", choices=("auto", "te-kernel", "torch"), default="auto",
                        help="how S7's partition indices are computed (default: one CUDA "
                             "kernel when CuPy is installed, else torch ops)")
    args = parser.parse_args(argv)
    if not (args.check or args.selftest or args.time):
        parser.print_help()
        return 2
    if not torch.cuda.is_available():
        print("error: eager.py needs a CUDA device", file=sys.stderr)
        return 1

    index_impl = resolve_index_impl(args.index_impl)
    print(f"partition indices: {index_impl}", flush=True)
    if args.selftest:
        return selftest(index_impl)

    if args.check:
        C, cp, N = (args.config or [thd_inputs.CONFIGS[0]])[0]
        defaults = {"C": C, "cp": cp, "N": N, "mix": (args.mix or ["long"])[0],
                    "seed": args.seed, "rank": args.rank}
        passed = failed = 0
        for path in args.check:
            ok, message = check_file(path, defaults, index_impl)
            print(("PASS " if ok else "FAIL ") + message, flush=True)
            passed, failed = passed + ok, failed + (not ok)
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0

    results = []
    print(f"{'C':>8} {'cp':>3} {'N':>5} {'mix':>6} {'rank':>4} {'median_ms':>10} "
          f"{'mean_ms':>9} {'min_ms':>8} {'p90_ms':>8}")
    for config in args.config or thd_inputs.CONFIGS:
        for mix in args.mix or thd_inputs.MIXES:
            samples = sorted(_time_samples(config, mix, args.iters, args.rank, args.seed,
                                           args.warmup, index_impl))
            row = {"C": config[0], "cp": config[1], "N": config[2], "mix": mix,
                   "rank": args.rank, "seed": args.seed, "iters": args.iters,
                   "warmup": args.warmup, "index_impl": index_impl,
                   "median_ms": statistics.median(samples),
                   "mean_ms": statistics.fmean(samples), "min_ms": samples[0],
                   "p90_ms": samples[int(0.9 * (len(samples) - 1))]}
            results.append(row)
            print(f"{row['C']:>8} {row['cp']:>3} {row['N']:>5} {mix:>6} {row['rank']:>4} "
                  f"{row['median_ms']:>10.3f} {row['mean_ms']:>9.3f} {row['min_ms']:>8.3f} "
                  f"{row['p90_ms']:>8.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": results}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
