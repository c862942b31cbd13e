//===- Passes.h - thd passes ------------------------------------*- C++ -*-===//

#ifndef THDC_PASSES_PASSES_H
#define THDC_PASSES_PASSES_H

#include "dialect/THDOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::thd {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The `thd-set-params` pass with `values` as its `params` option: what
/// thd-opt runs first for its `--param NAME=VALUE` flags.
std::unique_ptr<Pass>
createSetParamsPass(const llvm::StringMap<int64_t> &values);

/// Replaces every parameter expression in `module` by its value and records
/// the values used in `thd.params`; emits errors and fails on any that
/// cannot be evaluated. Shared by thd-bind-params and thd-force-static-shapes.
LogicalResult bindPipelineParams(ModuleOp module);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::thd

#endif // THDC_PASSES_PASSES_H
