// Lowering of thd.cp_slice: zigzag finds the sequence of the local row by a
// binary search over cup / cp and reads row start + k + half * (r or
// 2cp-2-r); contiguous reads row r * (T / cp) + row; cp = 1 copies.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @zigzag
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<16xi64> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[RANK:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<8xi64> {llvm.noalias})
// CHECK-DAG: memref.load %[[N]][
// CHECK-DAG: %[[R:.+]] = memref.load %[[RANK]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step
// CHECK: %[[SEARCH:.+]]:2 = scf.while
// CHECK: %[[PROBE:.+]] = memref.load %[[CUP]][
// CHECK: arith.divsi %[[PROBE]], %c2_i32{{.*}} : i32
// CHECK: arith.cmpi sle, %{{.+}}, %[[ROW]] : index
// CHECK: scf.yield
// CHECK: arith.subi %[[SEARCH]]#0
// CHECK: %[[HALF:.+]] = arith.divui %{{.+}}, %c2{{.*}} : index
// CHECK: %[[K:.+]] = arith.subi %[[ROW]], %{{.+}} : index
// CHECK: %[[FIRST:.+]] = arith.cmpi slt, %[[K]], %[[HALF]] : index
// CHECK: %[[MIRROR:.+]] = arith.subi %c2{{.*}}, %{{.+}} : index
// CHECK: %[[CHUNK:.+]] = arith.select %[[FIRST]], %{{.+}}, %[[MIRROR]] : index
// CHECK: %[[SHIFT:.+]] = arith.muli %[[CHUNK]], %[[HALF]] : index
// CHECK: %[[SOURCE:.+]] = arith.addi %{{.+}}, %[[SHIFT]] : index
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]]]
func.func @zigzag(%tokens: tensor<16xi64>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>) -> tensor<8xi64> {
  %s = thd.cp_slice %tokens, %cup, %rank num_seqs %n cp 2 mode zigzag : tensor<16xi64>, tensor<7xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}

// CHECK-LABEL: func.func @contiguous
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<16xi64> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[RANK:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<8xi64> {llvm.noalias})
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step
// CHECK-NOT: scf.while
// CHECK: memref.load %[[CUP]][
// CHECK: %[[SHARE:.+]] = arith.divui %{{.+}}, %c2{{.*}} : index
// CHECK: %[[BASE:.+]] = arith.muli %{{.+}}, %[[SHARE]] : index
// CHECK: %[[SOURCE:.+]] = arith.addi %[[BASE]], %[[ROW]] : index
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]]]
func.func @contiguous(%tokens: tensor<16xi64>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>) -> tensor<8xi64> {
  %s = thd.cp_slice %tokens, %cup, %rank num_seqs %n cp 2 mode contiguous : tensor<16xi64>, tensor<7xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}

// CHECK-LABEL: func.func @cp1
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<16xi64> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[RANK:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xi64> {llvm.noalias})
// CHECK-NOT: memref.load %[[CUP]]
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK-NOT: memref.load %[[CUP]]
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]]]
func.func @cp1(%tokens: tensor<16xi64>, %cup: tensor<7xi32>, %rank: tensor<1xi32>) -> tensor<16xi64> {
  %s = thd.cp_slice %tokens, %cup, %rank cp 1 mode zigzag : tensor<16xi64>, tensor<7xi32> -> tensor<16xi64>
  return %s : tensor<16xi64>
}
