// thd-lower-to-loops: the static example becomes one function over buffers,
// one loop per output length, no thd op and no intermediate buffer left.
// RUN: thd-opt %s --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: not thd-opt %s --thd-lower-to-loops 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// RUN: not thd-opt %s --thd-bind-params --thd-lower-to-loops 2>&1 | FileCheck %s --check-prefix=UNFORCED

// CHECK-LABEL: func.func @megatron_graph_step(
// CHECK-SAME: %[[TOK:[a-z0-9]+]]: memref<16xi64> {llvm.noalias, thd.name = "tokens"}
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<8xi64> {llvm.noalias, thd.name = "tokens"}
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32> {llvm.noalias, thd.name = "status"})
// The only buffer is the search cursor (one index), set to sequence 0.
// CHECK: %[[CURSOR:.+]] = memref.alloca() : memref<1xindex>
// CHECK-NOT: thd.
// CHECK-NOT: memref.alloc(
// CHECK: memref.store %{{.+}}, %[[CURSOR]]
// One loop per output length; the five per-token outputs share one sequence
// search per row (the CP slice's; the mask reuses its sequence): the cursor
// answers it, else a binary search does.
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8 step
// CHECK: memref.load %[[CURSOR]]
// CHECK: %[[S:.+]] = scf.if
// CHECK: scf.while
// CHECK-NOT: scf.while
// CHECK: memref.store %[[S]], %[[CURSOR]]
// CHECK: memref.store %{{.+}}, %[[OUT]][%[[ROW]]] {alignment = 8 : i64} : memref<8xi64>
// CHECK-COUNT-4: memref.store
// CHECK: scf.for %[[ENTRY:.+]] = %{{.+}} to %c7 step
// CHECK-COUNT-2: memref.store %{{.+}}[%[[ENTRY]]] {alignment = 4 : i64} : memref<7xi32>
// CHECK: scf.for %{{.+}} = %{{.+}} to %c1
// CHECK: memref.store
// CHECK: memref.store %{{.+}}, %[[STATUS]]
// CHECK: return

// UNFORCED: error: cannot lower a pipeline with the non-static type 'tensor<?xi64>' (run thd-force-static-shapes first)
// DYNAMIC: error: 'thd.validate' op still holds the parameter expression "cp" in 'cp'; bind the parameters first (thd-bind-params or thd-force-static-shapes)

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
