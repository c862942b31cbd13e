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

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <functional>
#include <string>

namespace mlir {
class OpPassManager;
class PassManager;
} // namespace mlir

namespace thdc {

/// Options of the GPU back end.
struct GpuOptions {
  std::string chip = "sm_90"; ///< sm_90 (default) or sm_80
  int64_t blockSize = 0;      ///< 0: chosen from the output lengths
  int64_t maxBlocks = 0;      ///< 0: one thread per element
  int64_t rowsPerThread = 0;  ///< elements per GPU thread (0: chosen)
  /// Consecutive elements a GPU thread stores with one vector access (0:
  /// chosen from the output lengths).
  int64_t vectorWidth = 0;
  /// Multiprocessors of the GPU the launch geometry is chosen for (0: those
  /// of the usual data-centre part of `chip`, defaultSmCount).
  int64_t smCount = 0;
  /// Also assemble the PTX for `chip` into a cubin in the bundle (with
  /// CUDA's ptxas; skipped when there is none), so that loading the bundle
  /// on that chip compiles nothing.
  bool assembleCubin = false;
  /// Assemble the cubin in-process with nvJitLink (runtime/PtxCompiler.h)
  /// rather than with ptxas; where nvJitLink is missing or fails, the bundle
  /// has the PTX alone and the driver compiles it at load time.
  bool cubinInProcess = false;
  /// Optimisation level of the cubin's assembly (ptxas -O).
  int ptxOptLevel = 3;
  /// Optimisation level of LLVM's NVPTX back end. 2 rather than 3: on every
  /// example pipeline O2 gives the same PTX as O3 (pack_microbatch: 4
  /// fewer instructions of 2444, the same loads and stores) in about 40%
  /// less time.
  int llvmOptLevel = 2;
};

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
