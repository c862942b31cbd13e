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
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect"];
}

def THDLowerToGPU : Pass<"thd-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower static thd pipelines to one GPU kernel each";
  let description = [{
    Replaces every function of static thd ops by a `gpu.func` kernel of the
    same name in a `gpu.module` named `thd_kernels`, taking the pipeline's
    buffers then one output buffer per result (static memrefs, passed as
    bare pointers). Thread `t` (the global x index) computes element `t` of
    every output that long (and `t + k * threads` with `max-blocks`); the
    scalars are computed by every block from the metadata, which is staged
    in shared memory. The kernel carries its launch geometry in `thd.block` and
    `thd.grid`, for the runtime's manifest.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"0",
           "Threads per block (0: 1024 for outputs of 2^18 elements or "
           "more, else 256)">,
    Option<"rowsPerThread", "rows-per-thread", "int64_t", /*default=*/"0",
           "Elements each thread computes, a warp apart in its warp's span "
           "(0: 1 when one wave of resident blocks on sm-count "
           "multiprocessors covers the longest output, else 2)">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"132",
           "Streaming multiprocessors of the GPU the kernel is for (the "
           "launch geometry's wave)">,
    Option<"maxBlocks", "max-blocks", "int64_t", /*default=*/"0",
           "At most this many blocks (0: one thread per element); threads "
           "then loop over the elements with a grid stride">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // THD_CODEGEN_PASSES_TD
