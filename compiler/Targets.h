//===- Targets.h - PTX, cubin and host code of a pipeline -------*- C++ -*-===//
//
// What the compiler makes of a fused static pipeline (after loadPipeline):
// the PTX of its one kernel, the kernel assembled by CUDA's ptxas, and its
// host (CPU) code, as a shared object or compiled in-process.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_TARGETS_H
#define THDC_COMPILER_TARGETS_H

#include "compiler/Compiler.h"
#include "compiler/GpuOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace thdc {

/// Runs buildPtxPipeline on a copy of `module` and returns the copy.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerToNVVM(mlir::ModuleOp module, const GpuOptions &options);

/// Lowers a copy of `module` to one GPU kernel and returns its PTX; also
/// the launch geometry in `grid` and `block`.
mlir::FailureOr<std::string> compileToPtx(mlir::ModuleOp module,
                                          const GpuOptions &options,
                                          int64_t grid[3], int64_t block[3]);

/// CUDA's ptxas: $THDC_PTXAS when set (empty: none), else the first found in
/// $CUDA_PATH/bin, $CUDA_HOME/bin, /usr/local/cuda/bin and $PATH.
std::optional<std::string> findPtxas();

/// `ptx` assembled for `chip` by `ptxas` into a cubin; the error, a
/// diagnostic on `module`, names the command and what it printed.
mlir::FailureOr<std::string> assembleCubin(mlir::ModuleOp module,
                                           const std::string &ptxas,
                                           const std::string &ptx,
                                           llvm::StringRef chip);

/// Runs buildHostPipeline on `module` in place.
mlir::LogicalResult runHostPipeline(mlir::ModuleOp module);

/// Lowers `module` in place to the LLVM dialect for the host CPU: the
/// pipeline becomes `void entry(T0 *, T1 *, ...)` over bare pointers, plus
/// `void entry_packed(void **buffers)` calling it, and the buffer table and
/// entry name the runtime checks a manifest against (kBufferTableSymbol and
/// kNameTableSymbol of runtime/Manifest.h).
mlir::LogicalResult lowerToHostLLVM(mlir::ModuleOp module);

/// Compiles a module lowered by lowerToHostLLVM to a shared object at
/// `path`, through an object file and the system C compiler (`cc`).
mlir::LogicalResult emitHostSharedObject(mlir::ModuleOp module,
                                         llvm::StringRef path);

/// A pipeline compiled in-process for the host CPU (MLIR's ExecutionEngine).
class HostPipeline {
public:
  /// Lowers a copy of `module` (after loadPipeline) and JIT-compiles it.
  static mlir::FailureOr<std::unique_ptr<HostPipeline>>
  compile(mlir::ModuleOp module);
  ~HostPipeline();

  const PipelineSignature &signature() const { return sig; }

  /// Runs the pipeline on `buffers`, one pointer per signature buffer in
  /// order (inputs, then outputs), each holding `elements` values (i1 as
  /// one byte). Returns false and sets `error` if the engine fails.
  bool run(llvm::ArrayRef<void *> buffers, std::string &error) const;

private:
  HostPipeline() = default;
  PipelineSignature sig;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

} // namespace thdc

#endif // THDC_COMPILER_TARGETS_H
