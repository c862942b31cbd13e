// Lowering of thd.linear_chunks (S15): chunk_count sums ceil(max(len, 0) /
// BT) over every sequence once, before the element loops; chunk_offsets[i]
// sums it over the first min(i, N) sequences; entry k of chunk_indices is
// half k % 2 of row r = k / 2, found by the sequence search over the chunk
// offsets at min(r, chunk_count), so the rows past the chunks are the
// sentinel.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @linear_chunks_count
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK: %[[COUNT:.+]] = scf.for %{{.+}} = %{{.+}} to %c4{{(_[0-9]+)?}} step %{{.+}} iter_args(%[[ACC:.+]] = %c0_i32{{.*}}) -> (i32)
// CHECK: %[[LEN:.+]] = arith.subi %{{.+}}, %{{.+}} : i32
// CHECK: %[[POS:.+]] = arith.maxsi %[[LEN]], %c0_i32{{.*}} : i32
// CHECK: %[[CHUNKS:.+]] = arith.ceildivsi %[[POS]], %c4_i32{{.*}} : i32
// CHECK: %[[SUM:.+]] = arith.addi %[[ACC]], %[[CHUNKS]] : i32
// CHECK: scf.yield %[[SUM]] : i32
// CHECK: memref.store %[[COUNT]], %[[OUT]][
func.func @linear_chunks_count(%cup: tensor<4xi32>) -> tensor<1xi32> {
  %i, %o, %c = thd.linear_chunks %cup chunk_size 4 rows 8 : tensor<4xi32> -> tensor<10xi32>, tensor<4xi32>
  return %c : tensor<1xi32>
}

// CHECK-LABEL: func.func @linear_chunks_offsets
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<4xi32> {llvm.noalias})
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c4{{(_[0-9]+)?}} step
// CHECK: %[[UPTO:.+]] = arith.minsi %[[I]], %c3{{.*}} : index
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %[[UPTO]] step %{{.+}} iter_args(%{{.+}} = %c0_i32{{.*}}) -> (i32)
// CHECK: memref.load %[[CUP]][
// CHECK: arith.ceildivsi %{{.+}}, %c16_i32{{.*}} : i32
// CHECK: memref.store %[[SUM]], %[[OUT]][%[[I]]]
func.func @linear_chunks_offsets(%cup: tensor<4xi32>) -> tensor<4xi32> {
  %i, %o, %c = thd.linear_chunks %cup chunk_size 16 rows 8 : tensor<4xi32> -> tensor<8xi32>, tensor<4xi32>
  return %o : tensor<4xi32>
}

// CHECK-LABEL: func.func @linear_chunks_indices
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<10xi32> {llvm.noalias})
// CHECK: %[[COUNT:.+]] = scf.for
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c10{{(_[0-9]+)?}} step
// CHECK: %[[ROW:.+]] = arith.divui %[[K]], %c2{{.*}} : index
// CHECK: %[[COUNTIDX:.+]] = arith.index_cast %[[COUNT]] : i32 to index
// CHECK: %[[AT:.+]] = arith.minsi %[[ROW]], %[[COUNTIDX]] : index
// CHECK: %[[SEQ:.+]] = scf.if
// CHECK: scf.while
// CHECK: memref.store %[[SEQ]], %{{.+}}[
// CHECK: %[[START:.+]] = scf.for
// CHECK: %[[FIRST:.+]] = arith.select %{{.+}}, %c0_i32{{.*}}, %[[START]] : i32
// CHECK: %[[AT32:.+]] = arith.index_cast %[[AT]] : index to i32
// CHECK: %[[T:.+]] = arith.subi %[[AT32]], %[[FIRST]] : i32
// CHECK: %[[HALF:.+]] = arith.remui %[[K]], %c2{{.*}} : index
// CHECK: %[[ISSEQ:.+]] = arith.cmpi eq, %[[HALF]], %c0{{.*}} : index
// CHECK: %[[SEQ32:.+]] = arith.index_cast %[[SEQ]] : index to i32
// CHECK: %[[R:.+]] = arith.select %[[ISSEQ]], %[[SEQ32]], %[[T]] : i32
// CHECK: memref.store %[[R]], %[[OUT]][%[[K]]]
func.func @linear_chunks_indices(%cup: tensor<4xi32>) -> tensor<10xi32> {
  %i, %o, %c = thd.linear_chunks %cup chunk_size 4 rows 8 : tensor<4xi32> -> tensor<10xi32>, tensor<4xi32>
  return %i : tensor<10xi32>
}
