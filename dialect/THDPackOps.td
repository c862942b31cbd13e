//===- THDPackOps.td - steps that pack a microbatch --------*- tablegen -*-===//
//
// The steps that turn the chosen samples into one packed microbatch: aligned
// lengths (S1), the chosen samples' values and their cumulative offsets
// (S3/S4), the packed buffer and its longest sequence (S4, S13), the padding
// mask (S5) and sanitised padded slots (S6).
//
// Included from THDOps.td, which defines THD_Op and the shared clause
// syntax.
//
//===----------------------------------------------------------------------===//

#ifndef THD_PACK_OPS_TD
#define THD_PACK_OPS_TD

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

#endif // THD_PACK_OPS_TD
