// RoPE rows (S8) for cp = 2 and cp = 1, and seq_idx, as one pipeline.
func.func @positions(%cup: tensor<7xi32> {thd.name = "cu_seqlens_padded"}, %cup1: tensor<4xi32> {thd.name = "cu_seqlens_1"},
                     %rank: tensor<1xi32> {thd.name = "cp_rank"})
    -> (tensor<8xi32> {thd.name = "rope_cp2"}, tensor<16xi32> {thd.name = "rope_cp1"}, tensor<16xi32> {thd.name = "seq_idx"}) {
  %0 = thd.rope_positions %cup, %rank cp 2 length 8 : tensor<7xi32> -> tensor<8xi32>
  %1 = thd.rope_positions %cup1, %rank cp 1 length 16 : tensor<4xi32> -> tensor<16xi32>
  %2 = thd.seq_idx %cup1 length 16 : tensor<4xi32> -> tensor<16xi32>
  return %0, %1, %2 : tensor<8xi32>, tensor<16xi32>, tensor<16xi32>
}
