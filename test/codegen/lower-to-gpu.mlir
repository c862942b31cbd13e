// thd-lower-to-gpu: the fused example becomes one gpu.func kernel; thread t
// computes element t of every output; the launch geometry is recorded.
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --param C=1000 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu=block-size=128 | FileCheck %s --check-prefix=GEOMETRY
// RUN: not thd-opt %thdc_src/examples/megatron_graph_step.mlir --thd-force-static-shapes --thd-lower-to-gpu=block-size=2048 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu="block-size=512 max-blocks=128" | FileCheck %s --check-prefix=STRIDE

// CHECK: module attributes {gpu.container_module
// CHECK-NOT: func.func
// CHECK: gpu.module @thd_kernels {
// CHECK-NEXT: gpu.func @megatron_graph_step(%{{.+}}: memref<16xi64> {thd.name = "tokens"}
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>, thd.block = array<i64: 256, 1, 1>, thd.grid = array<i64: 1, 1, 1>}
// CHECK: %[[T:.+]] = gpu.global_id {{ *}}x
// CHECK: %[[IN:.+]] = arith.cmpi ult, %[[T]], %{{.+}} : index
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NOT: gpu.func

// 1000 rows per rank at 128 threads a block: 8 blocks.
// GEOMETRY: thd.block = array<i64: 128, 1, 1>, thd.grid = array<i64: 8, 1, 1>

// BLOCK: error: block-size must be in [1, 1024] (or 0: chosen from the output lengths), got 2048

// Long outputs get 1024 threads a block: 2^20 rows per rank, 1024 blocks.
// AUTO: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 1024, 1, 1>
// A capped grid: threads loop over the rows with the grid's stride.
// STRIDE: thd.grid = array<i64: 128, 1, 1>
// STRIDE: %[[T:.+]] = gpu.global_id {{ *}}x
// STRIDE: scf.for %[[ROW:.+]] = %[[T]] to %c1048576 step %c65536
