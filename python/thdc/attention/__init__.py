"""The step's outputs as the arguments of each THD attention kernel.

A GraphStep run leaves the microbatch's metadata on the device: the padded
offsets `cu_seqlens_padded` and the valid offsets `cu_seqlens` of every CP
rank's rows (N+1 entries each, the dummy sequence covering the tail, the
spare entries repeating the total C*cp), in the step's static buffers.
Attention kernels read the same facts in different forms; this module gives
each its arguments, computed on the device from those buffers with no host
synchronisation (plain tensor arithmetic, capturable in the same CUDA graph
as the step), except FlashInfer, whose plan runs on the host:

    consumer           convention  arguments
    torch_varlen       graph       cu_seq_q = cu_seq_k = padded offsets, max_q = max_k = C*cp
    flash_attn_4       graph       cu_seqlens_q = cu_seqlens_k = padded offsets
    flash_attn_4       seqused     the same, and seqused_q = seqused_k = valid lengths
    cudnn              graph       ragged offsets = padded offsets * heads * head_dim,
                                   seq_len_q = seq_len_kv = padded lengths ([N, 1, 1, 1])
    cudnn              compact     the same ragged offsets, seq_len = valid lengths
                                   (TransformerEngine's pad_between_seqs=True)
    flashinfer         graph       qo_indptr = kv_indptr = padded offsets, planned on the
                                   host from the loader's host offsets (host_padded_offsets)
    fla_gdn            graph       cu_seqlens = padded offsets, chunk_indices = the step's
                                   linear_chunks (S15), chunk_size = their BT
    fla_kda            graph       cu_seqlens = padded offsets, use_graph, max_num_seqs = N,
                                   chunk_size = BT (fla derives its chunks on the device)

Each function takes a GraphStep, StepSlot or SlotRung (the "source") and
reads the view that ran last: a step or slot with a capacity ladder (or
dynamic CP) stands for the rung that wrote its buffer last, as the host
knows it; where it cannot know (a run captured in a CUDA graph) ValueError
asks for the view itself, `slot.rung(r)`, and a view that is known not to
have run last is refused by name (the rungs share the buffer, each laying
it out for its own sizes).

"graph" attends every padding row as a token of its sequence (harmless for
the real tokens: attention is causal and the padding follows them);
"seqused"/"compact" skip the padding rows, which the kernel then leaves
unwritten, in the output and in the gradients. Rows a kernel leaves
unwritten hold whatever the allocator gave, NaN included, and a gradient
row of garbage reaches the weights through the projection's backward:
`computed_rows` says which rows a convention computes and `KeepRows`
zeroes the others in the output and in the gradient; the calls below do so.

Rows are in sequence order over all CP ranks (the step's offsets are
global): gather the ranks' rows and put them in order with
`slot.restore_cp_order` (ranks in one process), or give the kernel a CP
implementation of its own. docs/megatron.md ("Attention kernels") has the
measured table.

The calls (`varlen_attn`, `flash_attn_4`, `CudnnAttention`,
`FlashInferAttention`) import their kernel's package when first used; the
argument functions need only PyTorch."""
from ._args import (CONVENTIONS, FLA_CHUNK_SIZES, lengths, computed_rows, KeepRows, varlen_attn_args, flash_attn_4_args, cudnn_args, fla_gdn_args, fla_kda_args, host_padded_offsets)
from ._calls import (varlen_attn, flash_attn_4, CUDNN_LARGE_HEAD_DIM_RELEASE, cudnn_refusal, CudnnAttention, FlashInferAttention)

__all__ = ["CONVENTIONS", "CUDNN_LARGE_HEAD_DIM_RELEASE", "CudnnAttention", "FLA_CHUNK_SIZES", "FlashInferAttention", "KeepRows", "computed_rows", "cudnn_args", "cudnn_refusal", "fla_gdn_args", "fla_kda_args", "flash_attn_4", "flash_attn_4_args", "host_padded_offsets", "lengths", "varlen_attn", "varlen_attn_args"]
