// Lowering of thd.pad_tail with a target: row < rows(input) ? input[row] :
// fill, over the target's rows.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @pad_tail
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<6xi64> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<8xi64> {llvm.noalias})
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step
// CHECK: %[[INSIDE:.+]] = arith.cmpi slt, %[[ROW]], %c6{{.*}} : index
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: %[[R:.+]] = arith.select %[[INSIDE]], %[[V]], %c5_i64{{.*}} : i64
// CHECK: memref.store %[[R]], %[[OUT]][%[[ROW]]]
func.func @pad_tail(%tokens: tensor<6xi64>) -> tensor<8xi64> {
  %p = thd.pad_tail %tokens target 8 fill 5 : tensor<6xi64> -> tensor<8xi64>
  return %p : tensor<8xi64>
}

// CHECK-LABEL: func.func @pad_tail_mask
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<6xi1> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<8xi1> {llvm.noalias})
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step
// CHECK: %[[INSIDE:.+]] = arith.cmpi slt, %[[ROW]], %c6{{.*}} : index
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: %[[R:.+]] = arith.select %[[INSIDE]], %[[V]], %true{{.*}} : i1
// CHECK: memref.store %[[R]], %[[OUT]][%[[ROW]]]
func.func @pad_tail_mask(%mask: tensor<6xi1>) -> tensor<8xi1> {
  %p = thd.pad_tail %mask target 8 fill true : tensor<6xi1> -> tensor<8xi1>
  return %p : tensor<8xi1>
}
