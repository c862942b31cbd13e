// Lowering of thd.pad_cu_seqlens: entry i is the input's entry min(i, n)
// (entry 0 read as 0), so the entries past the n-th repeat the last one.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s

// CHECK-LABEL: func.func @pad_cu_seqlens
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<7xi32> {llvm.noalias})
// CHECK: %[[RAW:.+]] = memref.load %[[N]][
// CHECK: %[[RAWIDX:.+]] = arith.index_cast %[[RAW]] : i32 to index
// CHECK: %[[NLO:.+]] = arith.maxsi %[[RAWIDX]], %c0{{.*}} : index
// CHECK: %[[COUNT:.+]] = arith.minsi %[[NLO]], %c3{{.*}} : index
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c7{{(_[0-9]+)?}} step
// CHECK: %[[J:.+]] = arith.minsi %[[I]], %[[COUNT]] : index
// The load and the test of entry 0 are independent: C++ leaves their order
// to the compiler that built thdc.
// CHECK-DAG: %[[E:.+]] = memref.load %[[CUP]][
// CHECK-DAG: %[[FIRST:.+]] = arith.cmpi eq, %[[J]], %c0{{.*}} : index
// CHECK: %[[R:.+]] = arith.select %[[FIRST]], %c0_i32{{.*}}, %[[E]] : i32
// CHECK: memref.store %[[R]], %[[OUT]][%[[I]]]
func.func @pad_cu_seqlens(%cup: tensor<4xi32>, %n: tensor<1xi32>) -> tensor<7xi32> {
  %c = thd.pad_cu_seqlens %cup num_seqs %n entries 7 : tensor<4xi32> -> tensor<7xi32>
  return %c : tensor<7xi32>
}

// Without num_seqs every input entry is meaningful: n is the static 3.
// CHECK-LABEL: func.func @pad_cu_seqlens_all
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<4xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<7xi32> {llvm.noalias})
// CHECK-NOT: memref.load
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %c7{{(_[0-9]+)?}} step
// CHECK: %[[J:.+]] = arith.minsi %[[I]], %c3{{.*}} : index
// CHECK: memref.load %[[CUP]][
// CHECK: memref.store %{{.+}}, %[[OUT]][%[[I]]]
func.func @pad_cu_seqlens_all(%cup: tensor<4xi32>) -> tensor<7xi32> {
  %c = thd.pad_cu_seqlens %cup entries 7 : tensor<4xi32> -> tensor<7xi32>
  return %c : tensor<7xi32>
}
