// Lowering of thd.rope_positions and thd.seq_idx: a binary search per row
// over the offsets divided by cp (rope) or as they are (seq_idx); RoPE rows
// are then shifted for an absolute table and clamped into it.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// rope_positions: chunk r (r*h + k) or chunk 2cp-1-r (L*cp - (r+1)*h + k-h).
// CHECK-LABEL: func.func @rope_positions
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[RANK:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[MAX:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<8xi32> {llvm.noalias})
// CHECK: %[[R:.+]] = memref.load %[[RANK]][
// CHECK: %[[MS:.+]] = memref.load %[[MAX]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step
// CHECK: scf.while
// CHECK: %[[PROBE:.+]] = memref.load %[[CUP]][
// CHECK: arith.divsi %[[PROBE]], %c2_i32{{.*}} : i32
// CHECK: arith.cmpi sle, %{{.+}}, %[[ROW]] : index
// CHECK: %[[K:.+]] = arith.subi %[[ROW]], %{{.+}} : index
// CHECK: arith.index_cast %[[R]] : i32 to index
// CHECK: %[[FIRST:.+]] = arith.cmpi slt, %[[K]], %{{.+}} : index
// CHECK: %[[POS:.+]] = arith.select %[[FIRST]], %{{.+}}, %{{.+}} : index
// Then the absolute-table shift (64 rows > max_seqlen: + the start) and the
// clamp into [0, 63].
// CHECK: %[[MSI:.+]] = arith.index_cast %[[MS]] : i32 to index
// CHECK: %[[ABS:.+]] = arith.cmpi sgt, %c64{{(_[0-9]+)?}}, %[[MSI]] : index
// CHECK: %[[SHIFTED:.+]] = arith.addi %[[POS]], %{{.+}} : index
// CHECK: %[[TABLE:.+]] = arith.select %[[ABS]], %[[SHIFTED]], %[[POS]] : index
// CHECK: %[[LO:.+]] = arith.maxsi %[[TABLE]], %c0{{(_[0-9]+)?}} : index
// CHECK: %[[HI:.+]] = arith.minsi %[[LO]], %c63{{(_[0-9]+)?}} : index
// CHECK: %[[POS32:.+]] = arith.index_cast %[[HI]] : index to i32
// CHECK: memref.store %[[POS32]], %[[OUT]][%[[ROW]]]
func.func @rope_positions(%cup: tensor<7xi32>, %rank: tensor<1xi32>, %max_seqlen: tensor<1xi32>) -> tensor<8xi32> {
  %r = thd.rope_positions %cup, %rank max_seqlen %max_seqlen cp 2 length 8 table_rows 64 : tensor<7xi32> -> tensor<8xi32>
  return %r : tensor<8xi32>
}

// seq_idx: the sequence of the row, n on the tail past cup[n].
// CHECK-LABEL: func.func @seq_idx
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xi32> {llvm.noalias})
// CHECK: memref.load %[[N]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[SEARCH:.+]]:2 = scf.while
// CHECK: memref.load %[[CUP]][
// CHECK: scf.yield
// CHECK: arith.subi %[[SEARCH]]#0
// CHECK: memref.load %[[CUP]][
// CHECK: %[[TOTAL:.+]] = arith.index_cast %{{.+}} : i32 to index
// CHECK: %[[TAIL:.+]] = arith.cmpi sge, %[[ROW]], %[[TOTAL]] : index
// CHECK: %[[S:.+]] = arith.select %[[TAIL]], %{{.+}}, %{{.+}} : index
// CHECK: %[[S32:.+]] = arith.index_cast %[[S]] : index to i32
// CHECK: memref.store %[[S32]], %[[OUT]][%[[ROW]]]
func.func @seq_idx(%cup: tensor<4xi32>, %n: tensor<1xi32>) -> tensor<16xi32> {
  %i = thd.seq_idx %cup num_seqs %n length 16 : tensor<4xi32> -> tensor<16xi32>
  return %i : tensor<16xi32>
}
