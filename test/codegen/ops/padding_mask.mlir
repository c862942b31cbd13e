// Lowering of thd.padding_mask: per row, a binary search (scf.while) over
// cu_seqlens_padded finds the sequence s; the row is padding when it is past
// cup[s] + max(cu[s+1] - cu[s], 0), past cup[n], or when n is 0. On the GPU
// the offsets are staged in workgroup memory first.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @padding_mask
// CHECK-SAME: (%[[CU:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[MASK:[a-z0-9]+]]: memref<16xi1> {llvm.noalias})
// CHECK: memref.load %[[N]][
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c16{{(_[0-9]+)?}} step
// CHECK: %[[SEARCH:.+]]:2 = scf.while
// CHECK: arith.cmpi slt
// CHECK: scf.condition
// CHECK: %[[MID:.+]] = arith.shrui
// CHECK: %[[PROBE:.+]] = memref.load %[[CUP]][%[[MID]]]
// CHECK: arith.cmpi sle, %{{.+}}, %[[ROW]] : index
// CHECK: scf.yield
// CHECK: %[[S:.+]] = arith.subi %[[SEARCH]]#0, %c1{{.*}} : index
// CHECK-DAG: memref.load %[[CU]][
// CHECK-DAG: memref.load %[[CUP]][
// CHECK: %[[VALID:.+]] = arith.maxsi %{{.+}}, %c0{{.*}} : index
// CHECK: %[[END:.+]] = arith.addi %{{.+}}, %[[VALID]] : index
// CHECK: %[[PAST:.+]] = arith.cmpi sge, %[[ROW]], %[[END]] : index
// CHECK: %[[BEYOND:.+]] = arith.cmpi sge, %[[ROW]], %{{.+}} : index
// CHECK: %[[PAD:.+]] = arith.ori %[[PAST]], %[[BEYOND]] : i1
// CHECK: %[[EMPTY:.+]] = arith.cmpi eq, %{{.+}}, %c0{{.*}} : index
// CHECK: %[[R:.+]] = arith.ori %[[PAD]], %[[EMPTY]] : i1
// CHECK: memref.store %[[R]], %[[MASK]][%[[ROW]]]
func.func @padding_mask(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %n: tensor<1xi32>) -> tensor<16xi1> {
  %m = thd.padding_mask %cu, %cup num_seqs %n capacity 16 : tensor<7xi32>, tensor<7xi32> -> tensor<16xi1>
  return %m : tensor<16xi1>
}

// GPU-LABEL: gpu.func @padding_mask
// GPU-SAME: workgroup(%[[SHARED_CU:[a-z0-9]+]] : memref<7xi32, #gpu.address_space<workgroup>>, %[[SHARED_CUP:[a-z0-9]+]] : memref<7xi32, #gpu.address_space<workgroup>>)
// GPU-DAG: memref.store %{{.+}}, %[[SHARED_CU]][
// GPU-DAG: memref.store %{{.+}}, %[[SHARED_CUP]][
// GPU: gpu.barrier
// GPU: gpu.block_id
// GPU: scf.while
// GPU: memref.load %[[SHARED_CUP]][
