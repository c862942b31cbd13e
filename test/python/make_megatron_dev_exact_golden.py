"""Writes test/python/data/megatron_dev_exact_golden.json: the outputs of the
reference framework's own `get_batch_on_this_rank_for_sequence_packing`
(megatron-core dev d48bd6be0a, run through megatron_dev.py on the CPU) on
its eager, unpadded path, for random packed microbatches: CP 1 with the
stage forms, CP 2 zigzag on both ranks. test_megatron_dev_exact_cpu.py
compares thdc's exact rows (SequencePackingBatches(exact=True)) with them
field by field where dev is not installed (CI), and with dev itself where
it is.

    THDC_MEGATRON_DEV=/path/to/Megatron-LM python3 test/python/make_megatron_dev_exact_golden.py

dev's eager, unpadded path is the one a config without
pad_packed_seq_alignment takes (its default, model_parallel_config.py:105):
data_schedule.py:640-651 then resolves no padding, :856 skips
pad_sequence_for_thd, and cuda_graph_impl is not read at all (:649 is
inside the `pad_alignment is not None` branch). megatron_dev.config(...,
graphs=False) is that config.

The microbatches are made by `cases()` (make_megatron_dev_golden's
`microbatch`, another seed), which the test shares: the file holds dev's
outputs and the seed, not the inputs twice.
"""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_megatron_dev_golden as base  # noqa: E402
import megatron_dev  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                   "megatron_dev_exact_golden.json")
SEED = 5151
C, N = base.C, base.N
FIRST_LAST = base.FIRST_LAST
# Stage forms as (pp, pp_rank, keyword arguments): first and last, first,
# last, a middle stage (the padding mask alone), a middle stage with MTP.
FORMS = (FIRST_LAST, (2, 0, {}), (2, 1, {}), (3, 1, {}), (3, 1, dict(mtp_on_this_rank=True)))
# (cp, ranks, stage forms). Zigzag only: exact rows refuse contiguous CP
# (a rank's real rows do not lie at the start of its C rows).
LAYOUTS = ((1, (0,), FORMS), (2, (0, 1), (FIRST_LAST,)))
KINDS = base.KINDS
PER_LAYOUT = len(KINDS)


def figures(batch):
    """The plan's figures of a microbatch (thdc.megatron.loader.PLAN_KEYS'
    order): its rows (all CP ranks), its sequences and its longest padded
    sequence, as dev's dp_balanced plan has them (thdc.megatron.trainer)."""
    padded = np.diff(batch["cu_seqlens_padded"])
    return int(padded.sum()), int(padded.size), int(padded.max()) if padded.size else 0


def cases():
    """Every (case id, layout, batch) the golden holds, in order."""
    rng = np.random.default_rng(SEED)
    out = []
    for cp, ranks, forms in LAYOUTS:
        for i in range(PER_LAYOUT):
            kind = KINDS[i % len(KINDS)]
            batch = base.microbatch(rng, cp, "zigzag", kind)
            for rank in ranks:
                for pp, pp_rank, form in forms:
                    layout = dict(cp=cp, cp_mode="zigzag", cp_rank=rank, pp=pp,
                                  pp_rank=pp_rank, form=form, kind=kind)
                    out.append((len(out), layout, batch))
    return out


def dev_config(cp):
    """dev's eager, unpadded config: no pad_packed_seq_alignment, no graphs."""
    return megatron_dev.config(C, N, graphs=False, cp_mode="zigzag", cp=cp)


def run_dev(module, layout, batch):
    return megatron_dev.call(module, base.torch_batch(batch), cfg=dev_config(layout["cp"]),
                             cp=layout["cp"], cp_rank=layout["cp_rank"], pp=layout["pp"],
                             pp_rank=layout["pp_rank"], form=layout["form"])


def main():
    warnings.simplefilter("ignore")
    module = megatron_dev.load()
    results = [dict(case=case, layout=layout, dev=megatron_dev.flatten(run_dev(module, layout,
                                                                               batch)))
               for case, layout, batch in cases()]
    megatron_dev.write_golden(OUT, "eager and unpadded (no pad_packed_seq_alignment)",
                              "test/python/make_megatron_dev_exact_golden.py", SEED, C, N,
                              results)


if __name__ == "__main__":
    main()
