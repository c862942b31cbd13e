//===- Pipelines.h - thdc's pass pipelines ----------------------*- C++ -*-===//
//
// The pass pipelines from a fused static pipeline to one GPU kernel in the
// NVVM dialect and to the LLVM dialect for the host CPU, their registration
// for thd-opt, and the hook through which the tools run every pass manager
// of the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_PIPELINES_H
#define THDC_COMPILER_PIPELINES_H

#include "compiler/GpuOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <functional>
#include <string>

namespace mlir {
class OpPassManager;
class PassManager;
} // namespace mlir

namespace thdc {

/// Runs each pass manager of the compiler: `run` runs `pm`, `stage` names
/// the step ("load pipeline", "lower to NVVM", "serialize kernel", "lower
/// to host"). Returns the result of `run`, or a failure of its own.
using PassManagerRunner = std::function<mlir::LogicalResult(
    mlir::PassManager &pm, llvm::StringRef stage,
    llvm::function_ref<mlir::LogicalResult()> run)>;

/// Installs `runner` (none by default: the pass managers just run; an
/// empty function removes it). The tools install one that applies MLIR's
/// command-line options (IR printing, timing, statistics); a library user
/// such as the JIT in a Python process, where those options are not
/// registered, does not. Not thread-safe: call before compiling.
void setPassManagerRunner(PassManagerRunner runner);

/// Runs `pm` on `module` through the runner installed by
/// setPassManagerRunner, if any; `stage` names the step.
mlir::LogicalResult runPassManager(mlir::PassManager &pm, mlir::ModuleOp module,
                                   llvm::StringRef stage);

/// The passes from a fused static pipeline (after loadPipeline) to one GPU
/// kernel in the NVVM dialect, with its target attached: what compileToPtx
/// runs before it serializes the kernel. `thd-opt --thd-to-ptx` runs it.
void buildPtxPipeline(mlir::OpPassManager &pm, const GpuOptions &options);

/// The passes from a fused static pipeline to the LLVM dialect for the host
/// CPU: what lowerToHostLLVM runs before it adds the packed entry.
/// `thd-opt --thd-to-host` runs it.
void buildHostPipeline(mlir::OpPassManager &pm);

/// Registers the thd passes, the upstream passes the two pipelines use (and
/// view-op-graph), and the pipelines `thd-to-ptx` and `thd-to-host`, for
/// thd-opt. Calling it again does nothing.
void registerCompilerPasses();

} // namespace thdc

#endif // THDC_COMPILER_PIPELINES_H
