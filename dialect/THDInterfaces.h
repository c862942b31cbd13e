//===- THDInterfaces.h - what every thd step answers -----------*- C++ -*-===//

#ifndef THDC_DIALECT_THDINTERFACES_H
#define THDC_DIALECT_THDINTERFACES_H

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mlir::thd {

/// How the lowering computes one result of a step.
enum class ResultKind {
  /// A `tensor<1xi32>` computed once per kernel, before the element loops.
  Scalar,
  /// An offset or length array, computed entry by entry.
  Entries,
  /// A per-token buffer, computed row by row.
  Rows,
};

/// Static lengths are 32-bit row indices on the GPU, and an empty buffer has
/// nothing to load: every static length lies in [1, kMaxStaticLength].
constexpr int64_t kMaxStaticLength = INT32_MAX;

} // namespace mlir::thd

#include "dialect/THDInterfaces.h.inc"

#endif // THDC_DIALECT_THDINTERFACES_H
