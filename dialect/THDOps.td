//===- THDOps.td - thd dialect operations ------------------*- tablegen -*-===//
//
// One op per data-preparation step of the THD semantics (S1..S10). Every op
// is pure and works on builtin tensors, dynamic or static; counts that are
// known only on the device travel as `tensor<1xi32>` values.
//
//===----------------------------------------------------------------------===//

#ifndef THD_OPS_TD
#define THD_OPS_TD

include "dialect/THDBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "dialect/THDInterfaces.td"

// Every step answers the interface's questions in the file of its family in
// dialect/ops/, beside its verifier; its element lowering is in
// codegen/lowering/.
class THD_Op<string mnemonic, list<Trait> traits = []>
    : Op<THD_Dialect, mnemonic,
         !listconcat(traits, [Pure, DeclareOpInterfaceMethods<THD_StepOpInterface>])> {
  let hasVerifier = 1;
}

// Shared clause syntax: `num_seqs %n` limits the meaningful entries of the
// cu arrays to the first n+1; without it every entry is meaningful.

def THD_AlignLengthsOp : THD_Op<"align_lengths", [AllTypesMatch<["valid_lens", "padded_lens"]>]> {
  let summary = "per-sequence alignment of lengths (S1)";
  let description = [{
    Rounds every valid length `v` up to the alignment granularity `G`:
    `p = ceil(v / G) * G`. The padded lengths are the physical lengths of
    the sequences in the packed buffer; every offset built from them is then
    divisible by `2*cp`, as zigzag CP partitioning requires.

    `G = tpPad * lcm(cpPad, share * m)`, where `cpPad = 2*cp` when `cp > 1`
    (else 1), `share = cpPad / 2` when `cpPad > 1` (else 1) is the number of
    ranks a sequence is divided among, `tpPad = tp` with
    `sequence_parallel` (else 1), and `m` is the `multiple` (default 1,
    which gives `G = cpPad * tpPad`). With `multiple m`, every rank's share
    of every sequence holds a multiple of `m` tokens, so that a variable
    packed length is one too (megatron-core's m: 32 for MXFP8, 16 for other
    FP8 recipes, 64 for HybridEP). With a static capacity C the recipes'
    condition is on C instead (`C % (m * tpPad) == 0`, docs/semantics.md
    S1), and no sequence needs rounding.

    With `dynamic_cp dp D` (dynamic context parallelism, where a pack may be
    shared by any number of the DP x CP ranks), `cpPad = 2*cp*D` whatever
    `cp` is, so that every offset divides among all of them.

    ```mlir
    // cp = 2, tp = 1: G = 4; [3, 2, 4] -> [4, 4, 4]
    %p = thd.align_lengths %v cp 2 tp 1 : tensor<3xi32>
    // cp = 2, tp = 2, sequence parallel: G = 8
    %q = thd.align_lengths %v cp "cp" tp 2 sequence_parallel : tensor<?xi32>
    // dynamic CP, cp = 2, dp = 4: G = 16; [3, 17] -> [16, 32]
    %d = thd.align_lengths %v cp 2 tp 1 dynamic_cp dp 4 : tensor<2xi32>
    // FP8, cp = 2: G = lcm(4, 2 * 16) = 32; [3, 40] -> [32, 64]
    %f = thd.align_lengths %v cp 2 tp 1 multiple 16 : tensor<2xi32>
    ```
  }];
  let arguments = (ins THD_Lengths:$valid_lens, THD_IntOrParamAttr:$cp,
                       THD_IntOrParamAttr:$tp, UnitAttr:$sequence_parallel,
                       OptionalAttr<THD_IntOrParamAttr>:$dp,
                       OptionalAttr<THD_IntOrParamAttr>:$multiple);
  let results = (outs THD_Lengths:$padded_lens);
  let assemblyFormat = [{
    $valid_lens `cp` custom<IntOrParam>($cp) `tp` custom<IntOrParam>($tp)
    (`sequence_parallel` $sequence_parallel^)? (`dynamic_cp` `dp` custom<IntOrParam>($dp)^)?
    (`multiple` custom<IntOrParam>($multiple)^)?
    attr-dict `:` type($valid_lens)
  }];
  let extraClassDeclaration = [{
    /// The granularity G of the padded lengths; every parameter must
    /// resolve (the op verifies).
    int64_t getGranularity();
  }];
}

