// Lowering of thd.linear_chunks (S15): chunk_count sums ceil(max(len, 0) /
// BT) over every sequence once, before the element loops; chunk_offsets[i]
// sums it over the first min(i, N) sequences; entry k of chunk_indices is
// half k % 2 of row r = k / 2, in the sequence a walk over the sequences
// reaches at min(r, chunk_count) (summing each one's chunks once; it stops
// at the last sequence), so the rows past the chunks are the sentinel.
// Lengths are taken in i64 (two i32 entries can be 2^32 - 1 apart), each
// count and every sum is capped at NT (only the first NT chunks are
// listed), and chunk_count's partial sums are i64: nothing wraps, whatever
// the offsets.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @linear_chunks_count
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK: %[[TOTAL:.+]] = scf.for %{{.+}} = %{{.+}} to %c4{{(_[0-9]+)?}} step %{{.+}} iter_args(%[[ACC:.+]] = %c0_i64{{.*}}) -> (i64)
// CHECK: %[[BEGIN:.+]] = arith.extsi %{{.+}} : i32 to i64
// CHECK: %[[END:.+]] = arith.extsi %{{.+}} : i32 to i64
// CHECK: %[[LEN:.+]] = arith.subi %[[END]], %[[BEGIN]] : i64
// CHECK: %[[POS:.+]] = arith.maxsi %[[LEN]], %c0_i64{{.*}} : i64
// CHECK: %[[CHUNKS:.+]] = arith.ceildivsi %[[POS]], %c4_i64{{.*}} : i64
// CHECK: %[[LISTED:.+]] = arith.minsi %[[CHUNKS]], %c5_i64{{.*}} : i64
// CHECK: %[[SUM:.+]] = arith.addi %[[ACC]], %[[LISTED]] : i64
// CHECK: scf.yield %[[SUM]] : i64
// CHECK: %[[CAPPED:.+]] = arith.minsi %[[TOTAL]], %c5_i64{{.*}} : i64
// CHECK: %[[COUNT:.+]] = arith.trunci %[[CAPPED]] : i64 to i32
// CHECK: memref.store %[[COUNT]], %[[OUT]][
func.func @linear_chunks_count(%cup: tensor<4xi32>) -> tensor<1xi32> {
  %i, %o, %c = thd.linear_chunks %cup chunk_size 4 rows 8 : tensor<4xi32> -> tensor<10xi32>, tensor<4xi32>
  return %c : tensor<1xi32>
}

// CHECK-LABEL: func.func @linear_chunks_offsets
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<4xi32> {llvm.noalias})
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c4{{(_[0-9]+)?}} step
// CHECK: %[[UPTO:.+]] = arith.minsi %[[I]], %c3{{.*}} : index
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %[[UPTO]] step %{{.+}} iter_args(%[[ACC:.+]] = %c0_i32{{.*}}) -> (i32)
// CHECK: memref.load %[[CUP]][
// CHECK: arith.ceildivsi %{{.+}}, %c16_i64{{.*}} : i64
// CHECK: %[[LISTED:.+]] = arith.minsi %{{.+}}, %c4_i64{{.*}} : i64
// CHECK: %[[CHUNKS:.+]] = arith.trunci %[[LISTED]] : i64 to i32
// CHECK: %[[NEXT:.+]] = arith.addi %[[ACC]], %[[CHUNKS]] : i32
// CHECK: %[[CAPPED:.+]] = arith.minsi %[[NEXT]], %c4_i32{{.*}} : i32
// CHECK: scf.yield %[[CAPPED]] : i32
// CHECK: memref.store %[[SUM]], %[[OUT]][%[[I]]]
func.func @linear_chunks_offsets(%cup: tensor<4xi32>) -> tensor<4xi32> {
  %i, %o, %c = thd.linear_chunks %cup chunk_size 16 rows 8 : tensor<4xi32> -> tensor<8xi32>, tensor<4xi32>
  return %o : tensor<4xi32>
}

// CHECK-LABEL: func.func @linear_chunks_indices
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<10xi32> {llvm.noalias})
// CHECK: scf.for
// CHECK: %[[COUNT:.+]] = arith.trunci %{{.+}} : i64 to i32
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c10{{(_[0-9]+)?}} step
// CHECK: %[[ROW:.+]] = arith.divui %[[K]], %c2{{.*}} : index
// CHECK: %[[COUNTIDX:.+]] = arith.index_cast %[[COUNT]] : i32 to index
// CHECK: %[[AT:.+]] = arith.minsi %[[ROW]], %[[COUNTIDX]] : index
// CHECK: %[[POS:.+]] = arith.index_cast %[[AT]] : index to i32
// CHECK: %[[WALK:.+]]:3 = scf.while (%[[S:.+]] = %{{.+}}, %[[FIRST:.+]] = %c0_i32{{.*}}) : (index, i32) -> (index, i32, i32)
// CHECK: arith.ceildivsi %{{.+}}, %c4_i64{{.*}} : i64
// CHECK: %[[CHUNKS:.+]] = arith.trunci %{{.+}} : i64 to i32
// CHECK: %[[END:.+]] = arith.addi %[[FIRST]], %[[CHUNKS]] : i32
// CHECK: %[[NOTLAST:.+]] = arith.cmpi slt, %[[S]], %c2{{.*}} : index
// CHECK: %[[PAST:.+]] = arith.cmpi sle, %[[END]], %[[POS]] : i32
// CHECK: %[[MORE:.+]] = arith.andi %[[NOTLAST]], %[[PAST]] : i1
// CHECK: scf.condition(%[[MORE]]) %[[S]], %[[FIRST]], %[[END]] : index, i32, i32
// CHECK: ^bb0(%[[S2:.+]]: index, %{{.+}}: i32, %[[END2:.+]]: i32):
// CHECK: %[[NEXT:.+]] = arith.addi %[[S2]], %c1{{.*}} : index
// CHECK: scf.yield %[[NEXT]], %[[END2]] : index, i32
// CHECK: %[[T:.+]] = arith.subi %[[POS]], %[[WALK]]#1 : i32
// CHECK: %[[HALF:.+]] = arith.remui %[[K]], %c2{{.*}} : index
// CHECK: %[[ISSEQ:.+]] = arith.cmpi eq, %[[HALF]], %c0{{.*}} : index
// CHECK: %[[SEQ32:.+]] = arith.index_cast %[[WALK]]#0 : index to i32
// CHECK: %[[R:.+]] = arith.select %[[ISSEQ]], %[[SEQ32]], %[[T]] : i32
// CHECK: memref.store %[[R]], %[[OUT]][%[[K]]]
func.func @linear_chunks_indices(%cup: tensor<4xi32>) -> tensor<10xi32> {
  %i, %o, %c = thd.linear_chunks %cup chunk_size 4 rows 8 : tensor<4xi32> -> tensor<10xi32>, tensor<4xi32>
  return %i : tensor<10xi32>
}
