// thd-force-static-shapes on the example: parameters bound, every tensor at
// its capacity (C*cp rows in, C rows out per rank, N+1 cu entries).
// RUN: thd-opt %s --thd-force-static-shapes | FileCheck %s
// RUN: thd-opt %s --thd-force-static-shapes --param C=4096 --param N=64 | FileCheck %s --check-prefix=LARGE
// RUN: thd-opt %s --thd-force-static-shapes --thd-verify-capturable | FileCheck %s --check-prefix=CAPTURABLE
// RUN: thd-opt %s --thd-force-static-shapes | FileCheck %s --check-prefix=OPS

// CHECK-LABEL: func.func @megatron_graph_step
// CHECK-SAME: (%[[TOK:.+]]: tensor<16xi64> {thd.capacity = 16 : i64, thd.name = "tokens"}
// CHECK-SAME: %[[CU:.+]]: tensor<7xi32> {thd.capacity = 7 : i64, thd.name = "cu_seqlens"}
// CHECK-SAME: -> (tensor<8xi64> {thd.name = "tokens"}, tensor<8xi64> {thd.name = "labels"}, tensor<8xi64> {thd.name = "position_ids"}, tensor<8xf32> {thd.name = "loss_mask"}, tensor<8xi1> {thd.name = "padding_mask"}, tensor<7xi32> {thd.name = "cu_seqlens_padded"}, tensor<7xi32> {thd.name = "cu_seqlens"}, tensor<1xi32> {thd.name = "max_seqlen"}, tensor<1xi32> {thd.name = "status"})
// CHECK: %[[MASK:.+]] = thd.padding_mask {{.*}} capacity 16 : tensor<7xi32>, tensor<7xi32> -> tensor<16xi1>
// CHECK: %[[S:.+]] = thd.sanitize %[[TOK]], %[[MASK]] : tensor<16xi64>, tensor<16xi1>
// CHECK: %[[R:.+]] = thd.cp_slice %[[S]], {{.*}} cp 2 mode zigzag : tensor<16xi64>, tensor<7xi32> -> tensor<8xi64>
// CHECK: thd.pad_tail %[[R]] target 8 : tensor<8xi64> -> tensor<8xi64>
// CHECK: thd.pad_tail_metadata {{.*}} max_seqs 6 policy append_dummy_sequence : tensor<7xi32>, tensor<7xi32> -> tensor<7xi32>, tensor<7xi32>
// CHECK-NOT: ?x

// LARGE: tensor<8192xi64> {thd.capacity = 8192 : i64, thd.name = "tokens"}
// LARGE-SAME: tensor<65xi32> {thd.capacity = 65 : i64, thd.name = "cu_seqlens"}
// LARGE-SAME: -> (tensor<4096xi64> {thd.name = "tokens"}

// CAPTURABLE: func.func @megatron_graph_step

module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  // OPS-LABEL: func.func @ops
  // OPS-SAME: (%{{.+}}: tensor<6xi32> {thd.capacity = 6 : i64}, %{{.+}}: tensor<1xi32>)
  // OPS-SAME: -> (tensor<6xi32>, tensor<7xi32>, tensor<16xi64>, tensor<8xi32>, tensor<16xi32>, tensor<7xi32>)
  func.func @ops(%v: tensor<?xi32> {thd.capacity = #thd.expr<"N">}, %r: tensor<1xi32>)
      -> (tensor<?xi32>, tensor<?xi32>, tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) {
    // OPS: thd.align_lengths {{.*}} : tensor<6xi32>
    %p = thd.align_lengths %v cp "cp" tp 1 : tensor<?xi32>
    // OPS: thd.cu_seqlens {{.*}} : tensor<6xi32> -> tensor<7xi32>
    %cu = thd.cu_seqlens %p : tensor<?xi32> -> tensor<?xi32>
    // OPS: thd.position_ids {{.*}} capacity 16 : tensor<7xi32>, tensor<7xi32> -> tensor<16xi64>
    %pos = thd.position_ids %cu, %cu capacity "C*cp" : tensor<?xi32>, tensor<?xi32> -> tensor<?xi64>
    // OPS: thd.rope_positions {{.*}} cp 2 length 8 table_rows 16 : tensor<7xi32> -> tensor<8xi32>
    %rope = thd.rope_positions %cu, %r max_seqlen %r cp "cp" length "C" table_rows "C*cp" : tensor<?xi32> -> tensor<?xi32>
    // OPS: thd.seq_idx {{.*}} length 16 : tensor<7xi32> -> tensor<16xi32>
    %idx = thd.seq_idx %cu length "C*cp" : tensor<?xi32> -> tensor<?xi32>
    // OPS: thd.pad_cu_seqlens {{.*}} entries 7 : tensor<7xi32> -> tensor<7xi32>
    %pc = thd.pad_cu_seqlens %cu entries "N+1" : tensor<?xi32> -> tensor<?xi32>
    return %p, %cu, %pos, %rope, %idx, %pc : tensor<?xi32>, tensor<?xi32>, tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>
  }

  // A copy of examples/megatron_graph_step.mlir: editing the example does not
  // change what this test checks.
  func.func @megatron_graph_step(
      %tokens: tensor<?xi64> {thd.name = "tokens", thd.capacity = #thd.expr<"C*cp">},
      %labels: tensor<?xi64> {thd.name = "labels", thd.capacity = #thd.expr<"C*cp">},
      %position_ids: tensor<?xi64> {thd.name = "position_ids", thd.capacity = #thd.expr<"C*cp">},
      %loss_mask: tensor<?xf32> {thd.name = "loss_mask", thd.capacity = #thd.expr<"C*cp">},
      %cu_seqlens: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi64> {thd.name = "tokens"}, tensor<?xi64> {thd.name = "labels"},
          tensor<?xi64> {thd.name = "position_ids"}, tensor<?xf32> {thd.name = "loss_mask"},
          tensor<?xi1> {thd.name = "padding_mask"},
          tensor<?xi32> {thd.name = "cu_seqlens_padded"}, tensor<?xi32> {thd.name = "cu_seqlens"},
          tensor<1xi32> {thd.name = "max_seqlen"}, tensor<1xi32> {thd.name = "status"}) {
    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
    %mask = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %tok = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %lab = thd.sanitize %labels, %mask : tensor<?xi64>, tensor<?xi1>
    %pos = thd.sanitize %position_ids, %mask : tensor<?xi64>, tensor<?xi1>
    %lm = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>
    %tok_r = thd.cp_slice %tok, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lab_r = thd.cp_slice %lab, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %pos_r = thd.cp_slice %pos, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lm_r = thd.cp_slice %lm, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    %mask_r = thd.cp_slice %mask, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>
    %tok_out = thd.pad_tail %tok_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lab_out = thd.pad_tail %lab_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %pos_out = thd.pad_tail %pos_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lm_out = thd.pad_tail %lm_r target "C" fill 0.0 : tensor<?xf32> -> tensor<?xf32>
    %mask_out = thd.pad_tail %mask_r target "C" fill true : tensor<?xi1> -> tensor<?xi1>
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %num_seqs_out = thd.pad_tail_metadata
        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n
        cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
    return %tok_out, %lab_out, %pos_out, %lm_out, %mask_out, %cup_out, %cu_out,
           %max_seqlen_out, %status
        : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?xi1>,
          tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
