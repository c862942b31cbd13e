"""Writes test/python/data/megatron_dev_golden.json: the outputs of the
reference framework's own `get_batch_on_this_rank_for_sequence_packing`
(megatron-core dev d48bd6be0a, run through megatron_dev.py on the CPU) for
random packed microbatches, every stage form, CP 1, 2 and 4, zigzag and
contiguous, in graph mode. test_megatron_dev_cpu.py compares thdc's function
with them field by field where dev is not installed (CI), and with dev
itself where it is.

    THDC_MEGATRON_DEV=/path/to/Megatron-LM python3 test/python/make_megatron_dev_golden.py

The microbatches are made by `cases()`, which the test shares: the file
holds dev's outputs and the seed, not the inputs twice.
"""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import megatron_dev  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                   "megatron_dev_golden.json")
SEED = 4242
C, N = 32, 6
# (cp, cp_mode, ranks, stage forms as (pp, pp_rank, keyword arguments))
FIRST_LAST = (1, 0, {})
FORMS = (FIRST_LAST, (2, 0, {}), (2, 1, {}), (3, 1, {}), (3, 1, dict(mtp_on_this_rank=True)),
         (2, 1, dict(vpp_size=2, vp_stage=0)), (2, 1, dict(vpp_size=2, vp_stage=1)))
LAYOUTS = ((1, "zigzag", (0,), FORMS), (2, "zigzag", (0, 1), (FIRST_LAST, (2, 1, {}))),
           (4, "zigzag", (0, 3), (FIRST_LAST,)), (2, "contiguous", (0, 1), (FIRST_LAST, (2, 0, {}))),
           (3, "contiguous", (0, 1, 2), (FIRST_LAST,)), (4, "contiguous", (1, 2), (FIRST_LAST,)))
PER_LAYOUT = 14


def microbatch(rng, cp, cp_mode, kind, C=C, N=N):
    """One packed microbatch as dev's packing loader yields it (numpy):
    `kind` picks the shape: "random" (a tail), "full" (N sequences, no
    tail), "full_tail" (N sequences and a tail: no slot for the dummy),
    "exact" (fewer sequences, no tail), "empty_tail" (no sequence),
    "over" (more rows than C*cp). C, N: the step's capacities."""
    granule = 2 * cp if cp_mode == "zigzag" and cp > 1 else 1
    budget = C * cp
    n = {"full": N, "full_tail": N, "empty_tail": 0}.get(kind, int(rng.integers(1, N)))
    if kind in ("full", "exact"):
        # n padded lengths, multiples of the granule, summing to the budget.
        cuts = np.sort(rng.choice(np.arange(1, budget // granule), n - 1, replace=False))
        padded = np.diff(np.concatenate([[0], cuts, [budget // granule]])) * granule
    else:
        room = budget + (3 * granule if kind == "over" else -granule)
        padded = []
        for _ in range(n):
            left = room - sum(padded)
            padded.append(min(left, int(rng.integers(1, 2 * budget // max(n, 1) + 1)))
                          // granule * granule)
        padded = np.array(padded, dtype=np.int64)
        if kind == "over":
            padded[-1] += budget + granule - padded.sum()
    valid = np.array([p if rng.integers(0, 3) == 0 else int(rng.integers(0, p + 1))
                      for p in padded], dtype=np.int64)
    cup = np.concatenate([[0], np.cumsum(padded)]).astype(np.int32)
    cu = np.concatenate([[0], np.cumsum(valid)]).astype(np.int32)
    T = int(cup[-1])
    return dict(tokens=rng.integers(1, 50000, size=T, dtype=np.int64),
                labels=rng.integers(1, 50000, size=T, dtype=np.int64),
                loss_mask=rng.integers(0, 2, size=T).astype(np.float32),
                position_ids=rng.integers(0, 4096, size=T, dtype=np.int64),
                cu_seqlens=cu, cu_seqlens_padded=cup,
                max_seqlen=int(np.diff(cup).max()) if n else 0)


KINDS = ("random",) * 8 + ("full", "full_tail", "exact", "empty_tail", "over", "random")


def cases():
    """Every (case id, layout, batch) the golden holds, in order."""
    rng = np.random.default_rng(SEED)
    out = []
    for cp, cp_mode, ranks, forms in LAYOUTS:
        for i in range(PER_LAYOUT):
            batch = microbatch(rng, cp, cp_mode, KINDS[i % len(KINDS)])
            for rank in ranks:
                for pp, pp_rank, form in forms:
                    layout = dict(cp=cp, cp_mode=cp_mode, cp_rank=rank, pp=pp, pp_rank=pp_rank,
                                  form=form, kind=KINDS[i % len(KINDS)])
                    out.append((len(out), layout, batch))
    return out


def torch_batch(batch, device="cpu"):
    import torch

    return {k: (torch.from_numpy(v.copy()).to(device) if isinstance(v, np.ndarray) else v)
            for k, v in batch.items()}


def main():
    warnings.simplefilter("ignore")
    module = megatron_dev.load()
    results = []
    for case, layout, batch in cases():
        cfg = megatron_dev.config(C, N, cp_mode=layout["cp_mode"], cp=layout["cp"])
        result = megatron_dev.call(module, torch_batch(batch), cfg=cfg, cp=layout["cp"],
                                   cp_rank=layout["cp_rank"], pp=layout["pp"],
                                   pp_rank=layout["pp_rank"], form=layout["form"])
        results.append(dict(case=case, layout=layout, dev=megatron_dev.flatten(result)))
    megatron_dev.write_golden(OUT, "graph mode", "test/python/make_megatron_dev_golden.py",
                              SEED, C, N, results)


if __name__ == "__main__":
    main()
