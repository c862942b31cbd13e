// thd-fuse moves every step of a pipeline into one thd.fused kernel.
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --thd-force-static-shapes --thd-fuse | FileCheck %s
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
