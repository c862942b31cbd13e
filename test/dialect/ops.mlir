// Round trip of every thd op: parse, print, parse the printed form again.
// RUN: thd-opt %s | FileCheck %s
// RUN: thd-opt %s | thd-opt | FileCheck %s
// RUN: thd-opt %s -mlir-print-op-generic | thd-opt | FileCheck %s

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, P = 64 : i64, cp = 2 : i64}} {

// CHECK-LABEL: func @align_lengths
// CHECK-SAME: (%[[V:.+]]: tensor<?xi32>)
func.func @align_lengths(%v: tensor<?xi32>) -> (tensor<?xi32>, tensor<3xi32>) {
  // CHECK: thd.align_lengths %[[V]] cp "cp" tp 2 sequence_parallel : tensor<?xi32>
  %0 = thd.align_lengths %v cp "cp" tp 2 sequence_parallel : tensor<?xi32>
  %c = arith.constant dense<[3, 2, 4]> : tensor<3xi32>
  // CHECK: thd.align_lengths %{{.+}} cp 2 tp 1 : tensor<3xi32>
  %1 = thd.align_lengths %c cp 2 tp 1 : tensor<3xi32>
  // CHECK: thd.align_lengths %{{.+}} cp "cp" tp 2 sequence_parallel dynamic_cp dp 4 : tensor<3xi32>
  %2 = thd.align_lengths %c cp "cp" tp 2 sequence_parallel dynamic_cp dp 4 : tensor<3xi32>
  // CHECK: thd.align_lengths %{{.+}} cp 2 tp 1 multiple 16 : tensor<3xi32>
  %3 = thd.align_lengths %c cp 2 tp 1 multiple 16 : tensor<3xi32>
  // CHECK: thd.align_lengths %{{.+}} cp "cp" tp 2 sequence_parallel dynamic_cp dp 4 multiple "N*16" : tensor<3xi32>
  %4 = thd.align_lengths %c cp "cp" tp 2 sequence_parallel dynamic_cp dp 4 multiple "N*16" : tensor<3xi32>
  return %0, %1 : tensor<?xi32>, tensor<3xi32>
}

// CHECK-LABEL: func @gather
func.func @gather(%lengths: tensor<5xi32>, %ids: tensor<3xi32>, %n: tensor<1xi32>) -> (tensor<3xi32>, tensor<?xi32>) {
  // CHECK: thd.gather %{{.+}}[%{{.+}}] : tensor<5xi32>, tensor<3xi32> -> tensor<3xi32>
  %0 = thd.gather %lengths[%ids] : tensor<5xi32>, tensor<3xi32> -> tensor<3xi32>
  // CHECK: thd.gather %{{.+}}[%{{.+}}] num_seqs %{{.+}} : tensor<5xi32>, tensor<3xi32> -> tensor<?xi32>
  %1 = thd.gather %lengths[%ids] num_seqs %n : tensor<5xi32>, tensor<3xi32> -> tensor<?xi32>
  return %0, %1 : tensor<3xi32>, tensor<?xi32>
}

// CHECK-LABEL: func @fused
func.func @fused(%t: tensor<8xi64>, %m: tensor<8xi1>) -> tensor<8xi64> {
  // CHECK: %[[R:.+]] = thd.fused -> tensor<8xi64> {
  // CHECK-NEXT: %[[S:.+]] = thd.sanitize
  // CHECK-NEXT: thd.yield %[[S]] : tensor<8xi64>
  %0 = thd.fused -> tensor<8xi64> {
    %s = thd.sanitize %t, %m : tensor<8xi64>, tensor<8xi1>
    thd.yield %s : tensor<8xi64>
  }
  return %0 : tensor<8xi64>
}

// CHECK-LABEL: func @cu_seqlens
// CHECK-SAME: (%[[L:.+]]: tensor<3xi32>, %[[N:.+]]: tensor<1xi32>)
func.func @cu_seqlens(%l: tensor<3xi32>, %n: tensor<1xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  // CHECK: thd.cu_seqlens %[[L]] : tensor<3xi32> -> tensor<4xi32>
  %0 = thd.cu_seqlens %l : tensor<3xi32> -> tensor<4xi32>
  // CHECK: thd.cu_seqlens %[[L]] num_seqs %[[N]] : tensor<3xi32> -> tensor<4xi32>
  %1 = thd.cu_seqlens %l num_seqs %n : tensor<3xi32> -> tensor<4xi32>
  return %0, %1 : tensor<4xi32>, tensor<4xi32>
}

// CHECK-LABEL: func @pack
// CHECK-SAME: (%[[POOL:.+]]: tensor<?xi64>, %[[OFF:.+]]: tensor<?xi32>, %[[IDS:.+]]: tensor<?xi32>, %[[CU:.+]]: tensor<?xi32>, %[[CUP:.+]]: tensor<?xi32>, %[[N:.+]]: tensor<1xi32>, %[[LM:.+]]: tensor<?xf32>)
func.func @pack(%pool: tensor<?xi64>, %off: tensor<?xi32>, %ids: tensor<?xi32>, %cu: tensor<?xi32>, %cup: tensor<?xi32>, %n: tensor<1xi32>, %lm: tensor<?xf32>) -> (tensor<?xi64>, tensor<16xf32>) {
  // CHECK: thd.pack %[[POOL]][%[[OFF]], %[[IDS]]], %[[CU]], %[[CUP]] pad -1 :
  // CHECK-SAME: tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
  %0 = thd.pack %pool[%off, %ids], %cu, %cup pad -1 : tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
  // CHECK: thd.pack %[[LM]][%[[OFF]], %[[IDS]]], %[[CU]], %[[CUP]] num_seqs %[[N]] pad 0.000000e+00 capacity "C*cp" :
  // CHECK-SAME: -> tensor<16xf32>
  %1 = thd.pack %lm[%off, %ids], %cu, %cup num_seqs %n pad 0.0 capacity "C*cp" : tensor<?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<16xf32>
  return %0, %1 : tensor<?xi64>, tensor<16xf32>
}

// CHECK-LABEL: func @max_seqlen
func.func @max_seqlen(%cup: tensor<?xi32>, %n: tensor<1xi32>) -> (tensor<1xi32>, tensor<1xi32>) {
  // CHECK: thd.max_seqlen %{{.+}} : tensor<?xi32>
  %0 = thd.max_seqlen %cup : tensor<?xi32>
  // CHECK: thd.max_seqlen %{{.+}} num_seqs %{{.+}} : tensor<?xi32>
  %1 = thd.max_seqlen %cup num_seqs %n : tensor<?xi32>
  return %0, %1 : tensor<1xi32>, tensor<1xi32>
}

// CHECK-LABEL: func @padding_mask
func.func @padding_mask(%cu: tensor<4xi32>, %cup: tensor<4xi32>, %n: tensor<1xi32>) -> (tensor<12xi1>, tensor<16xi1>) {
  // CHECK: thd.padding_mask %{{.+}}, %{{.+}} : tensor<4xi32>, tensor<4xi32> -> tensor<12xi1>
  %0 = thd.padding_mask %cu, %cup : tensor<4xi32>, tensor<4xi32> -> tensor<12xi1>
  // CHECK: thd.padding_mask %{{.+}}, %{{.+}} num_seqs %{{.+}} capacity "C*cp" : tensor<4xi32>, tensor<4xi32> -> tensor<16xi1>
  %1 = thd.padding_mask %cu, %cup num_seqs %n capacity "C*cp" : tensor<4xi32>, tensor<4xi32> -> tensor<16xi1>
  return %0, %1 : tensor<12xi1>, tensor<16xi1>
}

// CHECK-LABEL: func @sanitize
func.func @sanitize(%t: tensor<?xi64>, %l: tensor<?xf32>, %m: tensor<?xi1>) -> (tensor<?xi64>, tensor<?xf32>, tensor<?xi64>) {
  // CHECK: thd.sanitize %{{.+}}, %{{.+}} : tensor<?xi64>, tensor<?xi1>
  %0 = thd.sanitize %t, %m : tensor<?xi64>, tensor<?xi1>
  // CHECK: thd.sanitize %{{.+}}, %{{.+}} fill -5.000000e-01 : tensor<?xf32>, tensor<?xi1>
  %1 = thd.sanitize %l, %m fill -0.5 : tensor<?xf32>, tensor<?xi1>
  // CHECK: thd.sanitize %{{.+}}, %{{.+}} fill -100 : tensor<?xi64>, tensor<?xi1>
  %2 = thd.sanitize %t, %m fill -100 : tensor<?xi64>, tensor<?xi1>
  return %0, %1, %2 : tensor<?xi64>, tensor<?xf32>, tensor<?xi64>
}

// CHECK-LABEL: func @cp_slice
func.func @cp_slice(%t: tensor<12xi64>, %m: tensor<?xi1>, %cup: tensor<4xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>) -> (tensor<6xi64>, tensor<?xi1>, tensor<6xi64>) {
  // CHECK: thd.cp_slice %{{.+}}, %{{.+}}, %{{.+}} cp 2 mode zigzag : tensor<12xi64>, tensor<4xi32> -> tensor<6xi64>
  %0 = thd.cp_slice %t, %cup, %r cp 2 mode zigzag : tensor<12xi64>, tensor<4xi32> -> tensor<6xi64>
  // CHECK: thd.cp_slice %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} cp "cp" mode zigzag : tensor<?xi1>, tensor<4xi32> -> tensor<?xi1>
  %1 = thd.cp_slice %m, %cup, %r num_seqs %n cp "cp" mode zigzag : tensor<?xi1>, tensor<4xi32> -> tensor<?xi1>
  // CHECK: thd.cp_slice %{{.+}}, %{{.+}}, %{{.+}} cp 2 mode contiguous : tensor<12xi64>, tensor<4xi32> -> tensor<6xi64>
  %2 = thd.cp_slice %t, %cup, %r cp 2 mode contiguous : tensor<12xi64>, tensor<4xi32> -> tensor<6xi64>
  return %0, %1, %2 : tensor<6xi64>, tensor<?xi1>, tensor<6xi64>
}

// CHECK-LABEL: func @cp_unslice
func.func @cp_unslice(%t: tensor<12xi64>, %m: tensor<?xi1>, %l: tensor<?xf32>, %cup: tensor<4xi32>, %n: tensor<1xi32>) -> (tensor<12xi64>, tensor<?xi1>, tensor<?xf32>) {
  // CHECK: thd.cp_unslice %{{.+}}, %{{.+}} cp 2 mode zigzag rows_per_rank 6 : tensor<12xi64>, tensor<4xi32> -> tensor<12xi64>
  %0 = thd.cp_unslice %t, %cup cp 2 mode zigzag rows_per_rank 6 : tensor<12xi64>, tensor<4xi32> -> tensor<12xi64>
  // CHECK: thd.cp_unslice %{{.+}}, %{{.+}} num_seqs %{{.+}} cp "cp" mode zigzag rows_per_rank "C" : tensor<?xi1>, tensor<4xi32> -> tensor<?xi1>
  %1 = thd.cp_unslice %m, %cup num_seqs %n cp "cp" mode zigzag rows_per_rank "C" : tensor<?xi1>, tensor<4xi32> -> tensor<?xi1>
  // CHECK: thd.cp_unslice %{{.+}}, %{{.+}} num_seqs %{{.+}} cp "cp" mode contiguous rows_per_rank "C" : tensor<?xf32>, tensor<4xi32> -> tensor<?xf32>
  %2 = thd.cp_unslice %l, %cup num_seqs %n cp "cp" mode contiguous rows_per_rank "C" : tensor<?xf32>, tensor<4xi32> -> tensor<?xf32>
  return %0, %1, %2 : tensor<12xi64>, tensor<?xi1>, tensor<?xf32>
}

// CHECK-LABEL: func @positions
func.func @positions(%cu: tensor<4xi32>, %cup: tensor<4xi32>, %r: tensor<1xi32>) -> (tensor<12xi64>, tensor<8xi32>, tensor<16xi32>) {
  // CHECK: thd.position_ids %{{.+}}, %{{.+}} : tensor<4xi32>, tensor<4xi32> -> tensor<12xi64>
  %0 = thd.position_ids %cu, %cup : tensor<4xi32>, tensor<4xi32> -> tensor<12xi64>
  // CHECK: thd.rope_positions %{{.+}}, %{{.+}} max_seqlen %{{.+}} cp 2 length 8 table_rows "4*C" : tensor<4xi32> -> tensor<8xi32>
  %1 = thd.rope_positions %cup, %r max_seqlen %r cp 2 length 8 table_rows "4*C" : tensor<4xi32> -> tensor<8xi32>
  // CHECK: thd.seq_idx %{{.+}} length "2*C" : tensor<4xi32> -> tensor<16xi32>
  %2 = thd.seq_idx %cup length "2*C" : tensor<4xi32> -> tensor<16xi32>
  return %0, %1, %2 : tensor<12xi64>, tensor<8xi32>, tensor<16xi32>
}

// CHECK-LABEL: func @pad_tail
func.func @pad_tail(%t: tensor<6xi64>, %m: tensor<?xi1>) -> (tensor<8xi64>, tensor<?xi1>, tensor<8xi64>) {
  // CHECK: thd.pad_tail %{{.+}} target "C" : tensor<6xi64> -> tensor<8xi64>
  %0 = thd.pad_tail %t target "C" : tensor<6xi64> -> tensor<8xi64>
  // CHECK: thd.pad_tail %{{.+}} alignment 4 fill true : tensor<?xi1> -> tensor<?xi1>
  %1 = thd.pad_tail %m alignment 4 fill true : tensor<?xi1> -> tensor<?xi1>
  // CHECK: thd.pad_tail %{{.+}} alignment 4 : tensor<6xi64> -> tensor<8xi64>
  %2 = thd.pad_tail %t alignment 4 : tensor<6xi64> -> tensor<8xi64>
  return %0, %1, %2 : tensor<8xi64>, tensor<?xi1>, tensor<8xi64>
}

// CHECK-LABEL: func @pad_tail_metadata
func.func @pad_tail_metadata(%cu: tensor<?xi32>, %cup: tensor<?xi32>, %ms: tensor<1xi32>, %n: tensor<1xi32>) -> (tensor<7xi32>, tensor<?xi32>, tensor<1xi32>) {
  // CHECK: = thd.pad_tail_metadata %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<7xi32>, tensor<7xi32>
  %a:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence : tensor<?xi32>, tensor<?xi32> -> tensor<7xi32>, tensor<7xi32>
  // CHECK: thd.pad_tail_metadata %{{.+}}, %{{.+}}, %{{.+}} cp 1 mode zigzag alignment 8 policy extend_last : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  %b:4 = thd.pad_tail_metadata %cu, %cup, %ms cp 1 mode zigzag alignment 8 policy extend_last : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  // CHECK: thd.pad_tail_metadata %{{.+}}, %{{.+}}, %{{.+}} cp 2 mode contiguous target 16 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  %c:4 = thd.pad_tail_metadata %cu, %cup, %ms cp 2 mode contiguous target 16 policy none : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  // CHECK: thd.pad_tail_metadata %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} cp 2 mode zigzag target "C" max_seqs 6 policy split_dummy_sequences dummy_length 512 : tensor<?xi32>, tensor<?xi32> -> tensor<7xi32>, tensor<7xi32>
  %d:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag target "C" max_seqs 6 policy split_dummy_sequences dummy_length 512 : tensor<?xi32>, tensor<?xi32> -> tensor<7xi32>, tensor<7xi32>
  return %a#0, %b#1, %c#2 : tensor<7xi32>, tensor<?xi32>, tensor<1xi32>
}

// CHECK-LABEL: func @pad_cu_seqlens
func.func @pad_cu_seqlens(%cup: tensor<4xi32>, %n: tensor<1xi32>) -> (tensor<7xi32>, tensor<7xi32>) {
  // CHECK: thd.pad_cu_seqlens %{{.+}} entries "N+1" : tensor<4xi32> -> tensor<7xi32>
  %0 = thd.pad_cu_seqlens %cup entries "N+1" : tensor<4xi32> -> tensor<7xi32>
  // CHECK: thd.pad_cu_seqlens %{{.+}} num_seqs %{{.+}} entries 7 : tensor<4xi32> -> tensor<7xi32>
  %1 = thd.pad_cu_seqlens %cup num_seqs %n entries 7 : tensor<4xi32> -> tensor<7xi32>
  return %0, %1 : tensor<7xi32>, tensor<7xi32>
}

// CHECK-LABEL: func @validate
func.func @validate(%cu: tensor<?xi32>, %cup: tensor<?xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>) -> tensor<1xi32> {
  // CHECK: thd.validate %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  %0, %1 = thd.validate %cu, %cup, %r num_seqs %n cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  return %0 : tensor<1xi32>
}

// A slot for the dummy only when there is a tail.
// CHECK-LABEL: func @validate_tail_slot
func.func @validate_tail_slot(%cu: tensor<?xi32>, %cup: tensor<?xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>) -> tensor<1xi32> {
  // CHECK: thd.validate %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} cp "cp" mode contiguous max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>
  %0, %1 = thd.validate %cu, %cup, %r num_seqs %n cp "cp" mode contiguous max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>
  return %0 : tensor<1xi32>
}

// CHECK-LABEL: func @validate_rows
func.func @validate_rows(%cu: tensor<?xi32>, %cup: tensor<?xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>, %rows: tensor<1xi32>) -> tensor<1xi32> {
  // CHECK: thd.validate %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} rows %{{.+}} cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  %0, %1 = thd.validate %cu, %cup, %r num_seqs %n rows %rows cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  return %0 : tensor<1xi32>
}

// CHECK-LABEL: func @validate_samples
func.func @validate_samples(%cu: tensor<?xi32>, %cup: tensor<?xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>,
                            %offsets: tensor<8xi32>, %lengths: tensor<8xi32>, %ids: tensor<5xi32>) -> tensor<1xi32> {
  // CHECK: thd.validate %{{.+}}, %{{.+}}, %{{.+}} num_seqs %{{.+}} samples(%{{.+}}, %{{.+}}, %{{.+}} : tensor<8xi32>, tensor<8xi32>, tensor<5xi32>) pool_rows "P" cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  %0, %1 = thd.validate %cu, %cup, %r num_seqs %n samples(%offsets, %lengths, %ids : tensor<8xi32>, tensor<8xi32>, tensor<5xi32>) pool_rows "P"
      cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  return %0 : tensor<1xi32>
}

// CHECK-LABEL: func @dropped
func.func @dropped(%cu: tensor<?xi32>, %cup: tensor<?xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>, %static_cu: tensor<7xi32>)
    -> (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) {
  %0, %1 = thd.validate %cu, %cup, %r num_seqs %n cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
  // CHECK: thd.dropped %{{.+}}, %{{.+}} num_seqs %{{.+}} : tensor<?xi32>
  %2, %3 = thd.dropped %0, %cu num_seqs %n : tensor<?xi32>
  // CHECK: thd.dropped %{{.+}}, %{{.+}} num_seqs %{{.+}} : tensor<7xi32>
  %4, %5 = thd.dropped %0, %static_cu num_seqs %n : tensor<7xi32>
  return %2, %3, %5 : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>
}

// CHECK-LABEL: func @linear_chunks
func.func @linear_chunks(%cup: tensor<?xi32>, %static_cup: tensor<6xi32>)
    -> (tensor<18xi32>, tensor<6xi32>, tensor<1xi32>, tensor<?xi32>) {
  // CHECK: thd.linear_chunks %{{.+}} chunk_size 64 rows 200 : tensor<6xi32> -> tensor<18xi32>, tensor<6xi32>
  %0, %1, %2 = thd.linear_chunks %static_cup chunk_size 64 rows 200 : tensor<6xi32> -> tensor<18xi32>, tensor<6xi32>
  // CHECK: thd.linear_chunks %{{.+}} chunk_size "C" rows "C*cp" : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  %3, %4, %5 = thd.linear_chunks %cup chunk_size "C" rows "C*cp" : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %0, %1, %2, %3 : tensor<18xi32>, tensor<6xi32>, tensor<1xi32>, tensor<?xi32>
}

// CHECK-LABEL: func @named_arguments
// CHECK-SAME: {thd.capacity = #thd.expr<"C*cp">, thd.name = "tokens"}
// CHECK-SAME: -> (tensor<?xi64> {thd.name = "tokens"})
func.func @named_arguments(%t: tensor<?xi64> {thd.name = "tokens", thd.capacity = #thd.expr<"C*cp">}) -> (tensor<?xi64> {thd.name = "tokens"}) {
  return %t : tensor<?xi64>
}

}
