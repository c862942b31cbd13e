// thd-lower-to-gpu: the fused example becomes one gpu.func kernel; block b
// computes tile b of every output, each warp a span of it with its lanes a
// warp apart; the launch geometry is recorded.
// RUN: thd-opt %s --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s
// RUN: thd-opt %s --param C=1000 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu=block-size=128 | FileCheck %s --check-prefix=GEOMETRY
// RUN: not thd-opt %s --thd-force-static-shapes --thd-lower-to-gpu=block-size=2048 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: thd-opt %s --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: thd-opt %s --param C=262144 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=ONE-WAVE
// RUN: thd-opt %s --param C=262144 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu="sm-count=16 vector-width=1" | FileCheck %s --check-prefix=SMALL-GPU
// RUN: thd-opt %s --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu | FileCheck %s --check-prefix=VECTOR
// RUN: thd-opt %s --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu=vector-width=1 | FileCheck %s --check-prefix=SCALAR
// RUN: thd-opt %s --param C=1025 --param cp=1 --param N=33 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu=vector-width=2 | FileCheck %s --check-prefix=ODD
// RUN: not thd-opt %s --thd-force-static-shapes --thd-lower-to-gpu=vector-width=3 2>&1 | FileCheck %s --check-prefix=BAD-VECTOR
// RUN: not thd-opt %s --thd-force-static-shapes --thd-lower-to-gpu=sm-count=0 2>&1 | FileCheck %s --check-prefix=BAD-SMS
// RUN: thd-opt %s --param C=1048576 --param N=1024 --thd-force-static-shapes --thd-fuse --thd-lower-to-gpu="block-size=512 max-blocks=128 rows-per-thread=1 vector-width=1" | FileCheck %s --check-prefix=STRIDE

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

// Long outputs get 1024 threads a block and two rows a step, stored
// together: 2^19 steps, one a thread, 512 blocks, no loop over steps.
// AUTO: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 512, 1, 1>
// AUTO-NOT: scf.for %{{.+}} = %c0{{.*}} to %c2{{.*}} step %c1
// 2^18 rows: 2^17 steps, 128 blocks.
// ONE-WAVE: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 128, 1, 1>
// Rows one at a time on a GPU of 16 multiprocessors (a wave of 32,768
// threads): 2^18 rows do not fit one wave, so 2 rows a thread, 128 blocks.
// SMALL-GPU: thd.block = array<i64: 1024, 1, 1>, thd.grid = array<i64: 128, 1, 1>
// SMALL-GPU: scf.for %{{.+}} = %c0{{.*}} to %c2{{.*}} step %c1
// BAD-SMS: error: sm-count must be in [1, 4096], got 0

// Two rows a step: whether each output can take a vector store is read once
// at the kernel's entry from its address (16 bytes for two i64, 8 for two
// f32); a misaligned output takes the rows one store each. The padding mask
// (i1, a byte a row in the buffer but a bit in a vector) is stored a byte at
// a time.
// VECTOR: %[[TOKENS:.+]] = memref.extract_aligned_pointer_as_index %arg8 : memref<1048576xi64> -> index
// VECTOR: %[[TOKENS_OFF:.+]] = arith.remui %[[TOKENS]], %c16{{.*}} : index
// VECTOR: %[[TOKENS_ALIGNED:.+]] = arith.cmpi eq, %[[TOKENS_OFF]], %c0
// VECTOR: %[[MASK:.+]] = memref.extract_aligned_pointer_as_index %arg11 : memref<1048576xf32> -> index
// VECTOR: arith.remui %[[MASK]], %c8{{.*}} : index
// VECTOR-NOT: memref.extract_aligned_pointer_as_index %arg12
// VECTOR: gpu.block_id
// VECTOR: %[[STEP:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// VECTOR: %[[ROW:.+]] = arith.muli %[[STEP]], %c2{{.*}} : index
// VECTOR: %[[NEXT:.+]] = arith.addi %[[ROW]], %c1{{.*}} : index
// VECTOR: scf.if %[[TOKENS_ALIGNED]] {
// VECTOR-NEXT: %[[PAIR:.+]] = vector.from_elements %[[A:.+]], %[[B:.+]] : vector<2xi64>
// VECTOR-NEXT: vector.store %[[PAIR]], %arg8[%[[ROW]]] {alignment = 16 : i64} : memref<1048576xi64>, vector<2xi64>
// VECTOR-NEXT: } else {
// VECTOR-NEXT: memref.store %[[A]], %arg8[%[[ROW]]] {alignment = 8 : i64}
// VECTOR-NEXT: memref.store %[[B]], %arg8[%[[NEXT]]] {alignment = 8 : i64}
// VECTOR: vector.store %{{.+}}, %arg11[%[[ROW]]] {alignment = 8 : i64} : memref<1048576xf32>, vector<2xf32>
// VECTOR: memref.store %{{.+}}, %arg12[%[[ROW]]] {alignment = 1 : i64} : memref<1048576xi1>
// VECTOR-NEXT: memref.store %{{.+}}, %arg12[%[[NEXT]]] {alignment = 1 : i64} : memref<1048576xi1>
// The offset arrays (1025 entries, odd) and scalars are one element a step.
// VECTOR-NOT: vector.store
// SCALAR-NOT: vector.
// With two forced: 1025 rows are one a step; the 34-entry offset arrays
// take vector stores.
// ODD-NOT: vector.store %{{.+}}, %arg{{[89]}}[
// ODD: vector.store %{{.+}}, %arg13[%{{.+}}] {alignment = 8 : i64} : memref<34xi32>, vector<2xi32>
// BAD-VECTOR: error: vector-width must be 1 or 2 (or 0: chosen from the output lengths), got 3
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
