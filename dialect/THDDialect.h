//===- THDDialect.h - the thd dialect ---------------------------*- C++ -*-===//

#ifndef THDC_DIALECT_THDDIALECT_H
#define THDC_DIALECT_THDDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "llvm/ADT/StringMap.h"

#include "dialect/THDDialect.h.inc"

#include "dialect/THDEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/THDAttrs.h.inc"

namespace mlir::thd {

/// The pipeline parameters visible from `op`: the defaults declared in the
/// nearest enclosing `thd.params`, overridden by the dialect's `--param`
/// values. Empty when no ancestor declares parameters.
llvm::StringMap<int64_t> getPipelineParams(Operation *op);

/// The value of an integer-or-parameter-expression attribute `attr`, named
/// `attrName` in diagnostics. Emits an error on `op` and fails when the
/// expression names an undeclared parameter or cannot be evaluated.
FailureOr<int64_t> resolveIntOrParam(Operation *op, Attribute attr,
                                     llvm::StringRef attrName);

/// The same without a diagnostic: std::nullopt when `attr` does not resolve.
std::optional<int64_t> tryResolveIntOrParam(Operation *op, Attribute attr);

} // namespace mlir::thd

#endif // THDC_DIALECT_THDDIALECT_H
