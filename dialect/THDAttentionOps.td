//===- THDAttentionOps.td - steps that feed attention ------*- tablegen -*-===//
//
// The steps whose results the attention kernels read: a context-parallel
// rank's rows and every rank's rows back in sequence order (S7), position
// ids, RoPE positions and the sequence index of a row (S8), and the chunk
// metadata of linear attention (S15).
//
// Included from THDOps.td, which defines THD_Op and the shared clause
// syntax.
//
//===----------------------------------------------------------------------===//

#ifndef THD_ATTENTION_OPS_TD
#define THD_ATTENTION_OPS_TD

def THD_CpSliceOp : THD_Op<"cp_slice"> {
  let summary = "the rows a context-parallel rank keeps (S7)";
  let description = [{
    Returns the `T / cp` rows of `input` (T = `cu_seqlens_padded[n]`) that CP
    rank `cp_rank` keeps. In `zigzag` mode (TransformerEngine's dual-chunk
    layout) every sequence is cut into `2*cp` equal chunks and rank `r` keeps
    chunks `r` and `2*cp-1-r`; every offset must be divisible by `2*cp`.
    In `contiguous` mode rank `r` keeps rows `[r*T/cp, (r+1)*T/cp)`.
    Once shapes are static the result has its capacity's rows; those past
    `T/cp` hold no defined value (the lowering continues the layout, the
    reference interpreter writes 0), so a pipeline gives them one with
    `thd.pad_tail`, as the examples do.
    With `cp = 1` it returns the input (folded away when the types agree).
    The rank is an operand, so one compiled pipeline serves every rank.

    ```mlir
    // cup [0,4,8,12], cp 2: rank 0 keeps rows [0,3,4,7,8,11], rank 1 [1,2,5,6,9,10]
    %local = thd.cp_slice %tokens, %cup, %rank cp 2 mode zigzag
        : tensor<12xi64>, tensor<4xi32> -> tensor<6xi64>
    ```
  }];
  let arguments = (ins THD_TokenData:$input, THD_CuSeqlens:$cu_seqlens_padded,
                       THD_Scalar:$cp_rank, Optional<THD_Scalar>:$num_seqs,
                       THD_IntOrParamAttr:$cp,
                       DefaultValuedAttr<THD_CpModeAttr, "::mlir::thd::CpMode::zigzag">:$mode);
  let results = (outs THD_TokenData:$result);
  let assemblyFormat = [{
    $input `,` $cu_seqlens_padded `,` $cp_rank (`num_seqs` $num_seqs^)?
    `cp` custom<IntOrParam>($cp) `mode` `` $mode attr-dict `:` type($input) `,`
    type($cu_seqlens_padded) `->` type($result)
  }];
  let hasFolder = 1;
}

def THD_CpUnsliceOp : THD_Op<"cp_unslice"> {
  let summary = "the rows of every context-parallel rank, back in sequence order (S7)";
  let description = [{
    Undoes `thd.cp_slice` over the whole CP group: `input` holds the local
    rows of all `cp` ranks gathered rank after rank (an all-gather),
    `rows_per_rank` (`R`) rows each, and the result is the same `cp*R` rows
    in the order of the packed buffer. With `T = cu_seqlens_padded[n]`
    (clamped into `[0, cp*R]`) and `Tl = T / cp`, the result's row `g < T`,
    of the sequence `s` whose rows `[cup[s], cup[s+1])` hold it
    (zero-length sequences are skipped) at offset `k = g - cup[s]`, comes
    from the rank that kept it:
    - `zigzag`: with `h = (cup[s+1] - cup[s]) / (2*cp)`, chunk `c = k / h`
      is on rank `c` when `c < cp`, else on rank `2*cp-1-c`, at local row
      `cup[s]/cp + k % h`, plus `h` in the second half;
    - `contiguous`: rank `g / Tl`, local row `g % Tl`.
    Rows `g >= T` are the rows each rank holds past `Tl` (the tail that
    `thd.pad_tail` gave its slice), rank 0's first: row
    `T + r*(R - Tl) + j` is local row `Tl + j` of rank `r`. On metadata
    that `thd.validate` accepts, with `T <= cp*R`, the op is thus a
    permutation: slicing a buffer of `T` rows on every rank, padding each
    slice to `R` rows and gathering them gives the buffer back, followed by
    the padded rows.

    Offsets that validation rejects are read as they are: `h` and `Tl` are
    raised to at least 1, ranks clamped into `[0, cp)` and every source row
    into `[0, cp*R)`, so the result holds rows of the input and nothing is
    read out of bounds. (A pipeline gates its metadata with `thd.validate`,
    whose `num_seqs` is then 0: `T = 0`, and the rows come back as they
    were gathered.) With `cp = 1` it returns the input (folded away when
    the types agree).

    ```mlir
    // cup [0,4,8,12], cp 2, R 6: rank 0 kept rows [0,3,4,7,8,11], rank 1
    // [1,2,5,6,9,10]; gathered [0,3,4,7,8,11, 1,2,5,6,9,10] -> [0, 1, ..., 11]
    %seq = thd.cp_unslice %gathered, %cup num_seqs %n cp "cp" mode zigzag rows_per_rank "C"
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    ```
  }];
  let arguments = (ins THD_TokenData:$input, THD_CuSeqlens:$cu_seqlens_padded,
                       Optional<THD_Scalar>:$num_seqs, THD_IntOrParamAttr:$cp,
                       DefaultValuedAttr<THD_CpModeAttr, "::mlir::thd::CpMode::zigzag">:$mode,
                       THD_IntOrParamAttr:$rows_per_rank);
  let results = (outs THD_TokenData:$result);
  let assemblyFormat = [{
    $input `,` $cu_seqlens_padded (`num_seqs` $num_seqs^)?
    `cp` custom<IntOrParam>($cp) `mode` `` $mode
    `rows_per_rank` custom<IntOrParam>($rows_per_rank) attr-dict `:` type($input) `,`
    type($cu_seqlens_padded) `->` type($result)
  }];
  let hasFolder = 1;
}

