// pack_microbatch.mlir under dynamic context parallelism, where a pack may
// be shared by any number of the dp*cp ranks: every sequence is padded to a
// multiple of 2*cp*dp (S1, `dynamic_cp dp "dp"`), so its offsets divide
// among all of them. This rank then keeps its zigzag chunks among the cp
// ranks that share the pack.
//
// Parameters as in pack_microbatch.mlir, plus dp, the data-parallel size.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, dp = 2 : i64, N = 6 : i64, P = 64 : i64, S = 8 : i64}} {
  func.func @pack_microbatch_dynamic_cp(
      %token_pool: tensor<?xi64> {thd.name = "token_pool", thd.capacity = #thd.expr<"P">},
      %label_pool: tensor<?xi64> {thd.name = "label_pool", thd.capacity = #thd.expr<"P">},
      %loss_mask_pool: tensor<?xf32> {thd.name = "loss_mask_pool", thd.capacity = #thd.expr<"P">},
      %sample_offsets: tensor<?xi32> {thd.name = "sample_offsets", thd.capacity = #thd.expr<"S">},
      %sample_lengths: tensor<?xi32> {thd.name = "sample_lengths", thd.capacity = #thd.expr<"S">},
      %sample_ids: tensor<?xi32> {thd.name = "sample_ids", thd.capacity = #thd.expr<"N-1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi64> {thd.name = "tokens"}, tensor<?xi64> {thd.name = "labels"},
          tensor<?xi64> {thd.name = "position_ids"}, tensor<?xf32> {thd.name = "loss_mask"},
          tensor<?xi1> {thd.name = "padding_mask"},
          tensor<?xi32> {thd.name = "cu_seqlens_padded"}, tensor<?xi32> {thd.name = "cu_seqlens"},
          tensor<1xi32> {thd.name = "max_seqlen"}, tensor<1xi32> {thd.name = "status"}) {
    // S1 (dynamic CP) + S4: valid and padded lengths of the chosen samples,
    // their offsets.
    %valid = thd.gather %sample_lengths[%sample_ids] num_seqs %num_seqs
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>
    %padded = thd.align_lengths %valid cp "cp" tp 1 dynamic_cp dp "dp" : tensor<?xi32>
    %cu = thd.cu_seqlens %valid num_seqs %num_seqs : tensor<?xi32> -> tensor<?xi32>
    %cup = thd.cu_seqlens %padded num_seqs %num_seqs : tensor<?xi32> -> tensor<?xi32>

    // Too many samples or tokens, or a chosen sample outside the pool, set
    // status bits; the steps then see none.
    %status, %n = thd.validate %cu, %cup, %cp_rank num_seqs %num_seqs
        samples(%sample_offsets, %sample_lengths, %sample_ids
                : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) pool_rows "P"
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>

    // S4 + S5 + S6: the packed buffer is never materialised; each row below
    // is read from the pool when the rank's slice needs it.
    %tokens = thd.pack %token_pool[%sample_offsets, %sample_ids], %cu, %cup num_seqs %n
        pad 0 capacity "C*cp"
        : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
    %labels = thd.pack %label_pool[%sample_offsets, %sample_ids], %cu, %cup num_seqs %n
        pad 0 capacity "C*cp"
        : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
    %loss_mask = thd.pack %loss_mask_pool[%sample_offsets, %sample_ids], %cu, %cup num_seqs %n
        pad 0.0 capacity "C*cp"
        : tensor<?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xf32>
    %positions = thd.position_ids %cu, %cup num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
    %mask = thd.padding_mask %cu, %cup num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %tok = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %lab = thd.sanitize %labels, %mask : tensor<?xi64>, tensor<?xi1>
    %lm = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>

    // S7: this rank's chunks r and 2cp-1-r of every sequence.
    %tok_r = thd.cp_slice %tok, %cup, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lab_r = thd.cp_slice %lab, %cup, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %pos_r = thd.cp_slice %positions, %cup, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lm_r = thd.cp_slice %lm, %cup, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    %mask_r = thd.cp_slice %mask, %cup, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>

    // S10, graph mode.
    %tok_out = thd.pad_tail %tok_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lab_out = thd.pad_tail %lab_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %pos_out = thd.pad_tail %pos_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lm_out = thd.pad_tail %lm_r target "C" fill 0.0 : tensor<?xf32> -> tensor<?xf32>
    %mask_out = thd.pad_tail %mask_r target "C" fill true : tensor<?xi1> -> tensor<?xi1>
    %max_seqlen = thd.max_seqlen %cup num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %num_seqs_out = thd.pad_tail_metadata
        %cu, %cup, %max_seqlen num_seqs %n
        cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>

    return %tok_out, %lab_out, %pos_out, %lm_out, %mask_out, %cup_out, %cu_out, %max_seqlen_out,
           %status
        : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?xi1>, tensor<?xi32>,
          tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
