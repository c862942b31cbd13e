// thd-lower-to-gpu: the fused example becomes one gpu.func kernel; block b
// computes tile b of every output, each warp a span of it with its lanes a
// warp apart; the launch geometry is recorded.
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s
// RUN: thd-opt %s --param C=1000 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu=block-size=128 | FileCheck %s --check-prefix=GEOMETRY
// RUN: not thd-opt %s --thd-force-static-shapes --thd-lower-to-gpu=block-size=2048 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: thd-opt %s --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: thd-opt %s --param C=262144 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=ONE-WAVE
// RUN: thd-opt %s --param C=262144 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu=sm-count=16 | FileCheck %s --check-prefix=SMALL-GPU
// RUN: not thd-opt %s --thd-force-static-shapes --thd-lower-to-gpu=sm-count=0 2>&1 | FileCheck %s --check-prefix=BAD-SMS
// RUN: thd-opt %s --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu="block-size=512 max-blocks=128 rows-per-thread=1" | FileCheck %s --check-prefix=STRIDE

// CHECK: module attributes {gpu.container_module
// CHECK-NOT: func.func
// CHECK: gpu.module @thd_kernels {
// CHECK-NEXT: gpu.func @megatron_graph_step(%{{.+}}: memref<16xi64> {llvm.noalias, thd.name = "tokens"}
// CHECK-SAME: private(%[[CURSOR:.+]] : memref<1xindex, #gpu.address_space<private>>)
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>, thd.block = array<i64: 256, 1, 1>, thd.grid = array<i64: 1, 1, 1>}
// CHECK: %[[LANE:.+]] = arith.remui %[[TID:thread_id_x[_0-9]*]], %c32{{.*}} : index
// CHECK: %[[WARP:.+]] = arith.divui %[[TID]], %c32{{.*}} : index
// CHECK: %[[SPAN:.+]] = arith.muli %[[WARP]], %c32{{.*}} : index
// CHECK: %[[FIRST:.+]] = arith.addi %[[SPAN]], %[[LANE]] : index
// CHECK: %[[BID:.+]] = gpu.block_id {{ *}}x
// CHECK: %[[TILE:.+]] = arith.muli %[[BID]], %c256{{.*}} : index
// CHECK: %[[T:.+]] = arith.addi %[[TILE]], %[[FIRST]] : index
// CHECK: %[[IN:.+]] = arith.cmpi ult, %[[T]], %c8 : index
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK: memref.load %[[CURSOR]]
// CHECK-NOT: gpu.func

// 1000 rows per rank at 128 threads a block: 8 blocks.
// GEOMETRY: thd.block = array<i64: 128, 1, 1>, thd.grid = array<i64: 8, 1, 1>

// BLOCK: error: block-size must be in [1, 1024] (or 0: chosen from the output lengths), got 2048

// Long outputs get 1024 threads a block. One wave of resident blocks on 132
// multiprocessors of 2 such blocks is 270,336 threads; 2^20 rows need more,
// so each thread takes 2 rows (the most chosen): 512 blocks.
// AUTO: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 512, 1, 1>
// AUTO: scf.for %{{.+}} = %c0{{.*}} to %c2{{.*}} step %c1
// 2^18 rows fit that wave: one row a thread, 256 blocks.
// ONE-WAVE: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 256, 1, 1>
// On a GPU of 16 multiprocessors (a wave of 32,768 threads) they do not: 2
// rows a thread, 128 blocks.
// SMALL-GPU: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 128, 1, 1>
// SMALL-GPU: scf.for %{{.+}} = %c0{{.*}} to %c2{{.*}} step %c1
// BAD-SMS: error: sm-count must be in [1, 4096], got 0
// A capped grid: blocks loop over the 2048 tiles of 512 rows with the grid's
// stride.
// STRIDE: thd.grid = array<i64: 128, 1, 1>
// STRIDE: arith.remui %{{.+}}, %c32
// STRIDE: %[[FIRST:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// STRIDE: %[[BID:.+]] = gpu.block_id {{ *}}x
// STRIDE: scf.for %[[TILE:.+]] = %[[BID]] to %c2048 step %c128
// STRIDE: %[[START:.+]] = arith.muli %[[TILE]], %c512{{.*}} : index
// STRIDE: %[[ROW:.+]] = arith.addi %[[START]], %[[FIRST]] : index
// STRIDE: arith.cmpi ult, %[[ROW]], %c1048576 : index

