//===- Passes.h - thd passes ------------------------------------*- C++ -*-===//

#ifndef THDC_PASSES_PASSES_H
#define THDC_PASSES_PASSES_H

#include "dialect/THDOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::thd {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::thd

#endif // THDC_PASSES_PASSES_H
