// The way back from the CP ranks after the model (S7 inverted): per-token
// values that every rank computed on its C rows of a microbatch (here the
// predicted tokens and the per-token loss), all-gathered over the CP group
// into C*cp rows rank after rank, are put back in the order of the packed
// buffer; the padding rows of the loss are then zeroed with the padding mask.
// The metadata are the microbatch's own (those megatron_graph_step.mlir
// read): each rank's rows past its T/cp sliced ones (the tail that rank padded
// to C rows) follow the T rows of the sequences, rank 0's first.
//
// Parameters: C tokens per CP rank, cp the CP size, N the sequence capacity
// (one slot kept for the dummy sequence, as in the graph step). `status` is
// 0 for valid metadata, else fault bits; then no row belongs to a sequence
// and the gathered rows come back as they are.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @cp_unslice(
      %gathered_tokens: tensor<?xi64> {thd.name = "gathered_tokens", thd.capacity = #thd.expr<"C*cp">},
      %gathered_loss: tensor<?xf32> {thd.name = "gathered_loss", thd.capacity = #thd.expr<"C*cp">},
      %cu_seqlens: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi64> {thd.name = "tokens"}, tensor<?xf32> {thd.name = "loss"},
          tensor<?xi1> {thd.name = "padding_mask"}, tensor<1xi32> {thd.name = "status"}) {
    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>

    // Chunk c of every sequence back from rank c (or 2cp-1-c), then the tails.
    %tokens = thd.cp_unslice %gathered_tokens, %cu_seqlens_padded num_seqs %n
        cp "cp" mode zigzag rows_per_rank "C" : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %loss = thd.cp_unslice %gathered_loss, %cu_seqlens_padded num_seqs %n
        cp "cp" mode zigzag rows_per_rank "C" : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>

    %mask = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %loss_out = thd.sanitize %loss, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>
    return %tokens, %loss_out, %mask, %status
        : tensor<?xi64>, tensor<?xf32>, tensor<?xi1>, tensor<1xi32>
  }
}
