//===- Common.h - what the step families' verifiers share -------*- C++ -*-===//
//
// The checks that the verifiers of several families of steps make, and the
// helpers of their StepOpInterface methods. The families, as
// codegen/lowering/ groups them: Offsets.cpp, Rows.cpp and Metadata.cpp,
// with Fused.cpp for the kernel op. Defined in dialect/ops/Common.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_DIALECT_OPS_COMMON_H
#define THDC_DIALECT_OPS_COMMON_H

#include "dialect/THDOps.h"

#include <cstdint>
#include <optional>

namespace mlir::thd {

//===----------------------------------------------------------------------===//
// Verifier helpers
//===----------------------------------------------------------------------===//

/// The static length of a 1-D tensor value, std::nullopt when dynamic.
std::optional<int64_t> staticLength(Type type);
std::optional<int64_t> staticLength(Value value);

/// Resolves `attr` (when present) and checks `value >= minimum`.
FailureOr<std::optional<int64_t>>
resolveAtLeast(Operation *op, Attribute attr, StringRef name, int64_t minimum);

/// cu_seqlens and cu_seqlens_padded describe the same sequences: equal length.
LogicalResult verifyCuPair(Operation *op, Value cu, Value cuPadded);

/// A result whose length is a runtime value may be static only at `capacity`.
LogicalResult verifyCapacity(Operation *op, Value result, Attribute attr);

/// A fill value must be representable in the data's element type.
LogicalResult verifyFill(Operation *op, TypedAttr fill, Type elementType,
                         StringRef name);

/// The result's element type is the input's.
LogicalResult verifySameElementType(Operation *op, Type input, Type result);

/// Exactly one of `target` and `alignment`, as the reference asserts.
LogicalResult verifyTargetOrAlignment(Operation *op, Attribute target,
                                      Attribute alignment);

//===----------------------------------------------------------------------===//
// StepOpInterface helpers
//===----------------------------------------------------------------------===//

/// A parameter attribute once bound: its integer.
int64_t boundValue(Attribute attr);

/// The length of a 1-D tensor value made static.
int64_t staticLengthOf(Value value);

using Lengths = FailureOr<SmallVector<int64_t>>;

/// The lengths of a step with one result.
Lengths oneLength(int64_t length);

/// The length of a per-token result bounded by an optional 'capacity'.
Lengths capacityLength(Operation *op, Attribute capacity);

} // namespace mlir::thd

#endif // THDC_DIALECT_OPS_COMMON_H
