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

/// The pipeline parameters visible from `op`: the values in the nearest
/// enclosing `thd.params`. Empty when no ancestor declares parameters.
llvm::StringMap<int64_t> getPipelineParams(Operation *op);

/// Writes `overrides` (`--param NAME=VALUE`, a compile call's `params`) into
/// every `thd.params` declared on `root` or inside it, replacing the
/// declared values. The drivers call it between parsing (without
/// verification) and verifying, so that the module is verified with the
/// values it is compiled for. Emits an error naming the first undeclared
/// parameter and listing the declared ones, and fails, when a declaration
/// lacks one of the names or when nothing declares parameters; does nothing
/// when `overrides` is empty.
LogicalResult applyParamOverrides(Operation *root,
                                  const llvm::StringMap<int64_t> &overrides);

/// The value of an integer-or-parameter-expression attribute `attr`, named
/// `attrName` in diagnostics. Emits an error on `op` and fails when the
/// expression names an undeclared parameter or cannot be evaluated.
FailureOr<int64_t> resolveIntOrParam(Operation *op, Attribute attr,
                                     llvm::StringRef attrName);

/// The same without a diagnostic: std::nullopt when `attr` does not resolve.
std::optional<int64_t> tryResolveIntOrParam(Operation *op, Attribute attr);

} // namespace mlir::thd

#endif // THDC_DIALECT_THDDIALECT_H