def THD_GatherOp : THD_Op<"gather"> {
  let summary = "per-sample values of the chosen samples (S3/S4)";
  let description = [{
    Returns `values[ids[i]]` for each of the first `n` ids (all of them
    without `num_seqs`), and 0 for the entries beyond: for example the valid
    lengths of the samples that the planner chose for this microbatch, out
    of the lengths of every sample in the pool. Ids are clamped into
    `values`, so a bad id never reads out of bounds.

    ```mlir
    // lengths of a pool of 5 samples, samples 4, 0, 2 chosen
    %v = thd.gather %sample_lengths[%sample_ids] num_seqs %n
        : tensor<5xi32>, tensor<3xi32> -> tensor<3xi32>
    ```
  }];
  let arguments = (ins THD_Lengths:$values, THD_Lengths:$ids,
                       Optional<THD_Scalar>:$num_seqs);
  let results = (outs THD_Lengths:$result);
  let assemblyFormat = [{
    $values `[` $ids `]` (`num_seqs` $num_seqs^)? attr-dict `:` type($values) `,`
    type($ids) `->` type($result)
  }];
}

def THD_CuSeqlensOp : THD_Op<"cu_seqlens"> {
  let summary = "cumulative offsets of a list of lengths (S4)";
  let description = [{
    Returns `[0, l0, l0+l1, ...]`, one entry more than there are lengths:
    `cu_seqlens` from valid lengths, `cu_seqlens_padded` from padded ones.
    With `num_seqs %n`, only the first `n` lengths count and the remaining
    entries repeat the total (the static padding convention).

    ```mlir
    // [3, 2, 4] -> [0, 3, 5, 9]
    %cu = thd.cu_seqlens %v : tensor<3xi32> -> tensor<4xi32>
    ```
  }];
  let arguments = (ins THD_Lengths:$lengths, Optional<THD_Scalar>:$num_seqs);
  let results = (outs THD_CuSeqlens:$offsets);
  let assemblyFormat = [{
    $lengths (`num_seqs` $num_seqs^)? attr-dict `:` type($lengths) `->` type($offsets)
  }];
}

def THD_PackOp : THD_Op<"pack"> {
  let summary = "gather the chosen samples into one packed buffer (S4)";
  let description = [{
    Builds the packed 1-D buffer of one microbatch from a pool of samples.
    Sequence `i` is the sample `sample_ids[i]`, stored in `pool` from
    `sample_offsets[sample_ids[i]]`; it occupies the rows
    `[cu_seqlens_padded[i], cu_seqlens_padded[i+1])` of the result: its
    `cu_seqlens[i+1] - cu_seqlens[i]` valid tokens, then `pad` up to its
    padded length. The result has `cu_seqlens_padded[n]` rows; `capacity`
    bounds that length when shapes are made static.

    ```mlir
    // samples A=[11,12,13], B=[21,22], C=[31,32,33,34]; cu [0,3,5,9], cup [0,4,8,12]
    // -> [11,12,13,0, 21,22,0,0, 31,32,33,34]
    %tokens = thd.pack %pool[%offsets, %ids], %cu, %cup pad 0 capacity "C*cp"
        : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
    ```
  }];
  let arguments = (ins THD_TokenData:$pool, THD_Lengths:$sample_offsets,
                       THD_Lengths:$sample_ids, THD_CuSeqlens:$cu_seqlens,
                       THD_CuSeqlens:$cu_seqlens_padded,
                       Optional<THD_Scalar>:$num_seqs, THD_FillAttr:$pad,
                       OptionalAttr<THD_IntOrParamAttr>:$capacity);
  let results = (outs THD_TokenData:$packed);
  let assemblyFormat = [{
    $pool `[` $sample_offsets `,` $sample_ids `]` `,` $cu_seqlens `,` $cu_seqlens_padded
    (`num_seqs` $num_seqs^)? `pad` custom<Fill>($pad) (`capacity` custom<IntOrParam>($capacity)^)?
    attr-dict `:` type($pool) `,` type($sample_offsets) `,` type($sample_ids) `,`
    type($cu_seqlens) `,` type($cu_seqlens_padded) `->` type($packed)
  }];
}

