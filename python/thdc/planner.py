"""The host-side microbatch planner (planner/Planner.h), on NumPy arrays: how
the sequences of one global batch are packed into microbatches before the
THD data step runs, and what examples/pack_microbatch.mlir then takes for
each microbatch (docs/semantics.md S1, S2, S3 and S12).

    import thdc.planner as planner
    padded = planner.align_lengths(valid_lengths, cp=2)          # S1
    plan = planner.plan(padded, C=4096, cp=2, max_packed_sequences=64)
    sample_ids, num_seqs = planner.microbatch_inputs(plan, rank, N=64)
    # sample_ids[m], num_seqs[m:m+1]: pack_microbatch's inputs for microbatch m

`plan` takes the padded lengths in global sequence order (the order of the
data-parallel ranks' samples) and returns a `Plan`: `packs` (sequence ids),
`groups[m][j]` (the pack of microbatch m on DP x CP rank j), `pack_tokens`,
`num_microbatches`, `capacity` (C*cp) and `max_real_seqs` (the S2 cap K:
N-1 with an alignment and the dummy tail, so that the dummy sequence always
has a slot). "next_fit" is the reference framework's scheduler; "balanced"
needs no more microbatches, often fewer. `max_microbatches` is the S12
bound: how many graph slots, or static output buffers, a global batch can
need. Errors raise ValueError with the planner's message.

`align_lengths` and `pad_granularity` take a `multiple` m (an int, or a
recipe name of `LOW_PRECISION_MULTIPLES`: "fp8" 16, "mxfp8" 32,
"blockwise_fp8" 128, "hybridep" 128) so that every rank's share of every
sequence is a multiple of m tokens, as low-precision GEMMs need:

    padded = planner.align_lengths(valid_lengths, cp=2, multiple="fp8")
"""
from ._thdc import planner as _planner

Plan = _planner.Plan
plan = _planner.plan
microbatch_inputs = _planner.microbatch_inputs
align_lengths = _planner.align_lengths
pad_granularity = _planner.pad_granularity
LOW_PRECISION_MULTIPLES = dict(_planner.LOW_PRECISION_MULTIPLES)
max_microbatches = _planner.max_microbatches
graph_capture_count = _planner.graph_capture_count

__all__ = [
    "LOW_PRECISION_MULTIPLES",
    "Plan",
    "align_lengths",
    "graph_capture_count",
    "max_microbatches",
    "microbatch_inputs",
    "pad_granularity",
    "plan",
]
