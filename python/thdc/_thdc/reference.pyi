# Written by nanobind.stubgen (python -m nanobind.stubgen -m thdc._thdc -r); see __init__.pyi.
"""The reference semantics (plain C++), for tests"""

import numpy


def graph_step(tokens: numpy.ndarray, labels: numpy.ndarray, position_ids: numpy.ndarray, loss_mask: numpy.ndarray, cu_seqlens: numpy.ndarray, cu_seqlens_padded: numpy.ndarray, num_seqs: int, cp_rank: int, C: int, cp: int, N: int, *, rows_given: object | None = None, dummy_length: object | None = None) -> dict:
    """
    One microbatch of the graph-mode step (megatron_graph_step.mlir's semantics) for CP rank cp_rank; rows_given: the rows of the data buffers the caller copied (the rows_not_given check), or None; dummy_length: the tail in dummy sequences of that many rows over the spare entries (policy split_dummy_sequences), or None for one.
    """

def graph_step_offsets(cu_seqlens: numpy.ndarray, cu_seqlens_padded: numpy.ndarray, num_seqs: int, cp_rank: int, C: int, cp: int, N: int, *, rows_given: object | None = None, dummy_length: object | None = None, cp_mode: str = 'zigzag') -> dict:
    """
    graph_step's cu_seqlens_padded, cu_seqlens, max_seqlen and status for the same arguments without the data rows: the metadata alone, in work linear in N whatever C*cp. cp_mode: the step's CP layout, 'zigzag' or 'contiguous' (whose metadata is the cp = 1 step's over C*cp rows).
    """

def seq_idx(cu_seqlens: numpy.ndarray, total_tokens: int) -> object: ...

def linear_chunks(cu_seqlens: numpy.ndarray, chunk_size: int, capacity: int) -> dict:
    """
    S15: the chunk metadata of flash-linear-attention's varlen chunked kernels for cu_seqlens (N+1 entries) and chunk size BT at `capacity` rows: chunk_indices int32 [capacity, 2], chunk_offsets int32 [N+1], chunk_count.
    """

def linear_chunk_capacity(rows: int, N: int, chunk_size: int) -> int:
    """S15: ceil(rows/BT) + N, the static row count of chunk_indices."""

def pack_microbatch(token_pool: numpy.ndarray, label_pool: numpy.ndarray, loss_mask_pool: numpy.ndarray, sample_offsets: numpy.ndarray, sample_lengths: numpy.ndarray, sample_ids: numpy.ndarray, num_seqs: int, cp_rank: int, C: int, cp: int, N: int) -> dict:
    """
    One microbatch of examples/pack_microbatch.mlir for CP rank cp_rank (reference::packMicrobatchStep): a dict of NumPy arrays by output name, max_seqlen and status as ints. ValueError for shapes the pipeline cannot have and data the reference steps refuse.
    """
