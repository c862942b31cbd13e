"""Random microbatches for megatron_graph_step-shaped pipelines, random pools
of samples for pack_microbatch-shaped ones, and the comparison with the
reference semantics (thdc.reference, the C++ reference bound into the
module). Shared by the CPU and the GPU tests."""
import argparse

import numpy as np

import thdc
from megatron_dev import LocalGroup  # noqa: F401 (the tests' stand-in group)

INPUTS = ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens",
          "cu_seqlens_padded", "num_seqs", "cp_rank")
# The pool inputs of examples/pack_microbatch.mlir, in signature order.
POOLS = ("token_pool", "label_pool", "loss_mask_pool", "sample_offsets", "sample_lengths")
COMPARED = ("tokens", "labels", "position_ids", "loss_mask", "padding_mask",
            "cu_seqlens_padded", "cu_seqlens")


def random_microbatch(rng, C, cp, N, rank=None):
    """A valid microbatch in the graph's static shapes: zero-length, empty and
    exactly full batches included; garbage past num_seqs+1 and past the
    packed rows."""
    granularity = 2 * cp if cp > 1 else 1
    budget = C * cp
    n = N - 1 if rng.integers(0, 5) == 0 else int(rng.integers(0, N))
    cu, cup = [0], [0]
    for _ in range(n):
        left = budget - cup[-1]
        padded = min(left, int(rng.integers(0, 2 * budget // max(n, 1) + 1)))
        padded = padded // granularity * granularity
        valid = padded if rng.integers(0, 4) == 0 else int(rng.integers(0, padded + 1))
        cu.append(cu[-1] + valid)
        cup.append(cup[-1] + padded)
    if n > 0 and rng.integers(0, 4) == 0:
        cup[-1] = budget
    garbage = lambda: rng.integers(-1000, 1000, size=N - n).tolist()
    return {
        "tokens": rng.integers(0, 50000, size=budget, dtype=np.int64),
        "labels": rng.integers(0, 50000, size=budget, dtype=np.int64),
        "position_ids": rng.integers(0, 4096, size=budget, dtype=np.int64),
        "loss_mask": rng.integers(0, 2, size=budget).astype(np.float32),
        "cu_seqlens": np.array(cu + garbage(), dtype=np.int32),
        "cu_seqlens_padded": np.array(cup + garbage(), dtype=np.int32),
        "num_seqs": np.array([n], dtype=np.int32),
        "cp_rank": np.array([rng.integers(0, cp) if rank is None else rank], dtype=np.int32),
    }


def invalidate(rng, mb, N):
    """Breaks a microbatch one of several ways (or not): too many sequences,
    an offset not divisible by 2*cp, valid longer than padded, a negative
    count."""
    kind = int(rng.integers(0, 5))
    if kind == 1:
        mb["num_seqs"][0] = N + int(rng.integers(0, 3))
    elif kind == 2 and mb["num_seqs"][0] > 0:
        mb["cu_seqlens_padded"][1] += 1
    elif kind == 3 and mb["num_seqs"][0] > 0:
        mb["cu_seqlens"][1] = mb["cu_seqlens_padded"][1] + 3
    elif kind == 4:
        mb["num_seqs"][0] = -int(rng.integers(1, 4))
    return mb


def reference(mb, C, cp, N, rows_given=None, dummy_length=None):
    """The reference outputs of one microbatch, as NumPy arrays; rows_given:
    the data rows the caller gave, for a step that checks them (the
    pipelines of thdc.stages with data keys: num_rows), or None;
    dummy_length: the tail in dummy sequences of that length."""
    return thdc.reference.graph_step(
        mb["tokens"], mb["labels"], mb["position_ids"], mb["loss_mask"],
        mb["cu_seqlens"], mb["cu_seqlens_padded"], int(mb["num_seqs"][0]),
        int(mb["cp_rank"][0]), C, cp, N, rows_given=rows_given,
        dummy_length=dummy_length)


def given_rows(mb, C, cp):
    """The data rows step_inputs gives of `mb`: its packed rows
    cu_seqlens_padded[num_seqs] (the count clamped into the arrays it
    gives), clamped into [0, C*cp]."""
    n = int(mb["num_seqs"][0])
    entries = min(max(n + 1, 1), len(mb["cu_seqlens"]))
    return max(0, min(int(mb["cu_seqlens_padded"][entries - 1]), C * cp))


def mismatches(outputs, expected):
    """Names of the outputs that differ from the reference (outputs: a
    mapping of NumPy arrays)."""
    bad = [k for k in COMPARED
           if not np.array_equal(np.asarray(outputs[k]).astype(np.int64)
                                 if k == "padding_mask" else np.asarray(outputs[k]),
                                 expected[k])]
    if int(np.asarray(outputs["max_seqlen"])[0]) != expected["max_seqlen"]:
        bad.append("max_seqlen")
    if int(np.asarray(outputs["status"])[0]) != expected["status"]:
        bad.append("status")
    return bad


def stage_mismatches(outputs, expected):
    """mismatches() for the outputs of one pipeline stage: the data keys the
    stage does not compute are not compared."""
    absent = {k: expected[k] for k in ("tokens", "labels", "position_ids", "loss_mask")}
    return mismatches({**absent, **outputs}, expected)


def random_pool(rng, C, cp, P, S):
    """A pool of random samples in the pipeline's static shapes: lengths from
    0 to C*cp (short ones more often), in a random order with gaps, labels
    with ignored positions, loss masks with zeros and fractions, garbage in
    the rows and sample slots no sample uses. Returns the pool and the
    number of real samples."""
    count = int(rng.integers(1, S + 1))
    short = rng.integers(0, max(1, C * cp // 8) + 1, size=count)
    long = rng.integers(0, C * cp + 1, size=count)
    lengths = np.where(rng.random(count) < 0.7, short, long)
    lengths = lengths[np.cumsum(lengths) <= P * 3 // 4]
    count = len(lengths)
    room = P - int(lengths.sum())
    gaps = rng.multinomial(room // 2, np.ones(count + 1) / (count + 1))[:count]
    order = rng.permutation(count)
    offsets = np.zeros(count, np.int64)
    row = 0
    for sample in order:
        row += gaps[sample]
        offsets[sample] = row
        row += lengths[sample]

    pool = {
        "token_pool": rng.integers(-(1 << 62), 1 << 62, size=P, dtype=np.int64),
        "label_pool": np.full(P, -7, np.int64),
        "loss_mask_pool": np.full(P, -2.5, np.float32),
        "sample_offsets": rng.integers(-5, 2 * P, size=S).astype(np.int32),
        "sample_lengths": rng.integers(-5, P, size=S).astype(np.int32),
    }
    pool["sample_offsets"][:count] = offsets
    pool["sample_lengths"][:count] = lengths
    for start, length in zip(offsets, lengths):
        rows = slice(start, start + length)
        pool["token_pool"][rows] = rng.integers(1, 151936, size=length)
        labels = rng.integers(1, 151936, size=length)
        labels[rng.random(length) < 0.1] = -100
        pool["label_pool"][rows] = labels
        weight = rng.integers(0, 8, size=length)
        mask = np.where(weight == 1, rng.integers(1, 1024, size=length) / 1024, 1.0)
        pool["loss_mask_pool"][rows] = np.where((labels == -100) | (weight == 0), 0.0, mask)
    return pool, count


def reference_pack(pool, sample_ids, num_seqs, cp_rank, C, cp, N):
    """thdc.reference.pack_microbatch of one microbatch of a pool."""
    return thdc.reference.pack_microbatch(*(pool[name] for name in POOLS),
                                          np.asarray(sample_ids, np.int32), int(num_seqs),
                                          cp_rank, C, cp, N)


def step_inputs(mb, C, cp, keys=("tokens", "labels", "loss_mask", "position_ids"),
                device="cuda"):
    """A microbatch as the reference framework hands it over, as torch
    tensors on `device`: data [1, T] with T the packed rows (the given keys),
    cu arrays of num_seqs+1 entries (at most all of them; num_seqs given
    explicitly when the arrays have every entry, as the step requires, or
    when the count is more than they hold or negative)."""
    import torch

    n = int(mb["num_seqs"][0])
    entries = min(max(n + 1, 1), len(mb["cu_seqlens"]))
    rows = given_rows(mb, C, cp)
    take = lambda name, count: torch.from_numpy(mb[name][:count].copy()).to(device)
    inputs = {k: take(k, rows).view(1, -1) for k in keys}
    inputs.update(cu_seqlens=take("cu_seqlens", entries),
                  cu_seqlens_padded=take("cu_seqlens_padded", entries))
    if entries != n + 1 or entries == len(mb["cu_seqlens"]):
        inputs["num_seqs"] = n  # arrays as long as the step's: the count is explicit
    return inputs


def rope_rows(cu_seqlens_padded, max_seqlen, cp, rank, length, table_rows):
    """S8's RoPE table row of each of `length` CP-local rows, restated from
    docs/semantics.md in NumPy (an oracle independent of the reference)."""
    cup = np.asarray(cu_seqlens_padded, np.int64)
    local = np.diff(cup) // cp
    lcu = np.concatenate([[0], np.cumsum(local)])
    rows = np.empty(length, np.int64)
    for t in range(length):
        s = int(np.clip(np.searchsorted(lcu, t, side="right") - 1, 0, len(cup) - 2))
        k, L = t - lcu[s], local[s]
        h = L // 2
        if cp == 1:
            pos = k
        elif k < h:
            pos = rank * h + k
        else:
            pos = L * cp - (rank + 1) * h + (k - h)
        if table_rows > max_seqlen:
            pos += cup[s]
        rows[t] = min(max(pos, 0), table_rows - 1)
    return rows.astype(np.int32)


def dropped(mb, status):
    """(sequences, valid tokens) an emptied microbatch claimed: its num_seqs
    clamped into the cu array, and the valid offset there (never negative);
    (0, 0) when it was valid."""
    if status == 0:
        return 0, 0
    cu = mb["cu_seqlens"]
    seqs = min(max(int(mb["num_seqs"][0]), 0), len(cu) - 1)
    return seqs, max(int(cu[seqs]), 0)


def check_packed_seq_params(step, make_step, C, N, cp, rank):
    """What every step's PackedSeqParams holds, and the 'compact' convention:
    built where the installed class has pad_between_seqs, refused where it
    has not. Returns the params and the class's fields."""
    import pytest
    import thdc.megatron

    params = step.packed_seq_params
    fields = thdc.megatron.packed_seq_params_fields()
    assert isinstance(params, thdc.megatron.PackedSeqParams)
    assert params.cu_seqlens_q_padded is step.outputs.cu_seqlens_padded
    assert params.max_seqlen_q == C * cp
    if "seq_idx" in fields:
        assert params.seq_idx is step.seq_idx
    if "pad_between_seqs" in fields:
        assert params.pad_between_seqs is False
        compact = make_step(C, N, cp, rank, convention="compact")
        assert compact.packed_seq_params.pad_between_seqs is True
        assert compact.packed_seq_params.cu_seqlens_q is compact.outputs.cu_seqlens
    else:
        with pytest.raises(ValueError, match="pad_between_seqs"):
            make_step(C, N, cp, rank, convention="compact")
    return params, fields


def widen(mb, C, cp, N, source):
    """A microbatch made for another rung in the arrays of rung (C, N), as the
    slot's inputs hold it after load_inputs (step_inputs(mb, source, cp)
    gives its rows and entries): the rows given, then rows the kernel must not read (num_rows
    bounds them); the cu entries given, then the -1 the loader stores after
    them (and more -1s where the rung reads stale entries)."""
    out = dict(mb)
    rows = given_rows(mb, source, cp)  # step_inputs(mb, source, cp)'s rows
    for k in ("tokens", "labels", "position_ids", "loss_mask"):
        out[k] = np.concatenate([mb[k][:rows], np.full(C * cp - rows, 77, mb[k].dtype)])
    n = int(mb["num_seqs"][0])
    entries = min(max(n + 1, 1), len(mb["cu_seqlens"]))
    for k in ("cu_seqlens", "cu_seqlens_padded"):
        given = np.concatenate([mb[k][:entries], np.full(N + 1, -1, np.int32)])
        out[k] = given[:N + 1].astype(np.int32)
    return out


def with_step_counts(expected, mb, C, cp):
    """The reference's outputs with what the drop-in adds: seq_idx over every
    rank's C*cp rows and the (sequences, tokens) an emptied microbatch
    claimed."""
    expected["seq_idx"] = thdc.reference.seq_idx(expected["cu_seqlens_padded"], C * cp)
    expected["dropped"] = dropped(mb, expected["status"])
    return expected


def step_mismatches(got, expected):
    """stage_mismatches, and seq_idx (where the stage computes it) and the
    dropped counts against with_step_counts's."""
    bad = stage_mismatches(got, expected)
    if "seq_idx" in got and not np.array_equal(got["seq_idx"], expected["seq_idx"]):
        bad.append("seq_idx")
    if (int(got["dropped_seqs"][0]), int(got["dropped_tokens"][0])) != expected["dropped"]:
        bad.append("dropped")
    return bad


def te_partitioned_indices(cu, cp, rank):
    """TransformerEngine's thd_get_partitioned_indices (zigzag), restated:
    for each sequence of padded length L (a multiple of 2*cp), rank r holds
    chunks r and 2*cp-1-r of L/(2*cp) rows, sequence after sequence. Over
    offsets whose last entry is the total (every row covered)."""
    rows = []
    for start, end in zip(cu[:-1], cu[1:]):
        half = (int(end) - int(start)) // (2 * cp)
        rows += range(start + rank * half, start + (rank + 1) * half)
        rows += range(start + (2 * cp - 1 - rank) * half, start + (2 * cp - rank) * half)
    return np.array(rows, dtype=np.int64)


def megatron_cp_order_index(cu_seqlens_padded, C, cp):
    """The inverse of the CP partition as megatron-core computes it (Mamba's
    _undo_attention_load_balancing, megatron/core/ssm/mamba_context_parallel.py):
    restored[te_partitioned_indices(cu, cp, r)] = gathered[r*C:(r+1)*C] for
    every rank r, over the step's output offsets (the dummy sequence
    included, so they end at C*cp). As an index into the rank-major gather."""
    cu = np.asarray(cu_seqlens_padded, dtype=np.int64)
    assert cu[-1] == C * cp, "the output offsets cover every row"
    index = np.full(C * cp, -1, dtype=np.int64)
    for rank in range(cp):
        rows = te_partitioned_indices(cu, cp, rank)
        assert len(rows) == C
        index[rows] = rank * C + np.arange(C)
    assert (index >= 0).all()
    return index


def step_argument_parser(microbatches):
    """The command line of a torchrun script that checks GraphStep on random
    microbatches: --bundle (else the JIT), --C, --N and --microbatches
    (default `microbatches`); the script adds its own options."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", default=None, help="megatron_step bundle (else the JIT)")
    parser.add_argument("--C", type=int, default=1024)
    parser.add_argument("--N", type=int, default=33)
    parser.add_argument("--microbatches", type=int, default=microbatches)
    return parser


def end_worker(code: int) -> None:
    """Ends a torchrun worker with `code` once its process group is
    destroyed, skipping the interpreter's finalization (os._exit, after
    flushing). Under Python 3.12 a thread of PyTorch's gloo backend that
    drops a Python reference while the interpreter finalizes cannot take the
    GIL and is ended with pthread_exit, which unwinds through a noexcept
    frame and aborts the process ("terminate called without an active
    exception"): a rare crash after every check has passed, which would
    turn the verdict already made here into a signal."""
    import os
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
