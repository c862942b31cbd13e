// thd-lower-to-gpu copies small metadata arrays into shared memory once per
// block, ahead of every read. The first read of the pool's sample offsets is
// in thd.validate's check loop over the chosen samples: the copy and its
// barrier must come before that loop, not after it (read unwritten, the
// status and the packed rows depended on stale shared memory).
// RUN: thd-opt %thdc_src/examples/pack_microbatch.mlir --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s

// CHECK: gpu.func @pack_microbatch(
// CHECK-SAME: %[[OFFSETS:[a-z0-9]+]]: memref<8xi32> {llvm.noalias, thd.name = "sample_offsets"}
// CHECK-SAME: workgroup(%[[IDS:[a-z0-9]+]] : memref<5xi32, #gpu.address_space<workgroup>>, %[[LENGTHS:[a-z0-9]+]] : memref<8xi32, #gpu.address_space<workgroup>>, %[[STAGED:[a-z0-9]+]] : memref<8xi32, #gpu.address_space<workgroup>>)
// CHECK-NOT: memref.load %[[STAGED]]
// CHECK: %[[V:.+]] = memref.load %[[OFFSETS]][%[[I:.+]]]
// CHECK-NEXT: memref.store %[[V]], %[[STAGED]][%[[I]]]
// CHECK: gpu.barrier
// The check loop over the chosen samples, then the reduction of its bits.
// CHECK: scf.for
// CHECK: memref.load %[[STAGED]]
// CHECK: gpu.all_reduce or
