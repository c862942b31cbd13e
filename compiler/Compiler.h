//===- Compiler.h - thdc's compilation pipeline as a library ----*- C++ -*-===//
//
// From pipeline text to what the runtime needs: the static signature of the
// pipeline, the PTX of its one kernel, and its host (CPU) code. Used by the
// `thdc` and `thd-run` drivers and by the JIT.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_COMPILER_H
#define THDC_COMPILER_COMPILER_H

#include "runtime/Manifest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
class ExecutionEngine;
class OpPassManager;
class PassManager;
} // namespace mlir

namespace thdc {

/// The multiprocessor count of the usual data-centre part of `chip` (H100
/// and H200 for sm_90), for a launch geometry chosen without the device; 132
/// for a chip without an entry.
int64_t defaultSmCount(llvm::StringRef chip);

/// Registers every dialect, interface and translation the compiler uses.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// What the runtime needs to call a compiled pipeline.
struct PipelineSignature {
  std::string entry;               ///< the function (and kernel) name
  /// Its arguments, then its results, in kernel parameter order.
  std::vector<runtime::BufferDesc> buffers;
  llvm::StringMap<int64_t> params; ///< the parameter values compiled in
};

/// Options of the GPU back end.
struct GpuOptions {
  std::string chip = "sm_90"; ///< sm_90 (default) or sm_80
  int64_t blockSize = 0;      ///< 0: chosen from the output lengths
  int64_t maxBlocks = 0;      ///< 0: one thread per element
  int64_t rowsPerThread = 0;  ///< elements per GPU thread (0: chosen)
  /// Multiprocessors of the GPU the launch geometry is chosen for (0: those
  /// of the usual data-centre part of `chip`, defaultSmCount).
  int64_t smCount = 0;
  /// Also assemble the PTX for `chip` into a cubin in the bundle (with
  /// CUDA's ptxas; skipped when there is none), so that loading the bundle
  /// on that chip compiles nothing.
  bool assembleCubin = false;
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

/// Parses `sourceMgr`'s main buffer, writes `params` into its `thd.params`
/// (thd::applyParamOverrides: an error for a name it does not declare) and
/// verifies it with them, then forces static shapes, checks that the
/// pipeline is capturable and fuses it into one kernel. Diagnostics go to
/// the context's handler. The module must hold exactly one pipeline
/// function. Nothing of one call stays in `context`: a process may load
/// many pipelines, with different parameters, in one context.
mlir::OwningOpRef<mlir::ModuleOp>
loadPipeline(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
             const llvm::StringMap<int64_t> &params);

/// The signature of the fused pipeline in `module` (after loadPipeline).
mlir::FailureOr<PipelineSignature> describePipeline(mlir::ModuleOp module);

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

/// The PTX ISA version thdc emits for `chip` (80 for PTX 8.0), or none when
/// it does not compile for that chip.
std::optional<unsigned> ptxVersionFor(llvm::StringRef chip);

/// Fails with a diagnostic on `anchor` unless `chip` is an architecture
/// this compiler emits PTX for (sm_75 to sm_121f; see ptxVersionFor).
mlir::LogicalResult checkGpuChip(mlir::Operation *anchor, llvm::StringRef chip);

/// Runs buildPtxPipeline on a copy of `module` and returns the copy.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerToNVVM(mlir::ModuleOp module, const GpuOptions &options);

/// Lowers a copy of `module` to one GPU kernel and returns its PTX; also
/// the launch geometry in `grid` and `block`.
mlir::FailureOr<std::string> compileToPtx(mlir::ModuleOp module,
                                          const GpuOptions &options,
                                          int64_t grid[3], int64_t block[3]);

/// Runs buildHostPipeline on `module` in place.
mlir::LogicalResult runHostPipeline(mlir::ModuleOp module);

/// Lowers `module` in place to the LLVM dialect for the host CPU: the
/// pipeline becomes `void entry(T0 *, T1 *, ...)` over bare pointers, plus
/// `void entry_packed(void **buffers)` calling it, and the buffer table and
/// entry name the runtime checks a manifest against (kBufferTableSymbol and
/// kEntryNameSymbol of runtime/Manifest.h).
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

#endif // THDC_COMPILER_COMPILER_H
