// A scalar first asked for inside the region of another scalar's code goes
// before that code, where it dominates the region: chunk_count sums every
// sequence's chunks in a loop (a block-wide reduction on the GPU) whose body
// reads the entries of a pad_tail_metadata op, whose scalars (the count n,
// the padded count, the tail) are then computed for the first time. They
// used to go before the element code's anchor, after that loop, and the
// kernel did not verify ("operand #1 does not dominate this use"): the
// GraphStep of GraphStep(8, 3, 2, linear_attention_chunk=16), whose chunk
// indices (2*NT = C entries) are computed in the loop of its first outputs.
// RUN: thd-opt %s -split-input-file --thd-fuse --thd-lower-to-loops | FileCheck %s
// RUN: thd-opt %s -split-input-file --thd-fuse --thd-lower-to-gpu | FileCheck %s

// chunk_count alone: the scalar code asks for the tail scalars from the
// reduction's body.
// CHECK-LABEL: @chunk_count_of_padded_offsets(
// CHECK-SAME: %[[NUMSEQS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %{{[a-z0-9]+}}: memref<1xi32> {llvm.noalias})
// CHECK: memref.load %[[NUMSEQS]][
// CHECK: %[[OUTCOUNT:.+]] = arith.minsi %{{.+}}, %c4{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{.+}} = %{{.+}} to %c5{{(_[0-9]+)?}} step %{{.+}} iter_args(%{{.+}} = %c0_i64{{.*}}) -> (i64)
// CHECK: arith.minsi %{{.+}}, %[[OUTCOUNT]] : index
// CHECK: scf.yield
func.func @chunk_count_of_padded_offsets(%cu: tensor<4xi32>, %cup: tensor<4xi32>, %ms: tensor<1xi32>,
                                         %n: tensor<1xi32>) -> tensor<1xi32> {
  %cu2, %cup2, %ms2, %n2 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag
      target 8 max_seqs 4 policy append_dummy_sequence
      : tensor<4xi32>, tensor<4xi32> -> tensor<5xi32>, tensor<5xi32>
  %i, %o, %c = thd.linear_chunks %cup2 chunk_size 16 rows 16 : tensor<5xi32> -> tensor<10xi32>, tensor<5xi32>
  return %c : tensor<1xi32>
}

// -----

// chunk_indices: the element code asks for chunk_count, whose reduction asks
// for the tail scalars; all of them go before the element loop.
// CHECK-LABEL: @chunk_indices_of_padded_offsets(
// CHECK-SAME: %[[NUMSEQS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias}, %{{[a-z0-9]+}}: memref<10xi32> {llvm.noalias})
// CHECK: memref.load %[[NUMSEQS]][
// CHECK: %[[OUTCOUNT:.+]] = arith.minsi %{{.+}}, %c4{{(_[0-9]+)?}} : index
// CHECK: scf.for %{{.+}} = %{{.+}} to %c5{{(_[0-9]+)?}} step %{{.+}} iter_args(%{{.+}} = %c0_i64{{.*}}) -> (i64)
// CHECK: arith.minsi %{{.+}}, %[[OUTCOUNT]] : index
// CHECK: scf.yield
// CHECK: %[[COUNT:.+]] = arith.trunci %{{.+}} : i64 to i32
// CHECK: scf.while
func.func @chunk_indices_of_padded_offsets(%cu: tensor<4xi32>, %cup: tensor<4xi32>, %ms: tensor<1xi32>,
                                           %n: tensor<1xi32>) -> tensor<10xi32> {
  %cu2, %cup2, %ms2, %n2 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag
      target 8 max_seqs 4 policy append_dummy_sequence
      : tensor<4xi32>, tensor<4xi32> -> tensor<5xi32>, tensor<5xi32>
  %i, %o, %c = thd.linear_chunks %cup2 chunk_size 16 rows 16 : tensor<5xi32> -> tensor<10xi32>, tensor<5xi32>
  return %i : tensor<10xi32>
}
