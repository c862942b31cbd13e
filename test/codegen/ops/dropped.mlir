// Lowering of thd.dropped: both scalars once, before the stores; num_seqs
// clamped into [0, E-1] (E = 7 entries here) reads cu in bounds, the token
// count is at least 0, and both are 0 when the status is.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @dropped
// CHECK-SAME: (%[[STATUS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[CU:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[SEQS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[TOKENS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK-DAG: %[[S:.+]] = memref.load %[[STATUS]][
// CHECK-DAG: %[[INVALID:.+]] = arith.cmpi ne, %[[S]], %c0_i32{{.*}} : i32
// CHECK-DAG: %[[RAW:.+]] = memref.load %[[N]][
// CHECK-DAG: %[[RAWIDX:.+]] = arith.index_cast %[[RAW]] : i32 to index
// CHECK-DAG: %[[LO:.+]] = arith.maxsi %[[RAWIDX]], %c0{{.*}} : index
// CHECK-DAG: %[[COUNT:.+]] = arith.minsi %[[LO]], %c6{{.*}} : index
// CHECK: %[[END:.+]] = memref.load %[[CU]][%[[COUNT]]]
// CHECK: %[[POSITIVE:.+]] = arith.maxsi %[[END]], %c0_i32{{.*}} : i32
// CHECK-DAG: %[[COUNT32:.+]] = arith.index_cast %[[COUNT]] : index to i32
// CHECK-DAG: %[[DROPPED:.+]] = arith.select %[[INVALID]], %[[COUNT32]], %c0_i32{{.*}} : i32
// CHECK-DAG: %[[LOST:.+]] = arith.select %[[INVALID]], %[[POSITIVE]], %c0_i32{{.*}} : i32
// CHECK-DAG: memref.store %[[DROPPED]], %[[SEQS]][
// CHECK-DAG: memref.store %[[LOST]], %[[TOKENS]][
func.func @dropped(%status: tensor<1xi32>, %cu: tensor<7xi32>, %n: tensor<1xi32>)
    -> (tensor<1xi32>, tensor<1xi32>) {
  %seqs, %tokens = thd.dropped %status, %cu num_seqs %n : tensor<7xi32>
  return %seqs, %tokens : tensor<1xi32>, tensor<1xi32>
}

// With thd.validate's status: the dropped counts read the unchecked
// num_seqs, and the status computed in the same kernel.
// CHECK-LABEL: func.func @after_validate
// CHECK: %[[BITS:.+]] = scf.for
// CHECK: arith.cmpi ne, %[[BITS]], %c0_i32{{.*}} : i32
// CHECK-DAG: memref.store
// CHECK-DAG: memref.store
func.func @after_validate(%cu: tensor<7xi32>, %cup: tensor<7xi32>, %rank: tensor<1xi32>, %n: tensor<1xi32>)
    -> (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) {
  %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode zigzag
      max_tokens 16 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  %seqs, %tokens = thd.dropped %status, %cu num_seqs %n : tensor<7xi32>
  return %status, %seqs, %tokens : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>
}

// GPU-LABEL: gpu.func @dropped
// GPU: arith.cmpi ne, %{{.+}}, %c0_i32{{.*}} : i32
// GPU: arith.maxsi %{{.+}}, %c0_i32{{.*}} : i32
// GPU: arith.select
