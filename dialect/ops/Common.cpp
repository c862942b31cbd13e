//===- Common.cpp - what the step families' verifiers share ---------------===//
//
// The definitions of dialect/ops/Common.h.
//
//===----------------------------------------------------------------------===//

#include "dialect/ops/Common.h"

namespace mlir::thd {

//===----------------------------------------------------------------------===//
// Verifier helpers
//===----------------------------------------------------------------------===//

std::optional<int64_t> staticLength(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  if (tensor.isDynamicDim(0))
    return std::nullopt;
  return tensor.getDimSize(0);
}
std::optional<int64_t> staticLength(Value value) {
  return staticLength(value.getType());
}

FailureOr<std::optional<int64_t>>
resolveAtLeast(Operation *op, Attribute attr, StringRef name, int64_t minimum) {
  if (!attr)
    return std::optional<int64_t>();
  FailureOr<int64_t> value = resolveIntOrParam(op, attr, name);
  if (failed(value))
    return failure();
  if (*value < minimum)
    return op->emitOpError() << "'" << name << "' must be at least " << minimum
                             << ", got " << *value;
  // Lengths, offsets and counts are 32-bit on the device; bounding every
  // configuration value there also keeps the verifiers' arithmetic (cp * 2,
  // max_seqs + 1, target * cp) far from overflowing.
  if (*value > INT32_MAX)
    return op->emitOpError() << "'" << name << "' must be at most "
                             << INT32_MAX << ", got " << *value;
  return std::optional<int64_t>(*value);
}

LogicalResult verifyCuPair(Operation *op, Value cu, Value cuPadded) {
  std::optional<int64_t> a = staticLength(cu), b = staticLength(cuPadded);
  if (a && b && *a != *b)
    return op->emitOpError() << "cu_seqlens has " << *a
                             << " entries but cu_seqlens_padded has " << *b;
  for (std::optional<int64_t> n : {a, b})
    if (n && *n < 1)
      return op->emitOpError()
             << "cumulative-offset arrays need at least one entry, got " << *n;
  return success();
}

LogicalResult verifyCapacity(Operation *op, Value result, Attribute attr) {
  FailureOr<std::optional<int64_t>> capacity =
      resolveAtLeast(op, attr, "capacity", 0);
  if (failed(capacity))
    return failure();
  std::optional<int64_t> length = staticLength(result);
  if (*capacity && length && *length != **capacity)
    return op->emitOpError() << "result has static length " << *length
                             << " but 'capacity' is " << **capacity;
  return success();
}

LogicalResult verifyFill(Operation *op, TypedAttr fill, Type elementType,
                         StringRef name) {
  if (!fill)
    return success();
  bool fits;
  if (auto boolean = dyn_cast<BoolAttr>(fill)) {
    fits = elementType.isInteger(1);
  } else if (auto integer = dyn_cast<IntegerAttr>(fill)) {
    unsigned width =
        elementType.isIntOrIndex() ? elementType.getIntOrFloatBitWidth() : 0;
    // Integers fill integer data of any width that holds them, and floats.
    fits = isa<FloatType>(elementType) ||
           (width > 1 && llvm::isIntN(width, integer.getInt()));
  } else {
    fits = isa<FloatType>(elementType);
  }
  if (!fits)
    return op->emitOpError()
           << "'" << name << "' value " << fill
           << " does not fit the element type " << elementType;
  return success();
}

LogicalResult verifySameElementType(Operation *op, Type input, Type result) {
  Type a = cast<ShapedType>(input).getElementType();
  Type b = cast<ShapedType>(result).getElementType();
  if (a != b)
    return op->emitOpError() << "result element type " << b
                             << " differs from the input element type " << a;
  return success();
}

LogicalResult verifyTargetOrAlignment(Operation *op, Attribute target,
                                      Attribute alignment) {
  if (target && alignment)
    return op->emitOpError()
           << "expects exactly one of 'target' and 'alignment', got both";
  if (!target && !alignment)
    return op->emitOpError()
           << "expects exactly one of 'target' and 'alignment', got neither";
  return success();
}

//===----------------------------------------------------------------------===//
// StepOpInterface helpers
//===----------------------------------------------------------------------===//

int64_t boundValue(Attribute attr) { return cast<IntegerAttr>(attr).getInt(); }

int64_t staticLengthOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getDimSize(0);
}

Lengths oneLength(int64_t length) { return SmallVector<int64_t>{length}; }

Lengths capacityLength(Operation *op, Attribute capacity) {
  if (!capacity)
    return op->emitOpError()
           << "cannot be made static: its result has "
              "cu_seqlens_padded[num_seqs] rows, a value known only on the "
              "device; bound it with a 'capacity' (for example capacity "
              "\"C*cp\")";
  return oneLength(boundValue(capacity));
}

} // namespace mlir::thd
