// One microbatch of the graph-mode step with contiguous context parallelism:
// rank r keeps the rows [r*C, (r+1)*C) of the packed buffer padded to C*cp
// rows, instead of zigzag chunks of every sequence.
//
// The order matters. Contiguous slicing hands rank r a contiguous range of
// whatever buffer it slices, so the buffer must already have its final
// length: here the packed tensors are padded to C*cp rows (padding and tail
// rows sanitised), the metadata gets its dummy sequence over the tail, and
// only then is every tensor sliced, with the padded cu array. Slicing first
// and padding each rank after would give rank r rows [r*T/cp, (r+1)*T/cp)
// of the unpadded buffer, which the padded cu arrays do not describe;
// thd.pad_tail rejects that order.
//
// Parameters: C tokens per CP rank, cp the CP size, N the sequence capacity
// (the dummy included). Inputs as in megatron_graph_step.mlir: C*cp token
// rows, N+1 offsets of which the first num_seqs+1 are meaningful.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @contiguous_cp_step(
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
        cp "cp" mode contiguous max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>

    // S5 + S6 over the whole buffer: the rows past the packed ones are tail,
    // padding too, so every row the slice can reach is defined.
    %mask_packed = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %mask = thd.pad_tail %mask_packed target "C*cp" fill true : tensor<?xi1> -> tensor<?xi1>
    %tok = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %lab = thd.sanitize %labels, %mask : tensor<?xi64>, tensor<?xi1>
    %pos = thd.sanitize %position_ids, %mask : tensor<?xi64>, tensor<?xi1>
    %lm = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>

    // S10 on the global metadata: a dummy sequence covers [cup[n], C*cp).
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %n_out = thd.pad_tail_metadata
        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n
        cp "cp" mode contiguous target "C" max_seqs "N" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>

    // S7, contiguous, by the padded offsets: their total is C*cp, so rank r
    // keeps rows [r*C, (r+1)*C).
    %tok_r = thd.cp_slice %tok, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode contiguous
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lab_r = thd.cp_slice %lab, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode contiguous
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %pos_r = thd.cp_slice %pos, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode contiguous
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lm_r = thd.cp_slice %lm, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode contiguous
        : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    %mask_r = thd.cp_slice %mask, %cup_out, %cp_rank num_seqs %n_out cp "cp" mode contiguous
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>

    return %tok_r, %lab_r, %pos_r, %lm_r, %mask_r, %cup_out, %cu_out, %max_seqlen_out, %status
        : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?xi1>,
          tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
