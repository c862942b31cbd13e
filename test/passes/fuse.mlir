// thd-fuse moves every step of a pipeline into one thd.fused kernel.
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-force-static-shapes --thd-fuse | FileCheck %s
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-fuse | FileCheck %s --check-prefix=CONST

// CHECK-LABEL: func.func @megatron_graph_step
// CHECK-NEXT: %[[K:.+]]:9 = thd.fused -> tensor<1xi32>, tensor<8xi64>, tensor<8xi64>, tensor<8xi64>, tensor<8xf32>, tensor<8xi1>, tensor<7xi32>, tensor<7xi32>, tensor<1xi32> {
// CHECK: thd.validate
// CHECK: thd.padding_mask
// CHECK: thd.cp_slice
// CHECK: thd.pad_tail_metadata
// CHECK: thd.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[K]]#1, %[[K]]#2, %[[K]]#3, %[[K]]#4, %[[K]]#5, %[[K]]#7, %[[K]]#6, %[[K]]#8, %[[K]]#0
// CHECK-NOT: thd.fused
// CHECK: // -----

// The pipeline below is a copy of examples/megatron_graph_step.mlir, so that
// editing the example does not change what this test checks.
module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
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

// -----

// CONST-LABEL: func.func @constants_move_in
// CONST-NEXT: thd.fused -> tensor<8xi64> {
// CONST-NEXT: arith.constant dense<3> : tensor<1xi32>
func.func @constants_move_in(%t: tensor<8xi64>, %cu: tensor<4xi32>, %r: tensor<1xi32>) -> tensor<8xi64> {
  %n = arith.constant dense<3> : tensor<1xi32>
  %s = thd.cp_slice %t, %cu, %r num_seqs %n cp 1 mode zigzag : tensor<8xi64>, tensor<4xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}

// -----

func.func @blocked(%t: tensor<8xi64>, %cu: tensor<4xi32>, %r: tensor<1xi32>) -> tensor<8xi64> {
  %s = thd.cp_slice %t, %cu, %r cp 1 mode zigzag : tensor<8xi64>, tensor<4xi32> -> tensor<8xi64>
  // expected-error @+1 {{stands between the steps of 'blocked' and uses the result of 'thd.cp_slice': the steps cannot be fused into one kernel}}
  %c = tensor.cast %s : tensor<8xi64> to tensor<8xi64>
  %p = thd.pad_tail %c target 8 : tensor<8xi64> -> tensor<8xi64>
  return %p : tensor<8xi64>
}
