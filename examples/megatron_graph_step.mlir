// One microbatch of Megatron-LM's THD data preparation in CUDA-graph mode, as
// the reference framework runs it before a captured forward step:
//   padding mask (S5) -> sanitise padded slots (S6) -> zigzag CP slice (S7)
//   -> tail pad to C rows per rank with a dummy sequence, cu_seqlens arrays
//   padded to N+1 entries, static max_seqlen = C*cp (S10, graph mode).
//
// Parameters: C tokens per CP rank, cp the CP size, N the sequence capacity
// (the dummy included). Override them with `--param C=32768` and so on.
// Inputs hold C*cp token rows and N+1 offsets, of which the first
// num_seqs+1 are meaningful; the rank is an operand, so one compiled pipeline
// serves every rank. `status` is 0 for valid metadata, else fault bits.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @megatron_graph_step(
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
    // Bad metadata sets status bits; the steps below then see no sequence
    // (%n = 0), so every output is that of an empty microbatch.
    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>

    // S5 + S6: padding mask over the packed buffer, padded slots zeroed.
    %mask = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %tok = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %lab = thd.sanitize %labels, %mask : tensor<?xi64>, tensor<?xi1>
    %pos = thd.sanitize %position_ids, %mask : tensor<?xi64>, tensor<?xi1>
    %lm = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>

    // S7: the rows this CP rank keeps (chunks r and 2cp-1-r of each sequence).
    %tok_r = thd.cp_slice %tok, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lab_r = thd.cp_slice %lab, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %pos_r = thd.cp_slice %pos, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lm_r = thd.cp_slice %lm, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    %mask_r = thd.cp_slice %mask, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>

    // S10, graph mode: every rank pads to C rows; a dummy sequence covers the tail.
    %tok_out = thd.pad_tail %tok_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lab_out = thd.pad_tail %lab_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %pos_out = thd.pad_tail %pos_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lm_out = thd.pad_tail %lm_r target "C" fill 0.0 : tensor<?xf32> -> tensor<?xf32>
    %mask_out = thd.pad_tail %mask_r target "C" fill true : tensor<?xi1> -> tensor<?xi1>
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %num_seqs_out = thd.pad_tail_metadata
        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n
        cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>

    return %tok_out, %lab_out, %pos_out, %lm_out, %mask_out, %cup_out, %cu_out,
           %max_seqlen_out, %status
        : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?xi1>,
          tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
