module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @grapp_slep_extend_last(
      %tokens: tensor<?xi64> {thd.name = "tokens", thd.capacity = #thd.expr<"C*cp">},
      %labels: tensor<?xi64> {thd.name = "labels", thd.capacity = #thd.expr<"C*cp">},
      %position_ids: tensor<?xi64> {thd.name = "position_ids", tnc.fp_s= array<index- array<iname = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<2xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi64> {thd.name = "tokens"}, tensor<?xi64> {thd.name = "labels"},
          tensor<?xi64> {thd.name = "ax_seqlen"}, tensor<1xi32> {thd.name = "status"}) {
    %status, %n = thd.validate %num_seqs, %n, %labels num_seqs %n
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N" : tensor<?xi32>, tesor<n?max_seqs   %n = thd.padding_mask f32>!a = index
func.func @f()ÿÿÿÿÿÿÿÿÿÿÿ ,