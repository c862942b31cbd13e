//===- THDPaddingOps.td - tail padding steps ---------------*- tablegen -*-===//
//
// The steps of tail padding (S10): a CP-local tensor padded to an alignment
// or a static target, the cu_seqlens and max_seqlen that follow, and a
// cumulative-offset array padded to a static number of entries.
//
// Included from THDOps.td, which defines THD_Op and the shared clause
// syntax.
//
//===----------------------------------------------------------------------===//

#ifndef THD_PADDING_OPS_TD
#define THD_PADDING_OPS_TD

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

#endif // THD_PADDING_OPS_TD
