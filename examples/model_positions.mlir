// What the model computes from a prepared microbatch's metadata, inside its
// captured graph (S8): the RoPE table row of each of this rank's C rows, and
// the Mamba sequence index of each of the C*cp rows of the packed buffer.
// The inputs are the outputs of megatron_graph_step.mlir: the padded
// offsets (N+1 entries, a dummy sequence over the tail) and max_seqlen.
//
// RoPE rows follow zigzag CP: a row of chunk r of a sequence has position
// r*h + k, one of chunk 2cp-1-r the mirrored one. A frequency table with
// more rows than max_seqlen is taken to be indexed by the row's place in
// the packed buffer (an "absolute" table), so the sequence's start is
// added; either way the row is clamped into the table.
//
// Parameters: C tokens per CP rank, cp the CP size, N the sequence capacity,
// R the rows of the RoPE frequency table.

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64, R = 16 : i64}} {
  func.func @model_positions(
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %max_seqlen: tensor<1xi32> {thd.name = "max_seqlen"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi32> {thd.name = "rope_rows"}, tensor<?xi32> {thd.name = "seq_idx"}) {
    %rope = thd.rope_positions %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        max_seqlen %max_seqlen cp "cp" length "C" table_rows "R"
        : tensor<?xi32> -> tensor<?xi32>
    %seq_idx = thd.seq_idx %cu_seqlens_padded num_seqs %num_seqs length "C*cp"
        : tensor<?xi32> -> tensor<?xi32>
    return %rope, %seq_idx : tensor<?xi32>, tensor<?xi32>
  }
}
