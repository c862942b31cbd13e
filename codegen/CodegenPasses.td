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
    bare pointers). Each thread computes steps of every output (one
    element, or two consecutive ones stored with one vector access on long
    outputs), laid out as docs/launch-geometry.md describes; the scalars are
    computed by every block from the metadata, which is staged in shared
    memory at the kernel's entry. The kernel carries its launch geometry in
    `thd.block` and `thd.grid`, for the runtime's manifest.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"0",
           "Threads per block (0: 1024 for outputs of 2^18 elements or "
           "more, else 256)">,
    Option<"rowsPerThread", "rows-per-thread", "int64_t", /*default=*/"0",
           "Steps each thread computes (a step is vector-width consecutive "
           "elements), a warp apart in its warp's span (0: 1 when one wave "
           "of resident blocks on sm-count multiprocessors covers the "
           "longest output or a step is two elements, else 2)">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"132",
           "Streaming multiprocessors of the GPU the kernel is for (the "
           "launch geometry's wave)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "Consecutive elements of an output each step computes and stores "
           "with one vector access where the buffer is aligned for it (0: 2 "
           "on outputs of 2^18 elements or more, else 1; only outputs of "
           "even length take 2)">,
    Option<"maxBlocks", "max-blocks", "int64_t", /*default=*/"0",
           "At most this many blocks (0: one thread per element); threads "
           "then loop over the elements with a grid stride">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // THD_CODEGEN_PASSES_TD
