// Lowering of thd.max_seqlen: a reduction over entries [1, n] with maxsi of
// consecutive differences, from 0; the scalar is stored once. Each difference
// is taken in i64 and clamped into [0, int32 max] before the i32 maximum, as
// reference::maxSeqlenFromCu saturates (two i32 offsets can be 2^32 - 1
// apart). On the GPU the block's threads share the entries and combine with
// gpu.all_reduce.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @max_seqlen
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0 : i64
// CHECK-DAG: %[[LIMIT:.+]] = arith.constant 2147483647 : i64
// CHECK: memref.load %[[N]][
// CHECK: %[[END:.+]] = arith.addi %{{.+}}, %c1{{.*}} : index
// CHECK: %[[MAX:.+]] = scf.for %[[I:.+]] = %c1{{.*}} to %[[END]] step %{{.+}} iter_args(%[[ACC:.+]] = %c0_i32{{.*}}) -> (i32)
// CHECK-DAG: memref.load %[[CUP]][
// CHECK-DAG: memref.load %[[CUP]][
// CHECK-DAG: arith.extsi %{{.+}} : i32 to i64
// CHECK-DAG: arith.extsi %{{.+}} : i32 to i64
// CHECK: %[[LEN:.+]] = arith.subi %{{.+}}, %{{.+}} : i64
// CHECK: %[[POSITIVE:.+]] = arith.maxsi %[[LEN]], %[[ZERO]] : i64
// CHECK: %[[SATURATED:.+]] = arith.minsi %[[POSITIVE]], %[[LIMIT]] : i64
// CHECK: %[[LEN32:.+]] = arith.trunci %[[SATURATED]] : i64 to i32
// CHECK: %[[NEXT:.+]] = arith.maxsi %[[ACC]], %[[LEN32]] : i32
// CHECK: scf.yield %[[NEXT]] : i32
// CHECK: memref.store %[[MAX]], %[[OUT]][
func.func @max_seqlen(%cup: tensor<7xi32>, %n: tensor<1xi32>) -> tensor<1xi32> {
  %m = thd.max_seqlen %cup num_seqs %n : tensor<7xi32>
  return %m : tensor<1xi32>
}

// GPU-LABEL: gpu.func @max_seqlen
// GPU: %[[PART:.+]] = scf.for
// GPU: arith.maxsi
// GPU: gpu.all_reduce maxsi %[[PART]] uniform
