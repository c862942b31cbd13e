// RoPE positions of a microbatch without sequences: no sequence to continue,
// so the semantics has no value for the rows.
func.func @rope(%cup: tensor<4xi32> {thd.name = "cu_seqlens_padded"},
                %n: tensor<1xi32> {thd.name = "num_seqs"},
                %rank: tensor<1xi32> {thd.name = "cp_rank"})
    -> (tensor<8xi32> {thd.name = "rope"}) {
  %0 = thd.rope_positions %cup, %rank num_seqs %n max_seqlen %n cp 2 length 8 table_rows 16 : tensor<4xi32> -> tensor<8xi32>
  return %0 : tensor<8xi32>
}
