// The cu_seqlens arrays of a microbatch as CUDA-graph static inputs (S10,
// S11): a layer graph captured for N sequences takes cu arrays of exactly
// N+1 entries, so the num_seqs+1 meaningful entries are padded by repeating
// the last one (zero-length sequences). This is what pad_tail_metadata's
// `max_seqs` does after tail padding, on its own: for metadata that is
// already padded, e.g. produced by an eager data path.
//
// Parameters: N the sequence capacity of the captured graphs. Inputs hold
// N+1 entries, of which the first num_seqs+1 are meaningful; num_seqs is
// clamped into [0, N].

module attributes {thd.params = {N = 6 : i64}} {
  func.func @static_cu_seqlens(
      %cu_seqlens: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"})
      -> (tensor<?xi32> {thd.name = "cu_seqlens"}, tensor<?xi32> {thd.name = "cu_seqlens_padded"},
          tensor<1xi32> {thd.name = "max_seqlen"}) {
    %cu = thd.pad_cu_seqlens %cu_seqlens num_seqs %num_seqs entries "N+1"
        : tensor<?xi32> -> tensor<?xi32>
    %cup = thd.pad_cu_seqlens %cu_seqlens_padded num_seqs %num_seqs entries "N+1"
        : tensor<?xi32> -> tensor<?xi32>
    // S13: the longest padded sequence, computed on the device.
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %num_seqs : tensor<?xi32>
    return %cu, %cup, %max_seqlen : tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  }
}
