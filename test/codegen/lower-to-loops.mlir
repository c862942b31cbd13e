// thd-lower-to-loops: the static example becomes one function over buffers,
// one loop per output length, no thd op and no intermediate buffer left.
// RUN: thd-opt %thdc_src/examples/megatron_graph_step.mlir --thd-force-static-shapes --thd-lower-to-loops | FileCheck %s
// RUN: not thd-opt %thdc_src/examples/megatron_graph_step.mlir --thd-lower-to-loops 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// RUN: not thd-opt %thdc_src/examples/megatron_graph_step.mlir --thd-bind-params --thd-lower-to-loops 2>&1 | FileCheck %s --check-prefix=UNFORCED

// CHECK-LABEL: func.func @megatron_graph_step(
// CHECK-SAME: %[[TOK:[a-z0-9]+]]: memref<16xi64> {thd.name = "tokens"}
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<8xi64> {thd.name = "tokens"}
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32> {thd.name = "status"})
// CHECK-NOT: thd.
// CHECK-NOT: memref.alloc
// One loop per output length; the five per-token outputs share one binary
// search per row (the CP slice's; the mask reuses its sequence).
// CHECK: scf.for %[[ROW:.+]] = %{{.+}} to %c8 step
// CHECK: scf.while
// CHECK-NOT: scf.while
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
