//===- CodegenPasses.td - lowering passes of thdc ----------*- tablegen -*-===//

#ifndef THD_CODEGEN_PASSES_TD
#define THD_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def THDLowerToLoops : Pass<"thd-lower-to-loops", "::mlir::ModuleOp"> {
  let summary = "Lower static thd pipelines to loops over memrefs";
  let description = [{
    Replaces every function of static thd ops by a function of the same
    name over memrefs: the pipeline's arguments, then one output buffer per
    result, returning nothing. Each per-token result is one loop over its
    rows whose body computes the row through the whole chain of steps that
    produce it (mask, sanitise, CP gather, tail fill): nothing between the
    steps is materialised. Scalars (status, counts) are computed once before
    the loops; every memory access is clamped into its buffer, so bad data
    never reads or writes out of bounds.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // THD_CODEGEN_PASSES_TD