// The pipeline below is a copy of examples/megatron_graph_step.mlir, so that
// editing the example does not change what this test checks.
module attributes {thd.params = {C = 8 : i64, cp = 2 : i64, N = 6 : i64}} {
  func.func @megatron_graph_step(
      %tokens: tensor<?xi64> {thd.name = "tokens", thd.capacity = #thd.expr<"C*cp">},
      %labels: tensor<?xi64> {thd.name = "labels", thd.capacity = #thd.expr<"C*cp">},
      %position_ids: tensor<?xi64> {thd.name = "position_ids", thd.capacity = #thd.expr<"C*cp">},
      %loss_mask: tensor<?xf32> {thd.name = "loss_mask", thd.capacity = #thd.expr<"C*cp">},
      %cu_seqlens: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cu_seqlens_padded: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %num_seqs: tensor<1xi32> {thd.name = "num_seqs"},
      %cp_rank: tensor<1xi32> {thd.name = "cp_rank"})
      -> (tensor<?xi64> {thd.name = "tokens"}, tensor<?xi64> {thd.name = "labels"},
          tensor<?xi64> {thd.name = "position_ids"}, tensor<?xf32> {thd.name = "loss_mask"},
          tensor<?xi1> {thd.name = "padding_mask"},
          tensor<?xi32> {thd.name = "cu_seqlens_padded"}, tensor<?xi32> {thd.name = "cu_seqlens"},
          tensor<1xi32> {thd.name = "max_seqlen"}, tensor<1xi32> {thd.name = "status"}) {
    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs
        cp "cp" mode zigzag max_tokens "C*cp" max_seqs "N-1" : tensor<?xi32>, tensor<?xi32>
    %mask = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity "C*cp"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    %tok = thd.sanitize %tokens, %mask : tensor<?xi64>, tensor<?xi1>
    %lab = thd.sanitize %labels, %mask : tensor<?xi64>, tensor<?xi1>
    %pos = thd.sanitize %position_ids, %mask : tensor<?xi64>, tensor<?xi1>
    %lm = thd.sanitize %loss_mask, %mask fill 0.0 : tensor<?xf32>, tensor<?xi1>
    %tok_r = thd.cp_slice %tok, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lab_r = thd.cp_slice %lab, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %pos_r = thd.cp_slice %pos, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %lm_r = thd.cp_slice %lm, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xf32>, tensor<?xi32> -> tensor<?xf32>
    %mask_r = thd.cp_slice %mask, %cu_seqlens_padded, %cp_rank num_seqs %n cp "cp" mode zigzag
        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>
    %tok_out = thd.pad_tail %tok_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lab_out = thd.pad_tail %lab_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %pos_out = thd.pad_tail %pos_r target "C" : tensor<?xi64> -> tensor<?xi64>
    %lm_out = thd.pad_tail %lm_r target "C" fill 0.0 : tensor<?xf32> -> tensor<?xf32>
    %mask_out = thd.pad_tail %mask_r target "C" fill true : tensor<?xi1> -> tensor<?xi1>
    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>
    %cu_out, %cup_out, %max_seqlen_out, %num_seqs_out = thd.pad_tail_metadata
        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n
        cp "cp" mode zigzag target "C" max_seqs "N" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
    return %tok_out, %lab_out, %pos_out, %lm_out, %mask_out, %cup_out, %cu_out,
           %max_seqlen_out, %status
        : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf32>, tensor<?xi1>,
          tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  }
}
