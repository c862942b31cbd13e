// RoPE rows (S8) for cp = 2 and cp = 1, an absolute table (more rows than
// max_seqlen: the sequence's start is added), a short table (rows clamped
// into it), and seq_idx, as one pipeline.
func.func @positions(%cup: tensor<7xi32> {thd.name = "cu_seqlens_padded"}, %cup1: tensor<4xi32> {thd.name = "cu_seqlens_1"},
                     %rank: tensor<1xi32> {thd.name = "cp_rank"}, %max_seqlen: tensor<1xi32> {thd.name = "max_seqlen"})
    -> (tensor<8xi32> {thd.name = "rope_cp2"}, tensor<16xi32> {thd.name = "rope_cp1"},
        tensor<8xi32> {thd.name = "rope_absolute"}, tensor<16xi32> {thd.name = "rope_clamped"},
        tensor<16xi32> {thd.name = "seq_idx"}) {
  %0 = thd.rope_positions %cup, %rank max_seqlen %max_seqlen cp 2 length 8 table_rows 16 : tensor<7xi32> -> tensor<8xi32>
  %1 = thd.rope_positions %cup1, %rank max_seqlen %max_seqlen cp 1 length 16 table_rows 16 : tensor<4xi32> -> tensor<16xi32>
  %2 = thd.rope_positions %cup, %rank max_seqlen %max_seqlen cp 2 length 8 table_rows 64 : tensor<7xi32> -> tensor<8xi32>
  %3 = thd.rope_positions %cup1, %rank max_seqlen %max_seqlen cp 1 length 16 table_rows 7 : tensor<4xi32> -> tensor<16xi32>
  %4 = thd.seq_idx %cup1 length 16 : tensor<4xi32> -> tensor<16xi32>
  return %0, %1, %2, %3, %4 : tensor<8xi32>, tensor<16xi32>, tensor<8xi32>, tensor<16xi32>, tensor<16xi32>
}
