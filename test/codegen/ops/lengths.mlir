// Lowering of the per-sequence length ops: thd.align_lengths rounds up with
// one signed division by G, thd.gather selects 0 past num_seqs and clamps its
// ids into the values, thd.cu_seqlens sums the first min(i, n) lengths.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @align_lengths
// CHECK-SAME: (%[[V:[a-z0-9]+]]: memref<6xi32> {llvm.noalias}, %[[P:[a-z0-9]+]]: memref<6xi32> {llvm.noalias})
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c6{{(_[0-9]+)?}} step
// CHECK: %[[X:.+]] = memref.load %[[V]][
// CHECK: %[[Q:.+]] = arith.ceildivsi %[[X]], %c12_i32{{.*}} : i32
// CHECK: %[[R:.+]] = arith.muli %[[Q]], %c12_i32{{.*}} : i32
// CHECK: memref.store %[[R]], %[[P]][%[[I]]]
func.func @align_lengths(%v: tensor<6xi32>) -> tensor<6xi32> {
  %p = thd.align_lengths %v cp 2 tp 3 sequence_parallel : tensor<6xi32>
  return %p : tensor<6xi32>
}

// Dynamic CP: G = 2*cp*dp, here with cp = 1 (2*1*4 = 8).
// CHECK-LABEL: func.func @align_lengths_dynamic_cp
// CHECK: arith.ceildivsi %{{.+}}, %c8_i32{{.*}} : i32
// CHECK: arith.muli %{{.+}}, %c8_i32{{.*}} : i32
func.func @align_lengths_dynamic_cp(%v: tensor<6xi32>) -> tensor<6xi32> {
  %p = thd.align_lengths %v cp 1 tp 1 dynamic_cp dp 4 : tensor<6xi32>
  return %p : tensor<6xi32>
}

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[VALUES:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[IDS:[a-z0-9]+]]: memref<3xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<3xi32> {llvm.noalias})
// CHECK: %[[COUNT:.+]] = memref.load %[[N]][
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c3{{(_[0-9]+)?}} step
// CHECK: %[[ID:.+]] = memref.load %[[IDS]][
// CHECK: %[[IDX:.+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[LO:.+]] = arith.maxsi %[[IDX]], %c0{{.*}} : index
// CHECK: %[[CLAMPED:.+]] = arith.minsi %[[LO]], %c4{{.*}} : index
// CHECK: %[[VALUE:.+]] = memref.load %[[VALUES]][%[[CLAMPED]]]
// CHECK: %[[INSIDE:.+]] = arith.cmpi slt, %[[I]], %{{.+}} : index
// CHECK: %[[R:.+]] = arith.select %[[INSIDE]], %[[VALUE]], %c0_i32{{.*}} : i32
// CHECK: memref.store %[[R]], %[[OUT]][%[[I]]]
func.func @gather(%values: tensor<5xi32>, %ids: tensor<3xi32>, %n: tensor<1xi32>) -> tensor<3xi32> {
  %g = thd.gather %values[%ids] num_seqs %n : tensor<5xi32>, tensor<3xi32> -> tensor<3xi32>
  return %g : tensor<3xi32>
}

// CHECK-LABEL: func.func @cu_seqlens
// CHECK-SAME: (%[[LENGTHS:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<5xi32> {llvm.noalias})
// CHECK: memref.load %[[N]][
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c5{{(_[0-9]+)?}} step
// CHECK: %[[UPTO:.+]] = arith.minsi %[[I]], %{{.+}} : index
// CHECK: %[[SUM:.+]] = scf.for %[[J:.+]] = %{{.+}} to %[[UPTO]] step %{{.+}} iter_args(%[[ACC:.+]] = %c0_i32{{.*}}) -> (i32)
// CHECK: %[[L:.+]] = memref.load %[[LENGTHS]][
// CHECK: %[[NEXT:.+]] = arith.addi %[[ACC]], %[[L]] : i32
// CHECK: scf.yield %[[NEXT]] : i32
// CHECK: memref.store %[[SUM]], %[[OUT]][%[[I]]]
func.func @cu_seqlens(%lengths: tensor<4xi32>, %n: tensor<1xi32>) -> tensor<5xi32> {
  %cu = thd.cu_seqlens %lengths num_seqs %n : tensor<4xi32> -> tensor<5xi32>
  return %cu : tensor<5xi32>
}
