// The graph-mode step of a middle pipeline-parallel stage. Middle stages
// receive hidden states from the previous stage, not tokens, so they need
// only this rank's padding mask and the microbatch's metadata: the same
// mask (S5, zigzag CP slice S7, padded to C rows) and the same padded cu
// arrays and max_seqlen (S10, dummy sequence) as the first and last stages
// compute with megatron_graph_step.mlir, without any data key.
//
// Parameters: C tokens per CP rank, cp the CP size, N the sequence capacity
// (the dummy included). Inputs hold N+1 offsets, of which the first
// num_seqs+1 are meaningful.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @middle_stage_step(
      %cu_seqlens: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi1> {thd.name = "padding_mask"},
          tensor<?xi32> {thd.name = "cu_seqlens_padded"}, tensor<?xi32> {thd.name = "cu_seqlens"},
          tensor<1xi32> {thd.name = "max_seqlen"}, tensor<1xi32> {thd.name = "status"}) {
    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>

    // S5, S7: this rank's rows of the padding mask, then the tail (S10).
    %mask = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %mask_r = thd.cp_slice %mask, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>
    %mask_out = thd.pad_tail %mask_r target "C" fill true : tensor<?xi1> -> tensor<?xi1>

    // S10, graph mode: the same metadata as the other stages.
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %num_seqs_out = thd.pad_tail_metadata
        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n
        cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>

    return %mask_out, %cup_out, %cu_out, %max_seqlen_out, %status
        : tensor<?xi1>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