def THD_MaxSeqlenOp : THD_Op<"max_seqlen"> {
  let summary = "longest sequence of a cumulative-offset array (S4, S13)";
  let description = [{
    Returns `max(cu[i+1] - cu[i])` over the meaningful entries, 0 when there
    is no sequence. Applied to `cu_seqlens_padded` it is the `max_seqlen` of
    the packed microbatch (over padded, global, pre-CP lengths).

    ```mlir
    // [0, 4, 8, 12] -> [4]
    %m = thd.max_seqlen %cup : tensor<?xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$offsets, Optional<THD_Scalar>:$num_seqs);
  let results = (outs THD_Scalar:$max_seqlen);
  let assemblyFormat = [{
    $offsets (`num_seqs` $num_seqs^)? attr-dict `:` type($offsets)
  }];
}

def THD_PaddingMaskOp : THD_Op<"padding_mask"> {
  let summary = "padding mask from valid and padded offsets (S5)";
  let description = [{
    Returns a mask of `cu_seqlens_padded[n]` rows, true on padding: row
    `pos` of sequence `s` (the `s` with `cup[s] <= pos < cup[s+1]`) is
    padding when `pos >= cup[s] + max(cu[s+1] - cu[s], 0)`. Zero-length
    sequences and trailing repeats are skipped; with no sequence every row
    is padding. `capacity` bounds the row count when shapes are made static.

    ```mlir
    // cu [0,3,5,9], cup [0,4,8,12] -> [0,0,0,1, 0,0,1,1, 0,0,0,0]
    %mask = thd.padding_mask %cu, %cup : tensor<4xi32>, tensor<4xi32> -> tensor<12xi1>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens, THD_CuSeqlens:$cu_seqlens_padded,
                       Optional<THD_Scalar>:$num_seqs,
                       OptionalAttr<THD_IntOrParamAttr>:$capacity);
  let results = (outs THD_Mask:$mask);
  let assemblyFormat = [{
    $cu_seqlens `,` $cu_seqlens_padded (`num_seqs` $num_seqs^)?
    (`capacity` custom<IntOrParam>($capacity)^)? attr-dict `:`
    type($cu_seqlens) `,` type($cu_seqlens_padded) `->` type($mask)
  }];
}

def THD_SanitizeOp : THD_Op<"sanitize", [AllTypesMatch<["input", "result"]>]> {
  let summary = "overwrite padded slots with a fill value (S6)";
  let description = [{
    Returns `mask[i] ? fill : input[i]` for every row. Megatron fills
    tokens, labels and position ids with 0 and the loss mask with 0.0; the
    default `fill` is zero of the element type.

    ```mlir
    // mask [F,F,T,F,T], tokens [11,12,-1,21,-1] -> [11,12,0,21,0]
    %t = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %l = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>
    ```
  }];
  let arguments = (ins THD_TokenData:$input, THD_Mask:$mask,
                       OptionalAttr<THD_FillAttr>:$fill);
  let results = (outs THD_TokenData:$result);
  let assemblyFormat = [{
    $input `,` $mask (`fill` custom<Fill>($fill)^)? attr-dict `:` type($input) `,` type($mask)
  }];
}

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

def THD_PadTailOp : THD_Op<"pad_tail"> {
  let summary = "pad a CP-local tensor to an alignment or a static target (S10)";
  let description = [{
    Right-pads `input` with `fill` (default zero; use `true` for the padding
    mask) to `target` rows, or to the next multiple of `alignment`; exactly
    one of the two is given. An input longer than the target is an error,
    never a silent truncation. Padding to the input's own static length is
    the input when every row of it is meaningful (a pipeline argument, or
    another `pad_tail` to a target), and is folded away; after a step whose
    meaningful rows depend on the data (`cp_slice`, `pack`, ...) it still
    fills the rows past them.

    ```mlir
    %t = thd.pad_tail %tokens target "C" : tensor<?xi64> -> tensor<?xi64>
    %m = thd.pad_tail %mask alignment 128 fill true : tensor<?xi1> -> tensor<?xi1>
    ```
  }];
  let arguments = (ins AnyTypeOf<[THD_TokenData, THD_Mask]>:$input,
                       OptionalAttr<THD_IntOrParamAttr>:$target,
                       OptionalAttr<THD_IntOrParamAttr>:$alignment,
                       OptionalAttr<THD_FillAttr>:$fill);
  let results = (outs AnyTypeOf<[THD_TokenData, THD_Mask]>:$result);
  let assemblyFormat = [{
    $input (`target` custom<IntOrParam>($target)^)?
    (`alignment` custom<IntOrParam>($alignment)^)? (`fill` custom<Fill>($fill)^)? attr-dict
    `:` type($input) `->` type($result)
  }];  let hasFolder = 1;
}

def THD_PadTailMetadataOp : THD_Op<"pad_tail_metadata"> {
  let summary = "cu_seqlens and max_seqlen after tail padding (S10)";
  let description = [{
    Computes the metadata of a microbatch whose CP-local tensors are padded
    to `Lt = target` rows (or `round_up(cup[n] / cp, alignment)`); the global
    padded length is `gT = Lt * cp` and the tail is `d = gT - cup[n]` rows.
    The `policy` decides what covers the tail:
    - `append_dummy_sequence`: when `d > 0`, `cu_seqlens_padded` gets `gT`
      and `cu_seqlens` gets its last value plus `d` (a dummy sequence);
    - `extend_last`: the last padded offset is raised to `gT` (with no
      sequence to extend, nothing covers the tail). The last sequence then
      has more rows, so under zigzag CP its chunks move: slice the data with
      the offsets this op returns, after padding it to `gT` rows (see
      examples/graph_step_extend_last.mlir; `thd.pad_tail` rejects padding
      a slice taken with the offsets from before);
    - `none`: no sequence covers the tail;
    - `split_dummy_sequences` (needs `max_seqs` and `dummy_length L`): when
      `d > 0`, `k = min(ceil(d / L), N - n)` dummy sequences over the spare
      entries, each of `L` rows but the last, which ends at `gT` (it takes
      what the spare entries cannot split); causal attention over the tail
      then costs about `d * L` instead of `d^2`. Under zigzag CP with
      `cp > 1`, `L` is a multiple of `2*cp`.
    With `max_seqs N` both arrays are then padded to `N + 1` entries by
    repeating their last value and `max_seqlen` is the static `gT`;
    otherwise `max_seqlen` is the larger of the old one and the tail's
    sequence. `num_seqs_out` is the new number of meaningful sequences.

    ```mlir
    // graph mode: cup [0,4,8,12], cp 2, target 8, N 6 -> [0,4,8,12,16,16,16], max_seqlen 16
    %cu2, %cup2, %ms, %n2 = thd.pad_tail_metadata %cu, %cup, %ms0 num_seqs %n
        cp 2 mode zigzag target 8 max_seqs 6 policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<7xi32>, tensor<7xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens, THD_CuSeqlens:$cu_seqlens_padded,
                       THD_Scalar:$max_seqlen, Optional<THD_Scalar>:$num_seqs,
                       THD_IntOrParamAttr:$cp,
                       DefaultValuedAttr<THD_CpModeAttr, "::mlir::thd::CpMode::zigzag">:$mode,
                       OptionalAttr<THD_IntOrParamAttr>:$target,
                       OptionalAttr<THD_IntOrParamAttr>:$alignment,
                       OptionalAttr<THD_IntOrParamAttr>:$max_seqs,
                       THD_TailPolicyAttr:$policy,
                       OptionalAttr<THD_IntOrParamAttr>:$dummy_length);
  let results = (outs THD_CuSeqlens:$cu_seqlens_out,
                      THD_CuSeqlens:$cu_seqlens_padded_out,
                      THD_Scalar:$max_seqlen_out, THD_Scalar:$num_seqs_out);
  let assemblyFormat = [{
    $cu_seqlens `,` $cu_seqlens_padded `,` $max_seqlen (`num_seqs` $num_seqs^)?
    `cp` custom<IntOrParam>($cp) `mode` `` $mode
    (`target` custom<IntOrParam>($target)^)? (`alignment` custom<IntOrParam>($alignment)^)?
    (`max_seqs` custom<IntOrParam>($max_seqs)^)? `policy` `` $policy
    (`dummy_length` custom<IntOrParam>($dummy_length)^)? attr-dict
    `:` type($cu_seqlens) `,` type($cu_seqlens_padded) `->` type($cu_seqlens_out)
    `,` type($cu_seqlens_padded_out)
  }];
}

def THD_PadCuSeqlensOp : THD_Op<"pad_cu_seqlens"> {
  let summary = "pad a cumulative-offset array to a static number of entries (S10)";
  let description = [{
    Returns `entries` values: the meaningful entries of `offsets`, then
    repeats of the last one. More meaningful entries than `entries` is an
    error ("num_seqs exceeds the capacity").

    ```mlir
    // [0, 4, 8, 12] -> [0, 4, 8, 12, 12, 12, 12]
    %c = thd.pad_cu_seqlens %cup entries "N+1" : tensor<?xi32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$offsets, Optional<THD_Scalar>:$num_seqs,
                       THD_IntOrParamAttr:$entries);
  let results = (outs THD_CuSeqlens:$padded);
  let assemblyFormat = [{
    $offsets (`num_seqs` $num_seqs^)? `entries` custom<IntOrParam>($entries) attr-dict
    `:` type($offsets) `->` type($padded)
  }];
}

def THD_ValidateOp : THD_Op<"validate", [AttrSizedOperandSegments]> {
  let summary = "check a microbatch's metadata on the device; fault bits";
  let description = [{
    Returns 0 when the microbatch's metadata is valid for the pipeline,
    otherwise the OR of one bit per fault, defined once in
    `reference/StatusBits.h` (the names `thd-run` and the Python package
    print are in brackets):
    - 1 `StatusNumSeqsOutOfRange` [num_seqs_out_of_range]: `num_seqs` is
      negative or above `max_seqs`; with `tail_slot`, also `num_seqs` equal
      to `max_seqs` while `cu_seqlens_padded[n]` is below `max_tokens` (see
      below);
    - 2 `StatusTotalExceedsCapacity` [total_exceeds_capacity]: the total
      padded length `cu_seqlens_padded[n]` is above `max_tokens`;
    - 4 `StatusNotDivisibleBy2Cp` [not_divisible]: with `cp > 1` and
      `mode zigzag`, a `cu_seqlens_padded` entry is not divisible by `2*cp`
      (TE cuts every sequence into `2*cp` chunks). `mode contiguous` sets no
      bit for any offset: the contiguous slice cuts the buffer padded to
      `max_tokens` rows, which the verifier requires to be a multiple of
      `cp`, as megatron-core (dev `d48bd6be0a`) pads every key to the
      partition total and checks only that total
      (`megatron/core/datasets/data_schedule_utils.py:26-100`);
    - 8 `StatusNotMonotonic` [not_monotonic]: an array does not start at 0
      or decreases;
    - 16 `StatusValidExceedsPadded` [valid_exceeds_padded]: a valid length
      is above its padded length;
    - 32 `StatusCpRankOutOfRange` [cp_rank_out_of_range]: `cp_rank` is
      outside `[0, cp)`;
    - 64 `StatusSampleOutOfRange` [sample_out_of_range]: with `samples(...)`,
      a chosen sample id is outside the pool's samples, or a chosen sample's
      rows `[offset, offset + length)` are not inside the pool's `pool_rows`
      rows (the steps that read the pool clamp their indices; this bit says
      the rows would have come from elsewhere);
    - 128 `StatusRowsNotGiven` [rows_not_given]: with `rows %r`, the total
      padded length `cu_seqlens_padded[n]` is above `r`, the number of rows
      the caller copied into the static data buffers (or `r` is negative):
      the rows past `r` are whatever an earlier microbatch left there, and
      the steps would read them as this one's. A loader that copies a
      microbatch of `T` rows into buffers of `C*cp` passes `T` (known on the
      host from the tensors' shapes).
    `tail_slot` says that the pipeline covers a tail with dummy sequences
    taken from the same `max_seqs` slots (`thd.pad_tail_metadata` with
    `policy append_dummy_sequence` or `split_dummy_sequences`, target
    `max_tokens`): a microbatch whose padded total `cu_seqlens_padded[n]`
    is below `max_tokens` has a tail and may hold at most `max_seqs - 1`
    real sequences, one whose total is exactly `max_tokens` has no tail and
    may fill all `max_seqs` slots. This is megatron-core's rule (dev
    `d48bd6be0a`, `megatron/core/packed_seq_params.py:446-700`): the dummy
    sequence is appended only when the target exceeds the actual total, and
    the cu arrays only need at most `N+1` entries (`:131-154`). Without
    `tail_slot`, `max_seqs` bounds the real sequences alone (pipelines
    whose tail needs no slot: `policy extend_last` or `none`).

    The second result is `num_seqs` when the status is 0 and 0 otherwise:
    ops that read it see an empty microbatch when the data is bad, so the
    pipeline writes in bounds and returns the outputs of an empty
    microbatch (all rows padding, one dummy sequence covering the tail).
    This replaces the host-side assertions and device asserts of the
    reference framework, which need a host synchronisation or poison the
    CUDA context.

    ```mlir
    // N sequence slots, one kept for the dummy when there is a tail
    %status, %checked_num_seqs = thd.validate %cu, %cup, %rank num_seqs %n cp "cp" mode zigzag
        max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>
    // a microbatch packed from a pool: its chosen samples checked too
    // a microbatch copied into static buffers: the rows the caller gave
    %status, %checked_num_seqs = thd.validate %cu, %cup, %rank num_seqs %n rows %r
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>
    %status, %checked_num_seqs = thd.validate %cu, %cup, %rank num_seqs %n
        samples(%offsets, %lengths, %ids : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
        pool_rows "P" cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1"
        : tensor<?xi32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins THD_CuSeqlens:$cu_seqlens, THD_CuSeqlens:$cu_seqlens_padded,
                       THD_Scalar:$cp_rank, Optional<THD_Scalar>:$num_seqs,
                       Optional<THD_Scalar>:$rows,
                       Optional<THD_Lengths>:$sample_offsets,
                       Optional<THD_Lengths>:$sample_lengths,
                       Optional<THD_Lengths>:$sample_ids,
                       OptionalAttr<THD_IntOrParamAttr>:$pool_rows,
                       THD_IntOrParamAttr:$cp,
                       DefaultValuedAttr<THD_CpModeAttr, "::mlir::thd::CpMode::zigzag">:$mode,
                       THD_IntOrParamAttr:$max_tokens, THD_IntOrParamAttr:$max_seqs,
                       UnitAttr:$tail_slot);
  let results = (outs THD_Scalar:$status, THD_Scalar:$checked_num_seqs);
  let assemblyFormat = [{
    $cu_seqlens `,` $cu_seqlens_padded `,` $cp_rank (`num_seqs` $num_seqs^)?
    (`rows` $rows^)?
    (`samples` `(` $sample_offsets^ `,` $sample_lengths `,` $sample_ids `:`
     type($sample_offsets) `,` type($sample_lengths) `,` type($sample_ids) `)`
     `pool_rows` custom<IntOrParam>($pool_rows))?
    `cp` custom<IntOrParam>($cp) `mode` `` $mode
    `max_tokens` custom<IntOrParam>($max_tokens) `max_seqs` custom<IntOrParam>($max_seqs)
    (`tail_slot` $tail_slot^)?
    attr-dict `:` type($cu_seqlens) `,` type($cu_seqlens_padded)
  }];
}

def THD_DroppedOp : THD_Op<"dropped"> {
  let summary = "sequences and tokens an invalid microbatch loses";
  let description = [{
    When `thd.validate` finds a microbatch invalid, the pipeline replaces it
    by an empty one; this step says how much was lost. With `status` 0 both
    results are 0. Otherwise `dropped_seqs = clamp(num_seqs, 0, E-1)`, with
    `E` the entries of `cu_seqlens` (its static capacity, for example
    `N+1`), and `dropped_tokens = max(cu_seqlens[dropped_seqs], 0)`: the
    sequences and the valid tokens that the microbatch claimed. `status`
    is `thd.validate`'s, `num_seqs` and `cu_seqlens` are the unchecked
    inputs (not `checked_num_seqs`, which is 0 on an invalid microbatch); a
    `num_seqs` outside the array or negative offsets never read out of
    bounds or give negative counts.

    ```mlir
    // status 8, cu [0, 3, 5, 9], num_seqs 2 -> dropped_seqs 2, dropped_tokens 5
    %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n cp "cp" mode zigzag
        max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>
    %dropped_seqs, %dropped_tokens = thd.dropped %status, %cu num_seqs %n : tensor<?xi32>
    ```
  }];
  let arguments = (ins THD_Scalar:$status, THD_CuSeqlens:$cu_seqlens,
                       THD_Scalar:$num_seqs);
  let results = (outs THD_Scalar:$dropped_seqs, THD_Scalar:$dropped_tokens);
  let assemblyFormat = [{
    $status `,` $cu_seqlens `num_seqs` $num_seqs attr-dict `:` type($cu_seqlens)
  }];
}

def THD_FusedOp : Op<THD_Dialect, "fused", [
    RecursiveMemoryEffects, DeclareOpInterfaceMethods<THD_StepOpInterface>, SingleBlockImplicitTerminator<"::mlir::thd::YieldOp">]> {
  let summary = "steps that run as one kernel";
  let description = [{
    The thd ops of the region run as one kernel: every result is computed
    element by element through the chain of steps that defines it, with no
    intermediate buffer and no synchronisation between the steps. Values
    from above are the kernel's inputs; the yielded values are its outputs.
    `thd-fuse` forms it; `thd-lower-to-loops` and `thd-lower-to-gpu` lower
    each one to one loop nest or one GPU kernel.

    ```mlir
    %t, %m = thd.fused -> tensor<8xi64>, tensor<8xi1> {
      %mask = thd.padding_mask ...
      ...
      thd.yield %tok, %mask_out : tensor<8xi64>, tensor<8xi1>
    }
    ```
  }];
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "(`->` type($results)^)? $body attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The values the body yields, one per result.
    ::mlir::ValueRange getYieldedValues();
  }];
}

def THD_YieldOp : Op<THD_Dialect, "yield", [Pure, Terminator, HasParent<"FusedOp">, ReturnLike]> {
  let summary = "the outputs of a fused kernel";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

#endif // THD_OPS_TD
