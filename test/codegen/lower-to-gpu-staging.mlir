// thd-lower-to-gpu copies small metadata arrays into shared memory once per
// block, ahead of every read. The first read of the pool's sample offsets is
// in thd.validate's check loop over the chosen samples: the copy and its
// barrier must come before that loop, not after it (read unwritten, the
// status and the packed rows depended on stale shared memory).
// RUN: thd-opt %thdc_src/examples/pack_microbatch.mlir --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=ENTRY

// CHECK: gpu.func @pack_microbatch(
// CHECK-SAME: %[[OFFSETS:[a-z0-9]+]]: memref<8xi32> {llvm.noalias, thd.name = "sample_offsets"}
// CHECK-SAME: workgroup(%[[IDS:[a-z0-9]+]] : memref<5xi32, #gpu.address_space<workgroup>>, %[[LENGTHS:[a-z0-9]+]] : memref<8xi32, #gpu.address_space<workgroup>>, %[[STAGED:[a-z0-9]+]] : memref<8xi32, #gpu.address_space<workgroup>>)
// CHECK-NOT: memref.load %[[STAGED]]
// CHECK: %[[V:.+]] = memref.load %[[OFFSETS]][%{{.+}}]
// CHECK: memref.store %[[V]], %[[STAGED]][%{{.+}}]
// CHECK: gpu.barrier
// The check loop over the chosen samples, then the reduction of its bits.
// CHECK: scf.for
// CHECK: memref.load %[[STAGED]]
// CHECK: gpu.all_reduce or

// At the kernel's entry every staged array's loads, and the one-element
// inputs' loads, are issued before the first store to shared memory, and one
// barrier follows all the copies: one round trip to memory, not one per
// array.
// ENTRY: gpu.func @megatron_graph_step(
// ENTRY-SAME: %[[CU:[a-z0-9]+]]: memref<1025xi32> {llvm.noalias, thd.name = "cu_seqlens"}, %[[CUP:[a-z0-9]+]]: memref<1025xi32> {llvm.noalias, thd.name = "cu_seqlens_padded"}, %[[NUM:[a-z0-9]+]]: memref<1xi32> {llvm.noalias, thd.name = "num_seqs"}, %[[RANK:[a-z0-9]+]]: memref<1xi32> {llvm.noalias, thd.name = "cp_rank"}
// ENTRY-NOT: memref.store
// ENTRY-DAG: memref.load %[[NUM]]
// ENTRY-DAG: memref.load %[[RANK]]
// ENTRY-DAG: memref.load %[[CU]]
// ENTRY-DAG: memref.load %[[CU]]
// ENTRY-DAG: memref.load %[[CUP]]
// ENTRY-DAG: memref.load %[[CUP]]
// ENTRY: memref.store %{{.+}} : memref<1025xi32, #gpu.address_space<workgroup>>
// ENTRY-NOT: memref.load
// ENTRY: gpu.barrier
// ENTRY-NOT: gpu.barrier
// ENTRY: gpu.all_reduce or
