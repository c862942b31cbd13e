"""Random microbatches for megatron_graph_step-shaped pipelines, and the
comparison with the reference semantics (thdc.reference, the C++ reference
bound into the module). Shared by the CPU and the GPU tests."""
import numpy as np

import thdc

INPUTS = ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens",
          "cu_seqlens_padded", "num_seqs", "cp_rank")
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


def reference(mb, C, cp, N):
    """The reference outputs of one microbatch, as NumPy arrays."""
    return thdc.reference.graph_step(
        mb["tokens"], mb["labels"], mb["position_ids"], mb["loss_mask"],
        mb["cu_seqlens"], mb["cu_seqlens_padded"], int(mb["num_seqs"][0]),
        int(mb["cp_rank"][0]), C, cp, N)


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
