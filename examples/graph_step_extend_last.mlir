// The graph-mode step with the tail padding policy `extend_last`: instead
// of a dummy sequence, the last sequence grows to cover the tail rows
// [cu_seqlens_padded[n], C*cp), and cu_seqlens (the valid offsets) is left
// as it is. Its extra rows are padding (masked, sanitised).
//
// The last sequence's zigzag chunks then move: with C = 8, cp = 2 and
// padded offsets [0,4,8,12], rank 0 keeps rows [0,3,4,7,8,9,14,15] of the
// padded buffer, not the dummy layout's [0,3,4,7,8,11,12,15]. So the packed
// tensors are padded to C*cp rows first and sliced with the extended
// offsets, which every rank's cu arrays then describe.
//
// Parameters: C tokens per CP rank, cp the CP size, N the sequence capacity
// (no slot is kept for a dummy). Inputs as in megatron_graph_step.mlir.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @graph_step_extend_last(
      %tokens: tensor<?xi64> {thd.name = "tokens", thd.capacity = #thd.expr<"C*cp">},
      %labels: tensor<?xi64> {thd.name = "labels", thd.capacity = #thd.expr<"C*cp">},
      %position_ids: tensor<?xi64> {thd.name = "position_ids", thd.capacity = #thd.expr<"C*cp">},
      %loss_mask: tensor<?xf32> {thd.name = "loss_mask", thd.capacity = #thd.expr<"C*cp">},
      %cu_seqlens: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi64> {thd.name = "tokens"}, tensor<?xi64> {thd.name = "labels"},
          tensor<?xi64> {thd.name = "position_ids"}, tensor<?xf32> {thd.name = "loss_mask"},
          tensor<?xi1> {thd.name = "padding_mask"},
          tensor<?xi32> {thd.name = "cu_seqlens_padded"}, tensor<?xi32> {thd.name = "cu_seqlens"},
          tensor<1xi32> {thd.name = "max_seqlen"}, tensor<1xi32> {thd.name = "status"}) {
    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" : tensor<?xi32>, tensor<?xi32>

    // S5 + S6 over the whole padded buffer (the tail is padding).
    %mask_packed = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %mask = thd.pad_tail %mask_packed target "C*cp" fill true : tensor<?xi1> -> tensor<?xi1>
    %tok = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %lab = thd.sanitize %labels, %mask : tensor<?xi64>, tensor<?xi1>
    %pos = thd.sanitize %position_ids, %mask : tensor<?xi64>, tensor<?xi1>
    %lm = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>

    // S10 on the global metadata: the last padded offset becomes C*cp.
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %n_out = thd.pad_tail_metadata
        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n
        cp "cp" mode zigzag target "C" max_seqs "N" policy extend_last
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>

    // S7 by the extended offsets. With no sequence (an empty or rejected
    // microbatch) nothing covers the tail and the rows past it are padding.
    %tok_s = thd.cp_slice %tok, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lab_s = thd.cp_slice %lab, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %pos_s = thd.cp_slice %pos, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lm_s = thd.cp_slice %lm, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode zigzag
        : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    %mask_s = thd.cp_slice %mask, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode zigzag
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>
    %tok_r = thd.pad_tail %tok_s target "C" : tensor<?xi64> -> tensor<?xi64>
    %lab_r = thd.pad_tail %lab_s target "C" : tensor<?xi64> -> tensor<?xi64>
    %pos_r = thd.pad_tail %pos_s target "C" : tensor<?xi64> -> tensor<?xi64>
    %lm_r = thd.pad_tail %lm_s target "C" fill 0.0 : tensor<?xf32> -> tensor<?xf32>
    %mask_r = thd.pad_tail %mask_s target "C" fill true : tensor<?xi1> -> tensor<?xi1>

    return %tok_r, %lab_r, %pos_r, %lm_r, %mask_r, %cup_out, %cu_out, %max_seqlen_out, %status
        : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?xi1>,
          tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
