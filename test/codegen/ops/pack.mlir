// Lowering of thd.pack: per row, the cursor (the previous row's sequence, or
// the next one) or else a binary search finds the sequence s; the
// row reads pool[offsets[ids[s]] + row - cup[s]] (clamped loads) and selects
// the pad value where the row is padding. No packed buffer is allocated.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @pack
// CHECK-SAME: (%[[POOL:[a-z0-9]+]]: memref<64xi64> {llvm.noalias}, %[[OFFSETS:[a-z0-9]+]]: memref<8xi32> {llvm.noalias}, %[[IDS:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[CU:[a-z0-9]+]]: memref<6xi32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<6xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xi64> {llvm.noalias})
// CHECK: %[[CURSOR:.+]] = memref.alloca() : memref<1xindex>
// CHECK-NOT: memref.alloc(
// CHECK: memref.load %[[N]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[HINT:.+]] = memref.load %[[CURSOR]][
// CHECK: memref.load %[[CUP]][
// CHECK: %[[S:.+]] = scf.if
// CHECK: arith.select %{{.+}}, %[[HINT]], %{{.+}} : index
// CHECK: scf.while
// CHECK: memref.load %[[CUP]][
// CHECK: memref.store %[[S]], %[[CURSOR]]
// CHECK: %[[K:.+]] = arith.subi %[[ROW]], %{{.+}} : index
// CHECK: %[[ID:.+]] = memref.load %[[IDS]][
// CHECK: %[[OFFSET:.+]] = memref.load %[[OFFSETS]][
// CHECK: %[[OFFSETIDX:.+]] = arith.index_cast %[[OFFSET]] : i32 to index
// CHECK: %[[SOURCE:.+]] = arith.addi %[[OFFSETIDX]], %[[K]] : index
// CHECK: %[[VALUE:.+]] = memref.load %[[POOL]][
// CHECK: memref.load %[[CU]][
// CHECK: %[[PAST:.+]] = arith.cmpi sge, %[[ROW]], %{{.+}} : index
// CHECK: %[[BEYOND:.+]] = arith.cmpi sge, %[[ROW]], %{{.+}} : index
// CHECK: %[[PAST_END:.+]] = arith.ori %[[PAST]], %[[BEYOND]] : i1
// CHECK: %[[PAD:.+]] = arith.ori %[[PAST_END]], %{{.+}} : i1
// CHECK: %[[R:.+]] = arith.select %[[PAD]], %c-1_i64{{.*}}, %[[VALUE]] : i64
// CHECK: memref.store %[[R]], %[[OUT]][%[[ROW]]]
func.func @pack(%pool: tensor<64xi64>, %offsets: tensor<8xi32>, %ids: tensor<5xi32>,
                %cu: tensor<6xi32>, %cup: tensor<6xi32>, %n: tensor<1xi32>) -> tensor<16xi64> {
  %p = thd.pack %pool[%offsets, %ids], %cu, %cup num_seqs %n pad -1 capacity 16
      : tensor<64xi64>, tensor<8xi32>, tensor<5xi32>, tensor<6xi32>, tensor<6xi32> -> tensor<16xi64>
  return %p : tensor<16xi64>
}
