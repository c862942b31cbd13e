//===- Compiler.h - load a pipeline for the compiler -----------*- C++ -*-===//
//
// The driver's entry: pipeline text parsed, screened, verified with its
// parameters and fused into one kernel (loadPipeline), and the signature
// the runtime calls it by. What is made of it next: compiler/Targets.h (PTX,
// cubin, host code) and compiler/Bundle.h (the bundle). Used by the `thdc`
// and `thd-run` drivers and by the JIT.
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
#include <string>
#include <vector>

namespace thdc {

/// What the runtime needs to call a compiled pipeline.
struct PipelineSignature {
  std::string entry;               ///< the function (and kernel) name
  /// Its arguments, then its results, in kernel parameter order.
  std::vector<runtime::BufferDesc> buffers;
  llvm::StringMap<int64_t> params; ///< the parameter values compiled in
};

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

} // namespace thdc

#endif // THDC_COMPILER_COMPILER_H
