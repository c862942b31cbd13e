// Lowering of thd.cp_unslice: row g < T reads the rank and local row that
// kept it (zigzag: the chunk of its sequence, found by the search over cup;
// contiguous: g / (T / cp)), rows past T the ranks' tails in rank order;
// every source is clamped into the gathered rows. cp = 1 copies.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @zigzag
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<16xi64> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<16xi64> {llvm.noalias})
// CHECK: memref.load %[[N]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[LAST:.+]] = memref.load %[[CUP]][
// CHECK: %[[TOTAL:.+]] = arith.minsi %{{.+}}, %c16{{.*}} : index
// CHECK: %[[LOCAL:.+]] = arith.divui %[[TOTAL]], %c2{{.*}} : index
// CHECK: %[[PAST:.+]] = arith.subi %[[ROW]], %[[TOTAL]] : index
// CHECK: %[[TAILROWS:.+]] = arith.subi %c8{{.*}}, %[[LOCAL]] : index
// CHECK: %[[WIDTH:.+]] = arith.maxsi %[[TAILROWS]], %c1{{.*}} : index
// CHECK: %[[TAILRANK:.+]] = arith.divui %{{.+}}, %[[WIDTH]] : index
// CHECK: %[[TAILBASE:.+]] = arith.muli %[[TAILRANK]], %c8{{.*}} : index
// CHECK: %[[TAILSTART:.+]] = arith.addi %[[TAILBASE]], %[[LOCAL]] : index
// CHECK: %[[TAIL:.+]] = arith.addi %[[TAILSTART]], %{{.+}} : index
// CHECK: %[[SEARCH:.+]]:2 = scf.while
// CHECK: %[[HALF:.+]] = arith.divsi %{{.+}}, %c4{{.*}} : index
// CHECK: %[[H:.+]] = arith.maxsi %[[HALF]], %c1{{.*}} : index
// CHECK: %[[K:.+]] = arith.subi %[[ROW]], %{{.+}} : index
// CHECK: %[[CHUNK:.+]] = arith.divsi %[[K]], %[[H]] : index
// CHECK: %[[FIRST:.+]] = arith.cmpi slt, %[[CHUNK]], %c2{{.*}} : index
// CHECK: %[[MIRROR:.+]] = arith.subi %c3{{.*}}, %[[CHUNK]] : index
// CHECK: arith.select %[[FIRST]], %[[CHUNK]], %[[MIRROR]] : index
// CHECK: arith.remsi %[[K]], %[[H]] : index
// CHECK: %[[SEQ:.+]] = arith.minsi %{{.+}}, %c15{{.*}} : index
// CHECK: %[[INSEQ:.+]] = arith.cmpi slt, %[[ROW]], %[[TOTAL]] : index
// CHECK: arith.select %[[INSEQ]], %[[SEQ]], %[[TAIL]] : index
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]]]
func.func @zigzag(%gathered: tensor<16xi64>, %cup: tensor<7xi32>, %n: tensor<1xi32>) -> tensor<16xi64> {
  %s = thd.cp_unslice %gathered, %cup num_seqs %n cp 2 mode zigzag rows_per_rank 8 : tensor<16xi64>, tensor<7xi32> -> tensor<16xi64>
  return %s : tensor<16xi64>
}

// CHECK-LABEL: func.func @contiguous
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<12xf32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<12xf32> {llvm.noalias})
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c12{{(_[0-9]+)?}} step
// CHECK-NOT: scf.while
// CHECK: %[[TOTAL:.+]] = arith.minsi %{{.+}}, %c12{{.*}} : index
// CHECK: %[[LOCAL:.+]] = arith.divui %[[TOTAL]], %c3{{.*}} : index
// CHECK: %[[SHARE:.+]] = arith.maxsi %[[LOCAL]], %c1{{.*}} : index
// CHECK: %[[RANK0:.+]] = arith.divui %[[ROW]], %[[SHARE]] : index
// CHECK: %[[RANK:.+]] = arith.minsi %[[RANK0]], %c2{{.*}} : index
// CHECK: %[[START:.+]] = arith.muli %[[RANK]], %[[SHARE]] : index
// CHECK: %[[K:.+]] = arith.subi %[[ROW]], %[[START]] : index
// CHECK: %[[BASE:.+]] = arith.muli %[[RANK]], %c4{{.*}} : index
// CHECK: arith.addi %[[BASE]], %[[K]] : index
// CHECK: %[[INSEQ:.+]] = arith.cmpi slt, %[[ROW]], %[[TOTAL]] : index
// CHECK: arith.select %[[INSEQ]]
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]]]
func.func @contiguous(%gathered: tensor<12xf32>, %cup: tensor<7xi32>, %n: tensor<1xi32>) -> tensor<12xf32> {
  %s = thd.cp_unslice %gathered, %cup num_seqs %n cp 3 mode contiguous rows_per_rank 4 : tensor<12xf32>, tensor<7xi32> -> tensor<12xf32>
  return %s : tensor<12xf32>
}

// CHECK-LABEL: func.func @cp1
// CHECK-SAME: (%[[IN:[a-z0-9]+]]: memref<8xi64> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<8xi64> {llvm.noalias})
// CHECK-NOT: memref.load %[[CUP]]
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8{{(_[0-9]+)?}} step
// CHECK-NOT: memref.load %[[CUP]]
// CHECK: %[[V:.+]] = memref.load %[[IN]][
// CHECK: memref.store %[[V]], %[[OUT]][%[[ROW]]]
func.func @cp1(%gathered: tensor<8xi64>, %cup: tensor<7xi32>) -> tensor<8xi64> {
  %s = thd.cp_unslice %gathered, %cup cp 1 mode zigzag rows_per_rank 8 : tensor<8xi64>, tensor<7xi32> -> tensor<8xi64>
  return %s : tensor<8xi64>
}
