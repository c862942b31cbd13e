// Lowering of thd.sanitize: mask[row] ? fill : input[row], rows past the
// mask's length counting as padding.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @sanitize
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<16xi64> {llvm.noalias}, %[[MASK:[a-z0-9]+]]: memref<16xi1> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xi64> {llvm.noalias})
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[M:.+]] = memref.load %[[MASK]][
// CHECK: %[[PAD:.+]] = arith.select %{{.+}}, %[[M]], %true{{.*}} : i1
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: %[[R:.+]] = arith.select %[[PAD]], %c7_i64{{.*}}, %[[V]] : i64
// CHECK: memref.store %[[R]], %[[OUT]][%[[ROW]]]
func.func @sanitize(%tokens: tensor<16xi64>, %mask: tensor<16xi1>) -> tensor<16xi64> {
  %s = thd.sanitize %tokens, %mask fill 7 : tensor<16xi64>, tensor<16xi1>
  return %s : tensor<16xi64>
}

// CHECK-LABEL: func.func @sanitize_float
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<16xf32> {llvm.noalias}, %[[MASK:[a-z0-9]+]]: memref<16xi1> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xf32> {llvm.noalias})
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK-DAG: %[[FILL:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[M:.+]] = memref.load %[[MASK]][
// CHECK-DAG: %[[V:.+]] = memref.load %[[IN]][
// CHECK: %[[R:.+]] = arith.select %{{.+}}, %[[FILL]], %[[V]] : f32
// CHECK: memref.store %[[R]], %[[OUT]][%[[ROW]]]
func.func @sanitize_float(%loss: tensor<16xf32>, %mask: tensor<16xi1>) -> tensor<16xf32> {
  %s = thd.sanitize %loss, %mask fill 0.5 : tensor<16xf32>, tensor<16xi1>
  return %s : tensor<16xf32>
}
