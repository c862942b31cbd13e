// Lowering of thd.pad_tail_metadata with max_seqs (static): gT = target * cp
// and the tail gT - cup[n] are computed once; entry i of each output reads
// the input's entry min(i, n) or, past n, the dummy's end (append) or, at n,
// gT (extend_last); max_seqlen is the static gT.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @append_dummy
// CHECK-SAME: (%[[CU:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[MS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[CU_OUT:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[CUP_OUT:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[MS_OUT:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// The input max_seqlen is not read: with max_seqs the result is gT.
// CHECK-NOT: memref.load %[[MS]]
// CHECK: memref.load %[[N]][
// CHECK: %[[GA:.+]] = arith.select %{{.+}}, %c0_i32{{.*}}, %{{.+}} : i32
// CHECK: %[[GT:.+]] = arith.muli %c8_i32{{.*}}, %c2_i32{{.*}} : i32
// CHECK: %[[DIFF:.+]] = arith.subi %[[GT]], %[[GA]] : i32
// CHECK: %[[TAIL:.+]] = arith.maxsi %[[DIFF]], %c0_i32{{.*}} : i32
// CHECK: %[[HAS_TAIL:.+]] = arith.cmpi sgt, %[[TAIL]], %c0_i32{{.*}} : i32
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c7{{(_[0-9]+)?}} step
// CHECK: memref.load %[[CU]][
// CHECK: %[[IS_NEW:.+]] = arith.cmpi ugt, %{{.+}}, %{{.+}} : index
// CHECK: memref.load %[[CU]][
// CHECK: %[[DUMMY_END:.+]] = arith.addi %{{.+}}, %[[TAIL]] : i32
// CHECK: %[[CU_ENTRY:.+]] = arith.select %[[IS_NEW]], %[[DUMMY_END]], %{{.+}} : i32
// CHECK: memref.load %[[CUP]][
// CHECK: %[[CUP_ENTRY:.+]] = arith.select %{{.+}}, %[[GT]], %{{.+}} : i32
// CHECK: memref.store %[[CU_ENTRY]], %[[CU_OUT]][%[[I]]]
// CHECK: memref.store %[[CUP_ENTRY]], %[[CUP_OUT]][%[[I]]]
// CHECK: memref.store %[[GT]], %[[MS_OUT]][
func.func @append_dummy(%cu: tensor<5xi32>, %cup: tensor<5xi32>, %ms: tensor<1xi32>, %n: tensor<1xi32>)
    -> (tensor<7xi32>, tensor<7xi32>, tensor<1xi32>) {
  %cu2, %cup2, %ms2, %n2 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag
      target 8 max_seqs 6 policy append_dummy_sequence
      : tensor<5xi32>, tensor<5xi32> -> tensor<7xi32>, tensor<7xi32>
  return %cu2, %cup2, %ms2 : tensor<7xi32>, tensor<7xi32>, tensor<1xi32>
}

// extend_last: entry n (when n > 0) becomes gT.
// CHECK-LABEL: func.func @extend_last
// CHECK-SAME: (%[[CU:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<5xi32> {llvm.noalias}, %[[MS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[CUP_OUT:[a-z0-9]+]]: memref<7xi32> {llvm.noalias})
// CHECK: %[[GT:.+]] = arith.muli %c8_i32{{.*}}, %c2_i32{{.*}} : i32
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c7{{(_[0-9]+)?}} step
// CHECK: memref.load %[[CUP]][
// (Independent comparisons, in the order the C++ compiler evaluates them.)
// CHECK-DAG: %[[SOME:.+]] = arith.cmpi sgt, %{{.+}}, %c0{{.*}} : index
// CHECK-DAG: %[[AT_N:.+]] = arith.cmpi eq, %{{.+}}, %{{[0-9]+}} : index
// CHECK: %[[LAST:.+]] = arith.andi %[[AT_N]], %[[SOME]] : i1
// CHECK: %[[ENTRY:.+]] = arith.select %[[LAST]], %[[GT]], %{{.+}} : i32
// CHECK: memref.store %[[ENTRY]], %[[CUP_OUT]][%[[I]]]
func.func @extend_last(%cu: tensor<5xi32>, %cup: tensor<5xi32>, %ms: tensor<1xi32>, %n: tensor<1xi32>)
    -> tensor<7xi32> {
  %cu2, %cup2, %ms2, %n2 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag
      target 8 max_seqs 6 policy extend_last
      : tensor<5xi32>, tensor<5xi32> -> tensor<7xi32>, tensor<7xi32>
  return %cup2 : tensor<7xi32>
}

// split_dummy_sequences: k = min(ceil(d / L), N - n) dummies; entry n + t
// ends at gA + t*L, the last one (j = n + k) at gT.
// CHECK-LABEL: func.func @split_dummies
// CHECK: %[[GT:.+]] = arith.muli %c8_i32{{.*}}, %c2_i32{{.*}} : i32
// CHECK: %[[PIECES:.+]] = arith.addi %{{.+}}, %c1_i32{{.*}} : i32
// CHECK: arith.minsi %{{.+}}, %{{.+}} : index
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c7{{(_[0-9]+)?}} step
// CHECK: %[[STEP:.+]] = arith.muli %{{.+}}, %c4_i32{{.*}} : i32
// CHECK: %[[PIECE_END:.+]] = arith.addi %{{.+}}, %[[STEP]] : i32
// CHECK: arith.select %{{.+}}, %[[GT]], %[[PIECE_END]] : i32
// CHECK: memref.store %[[GT]], %{{.+}}[
func.func @split_dummies(%cu: tensor<5xi32>, %cup: tensor<5xi32>, %ms: tensor<1xi32>, %n: tensor<1xi32>)
    -> (tensor<7xi32>, tensor<7xi32>, tensor<1xi32>, tensor<1xi32>) {
  %cu2, %cup2, %ms2, %n2 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag
      target 8 max_seqs 6 policy split_dummy_sequences dummy_length 4
      : tensor<5xi32>, tensor<5xi32> -> tensor<7xi32>, tensor<7xi32>
  return %cu2, %cup2, %ms2, %n2 : tensor<7xi32>, tensor<7xi32>, tensor<1xi32>, tensor<1xi32>
}
