//===- THDValidationOps.td - microbatch validation ---------*- tablegen -*-===//
//
// The steps that check a microbatch on the device: the fault bits and
// checked count of its metadata, and what an invalid microbatch loses.
//
// Included from THDOps.td, which defines THD_Op and the shared clause
// syntax.
//
//===----------------------------------------------------------------------===//

#ifndef THD_VALIDATION_OPS_TD
#define THD_VALIDATION_OPS_TD

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

#endif // THD_VALIDATION_OPS_TD
