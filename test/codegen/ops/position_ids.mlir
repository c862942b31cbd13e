// Lowering of thd.position_ids: per row, the binary search finds the
// sequence s; the position is row - cup[s] (cast to the element type), and 0
// where the padding test of thd.padding_mask says padding.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @position_ids
// CHECK-SAME: (%[[CU:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xi64> {llvm.noalias})
// CHECK: memref.load %[[N]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[SEARCH:.+]]:2 = scf.while
// CHECK: memref.load %[[CUP]][
// CHECK: arith.cmpi sle, %{{.+}}, %[[ROW]] : index
// CHECK: %[[START:.+]] = arith.index_cast %{{.+}} : i32 to index
// CHECK: %[[K:.+]] = arith.subi %[[ROW]], %[[START]] : index
// CHECK: %[[POS:.+]] = arith.index_cast %[[K]] : index to i64
// CHECK: memref.load %[[CU]][
// CHECK: %[[PAST:.+]] = arith.cmpi sge, %[[ROW]], %{{.+}} : index
// CHECK: %[[BEYOND:.+]] = arith.cmpi sge, %[[ROW]], %{{.+}} : index
// CHECK: %[[PAST_END:.+]] = arith.ori %[[PAST]], %[[BEYOND]] : i1
// CHECK: %[[PAD:.+]] = arith.ori %[[PAST_END]], %{{.+}} : i1
// CHECK: %[[R:.+]] = arith.select %[[PAD]], %c0_i64{{.*}}, %[[POS]] : i64
// CHECK: memref.store %[[R]], %[[OUT]][%[[ROW]]]
func.func @position_ids(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %n: tensor<1xi32>) -> tensor<16xi64> {
  %p = thd.position_ids %cu, %cup num_seqs %n capacity 16 : tensor<7xi32>, tensor<7xi32> -> tensor<16xi64>
  return %p : tensor<16xi64>
}
