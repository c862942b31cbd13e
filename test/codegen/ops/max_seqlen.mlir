// Lowering of thd.max_seqlen: a reduction over entries [1, n] with maxsi of
// consecutive differences, from 0; the scalar is stored once. On the GPU the
// block's threads share the entries and combine with gpu.all_reduce.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @max_seqlen
// CHECK-SAME: (%[[CUP:[a-z0-9]+]]: memref<7xi32> {llvm.noalias}, %[[N:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %[[OUT:[a-z0-9]+]]: memref<1xi32> {llvm.noalias})
// CHECK: memref.load %[[N]][
// CHECK: %[[END:.+]] = arith.addi %{{.+}}, %c1{{.*}} : index
// CHECK: %[[MAX:.+]] = scf.for %[[I:.+]] = %c1{{.*}} to %[[END]] step %{{.+}} iter_args(%[[ACC:.+]] = %c0_i32{{.*}}) -> (i32)
// CHECK-DAG: %[[PREV:.+]] = memref.load %[[CUP]][
// CHECK-DAG: %[[CUR:.+]] = memref.load %[[CUP]][
// CHECK: %[[LEN:.+]] = arith.subi %{{.+}}, %{{.+}} : i32
// CHECK: %[[NEXT:.+]] = arith.maxsi %[[ACC]], %[[LEN]] : i32
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