def THD_PositionIdsOp : THD_Op<"position_ids"> {
  let summary = "per-sequence position ids, zero on padding (S8)";
  let description = [{
    Returns `k` for the `k`-th row of each sequence in the packed buffer
    and 0 on padding rows, i.e. the dataset's `0..p-1` per sequence after
    sanitising. The result has `cu_seqlens_padded[n]` rows.

    ```mlir
    // cu [0,3,5,9], cup [0,4,8,12] -> [0,1,2,0, 0,1,0,0, 0,1,2,3]
    %pos = thd.position_ids %cu, %cup : tensor<4xi32>, tensor<4xi32> -> tensor<12xi64>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens, THD_CuSeqlens:$cu_seqlens_padded,
                       Optional<THD_Scalar>:$num_seqs,
                       OptionalAttr<THD_IntOrParamAttr>:$capacity);
  let results = (outs 1DTensorOf<[AnySignlessInteger]>:$position_ids);
  let assemblyFormat = [{
    $cu_seqlens `,` $cu_seqlens_padded (`num_seqs` $num_seqs^)?
    (`capacity` custom<IntOrParam>($capacity)^)? attr-dict `:`
    type($cu_seqlens) `,` type($cu_seqlens_padded) `->` type($position_ids)
  }];
}

def THD_RopePositionsOp : THD_Op<"rope_positions"> {
  let summary = "RoPE table row of every CP-local row (S8)";
  let description = [{
    For each of the `length` local rows of CP rank `cp_rank`, returns the
    row of the RoPE frequency table (`table_rows` rows) that the row reads.
    First its position inside its global sequence: with local offsets
    `lcu` (the padded global lengths divided by `cp`), row `t` of sequence
    `s` at local index `k` has position `k` (cp = 1), `r*h + k` in chunk `r`,
    or `L*cp - (r+1)*h + (k-h)` in chunk `2cp-1-r` (`L` local length,
    `h = L/2`). Rows past the last offset continue the last sequence.
    Then, when the table has more rows than `max_seqlen` (an "absolute"
    table, indexed by the row's place in the whole packed buffer), the
    sequence's start `cu_seqlens_padded[s]` is added. The result is clamped
    into `[0, table_rows - 1]`, so a row never reads outside the table.

    ```mlir
    // cup [0,4,8,12,16,16,16], cp 2, 8 rows, max_seqlen 16, a 16-row table:
    // rank 0 -> [0,3,0,3,0,3,0,3]
    %rows = thd.rope_positions %cup, %rank max_seqlen %ms cp 2 length 8 table_rows 16
        : tensor<7xi32> -> tensor<8xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens_padded, THD_Scalar:$cp_rank,
                       Optional<THD_Scalar>:$num_seqs, THD_Scalar:$max_seqlen,
                       THD_IntOrParamAttr:$cp, THD_IntOrParamAttr:$length,
                       THD_IntOrParamAttr:$table_rows);
  let results = (outs 1DTensorOf<[I32]>:$positions);
  let assemblyFormat = [{
    $cu_seqlens_padded `,` $cp_rank (`num_seqs` $num_seqs^)? `max_seqlen` $max_seqlen
    `cp` custom<IntOrParam>($cp) `length` custom<IntOrParam>($length)
    `table_rows` custom<IntOrParam>($table_rows) attr-dict `:` type($cu_seqlens_padded)
    `->` type($positions)
  }];
}

def THD_SeqIdxOp : THD_Op<"seq_idx"> {
  let summary = "sequence index of every row, for Mamba (S8)";
  let description = [{
    Returns, for each of `length` rows, the index of the sequence that
    covers it; rows past `cu_seqlens_padded[n]` get index `n` (the tail is
    one more sequence ending at `length`).

    ```mlir
    // cup [0,5,7,11], 16 rows -> [0,0,0,0,0, 1,1, 2,2,2,2, 3,3,3,3,3]
    %idx = thd.seq_idx %cup length 16 : tensor<4xi32> -> tensor<16xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens_padded,
                       Optional<THD_Scalar>:$num_seqs, THD_IntOrParamAttr:$length);
  let results = (outs 1DTensorOf<[I32]>:$seq_idx);
  let assemblyFormat = [{
    $cu_seqlens_padded (`num_seqs` $num_seqs^)? `length` custom<IntOrParam>($length)
    attr-dict `:` type($cu_seqlens_padded) `->` type($seq_idx)
  }];
}

def THD_LinearChunksOp : THD_Op<"linear_chunks"> {
  let summary = "chunk metadata of linear attention's varlen kernels (S15)";
  let description = [{
    Splits each of the `N` sequences of `cu_seqlens_padded` (`N+1` entries,
    every one meaningful: the real sequences, the dummy over the tail and
    the zero-length ones after it) into chunks of `chunk_size` (`BT`, a
    power of two) rows, as flash-linear-attention's chunked kernels (Gated
    DeltaNet, Kimi Delta Attention) launch them, with `len_i = cu[i+1] -
    cu[i]`:
    - `chunk_offsets` (`N+1` entries): `0`, then the running sum of
      `ceil(len_i / BT)` (fla's `prepare_chunk_offsets`);
    - `chunk_count`: `chunk_offsets[N]`, the chunks there are;
    - `chunk_indices`: `NT` rows of two entries, flattened to `2*NT`
      entries, with `NT = ceil(rows / BT) + N` (`rows` the static row count
      of the step, `C*cp`): row `r < chunk_count` is `(i, r -
      chunk_offsets[i])` for the sequence `i` whose chunks hold it
      (sequence-major, fla's `prepare_chunk_indices`), and every row after
      is the sentinel `(N-1, ceil(len_{N-1} / BT))`, a chunk of no rows past
      the last sequence's end.
    Offsets that `thd.validate` accepts never have more chunks than `NT`
    (docs/semantics.md S15). Others, which the reference interpreter
    refuses, still give outputs in bounds: entry 0 is read as 0, lengths
    are exact (two i32 entries can be `2^32 - 1` apart), a decreasing entry
    gives its sequence no chunk, only the first `NT` chunks are listed, and
    `chunk_offsets` and `chunk_count` count the listed chunks (the running
    sums capped at `NT`). Every offset and the count are then in `[0, NT]`,
    and every row of `chunk_indices` is a chunk of its sequence (`t * BT <
    len_i`) or the sentinel.

    ```mlir
    // cup [0,5,64,200,200,200], BT 64, 200 rows: NT = 4 + 5 = 9
    // -> indices (0,0) (1,0) (2,0) (2,1) (2,2), then (4,0) x 4,
    //    offsets [0,1,2,5,5,5], count [5]
    %indices, %offsets, %count = thd.linear_chunks %cup chunk_size 64 rows 200
        : tensor<6xi32> -> tensor<18xi32>, tensor<6xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens_padded,
                       THD_IntOrParamAttr:$chunk_size, THD_IntOrParamAttr:$rows);
  let results = (outs 1DTensorOf<[I32]>:$chunk_indices,
                      THD_CuSeqlens:$chunk_offsets, THD_Scalar:$chunk_count);
  let assemblyFormat = [{
    $cu_seqlens_padded `chunk_size` custom<IntOrParam>($chunk_size)
    `rows` custom<IntOrParam>($rows) attr-dict `:` type($cu_seqlens_padded)
    `->` type($chunk_indices) `,` type($chunk_offsets)
  }];
}

#endif // THD_ATTENTION_OPS_TD
