//===- Operands.cpp - reading attributes and operands ---------------------===//
//
// The definitions of the reading helpers that Evaluate.h declares: integer
// attributes, static lengths, result buffers, the meaningful entries of cu
// arrays, fill bits, and the checks the evaluate overloads share.
//
//===----------------------------------------------------------------------===//

#include "interpreter/Evaluate.h"

#include "dialect/THDOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/APFloat.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::thd;
namespace ref = thdc::reference;

namespace thdc::interpreter {

FailureOr<int64_t> intValue(Operation *op, Attribute attr, StringRef name) {
  if (auto integer = dyn_cast_or_null<IntegerAttr>(attr))
    return integer.getInt();
  if (auto expr = dyn_cast_or_null<ExprAttr>(attr))
    return op->emitOpError() << "cannot be evaluated: '" << name << "' is the "
                             << "parameter expression \"" << expr.getText()
                             << "\"; run thd-bind-params first";
  return op->emitOpError() << "cannot be evaluated: '" << name
                           << "' is missing";
}

FailureOr<int64_t> staticLength(Operation *op, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!type.hasStaticShape())
    return op->emitOpError()
           << "cannot be evaluated: " << type
           << " is not static; run thd-force-static-shapes first";
  return type.getDimSize(0);
}

FailureOr<Buffer> resultBuffer(Operation *op, Value value) {
  FailureOr<int64_t> length = staticLength(op, value);
  if (failed(length))
    return failure();
  return Buffer(getElementTypeOrSelf(value.getType()), *length);
}

int32_t scalarOf(const Buffer &buffer) { return buffer.get<int32_t>(0); }

std::vector<int32_t> int32Values(const Buffer &buffer) {
  return buffer.values<int32_t>();
}

int64_t countOf(Environment &env, Value numSeqs, int64_t entries) {
  int64_t last = std::max<int64_t>(entries - 1, 0);
  if (!numSeqs)
    return last;
  return std::clamp<int64_t>(scalarOf(env[numSeqs]), 0, last);
}

ref::CpMode referenceMode(CpMode mode) {
  return mode == CpMode::zigzag ? ref::CpMode::Zigzag
                                : ref::CpMode::Contiguous;
}

int64_t clampedRank(const Buffer &rank, int64_t cp) {
  return std::clamp<int64_t>(scalarOf(rank), 0, std::max<int64_t>(cp - 1, 0));
}

std::vector<int32_t> meaningful(const Buffer &array, int64_t n) {
  std::vector<int32_t> result(size_t(n) + 1, 0);
  for (int64_t i = 1; i <= n; ++i)
    result[size_t(i)] = array.get<int32_t>(i);
  return result;
}

std::vector<int32_t> meaningful(Environment &env, Value offsets,
                                Value numSeqs) {
  const Buffer &array = env[offsets];
  return meaningful(array, countOf(env, numSeqs, array.size()));
}

bool passedThroughAtOneRank(int64_t cp, Value input, Value result,
                            Environment &env) {
  if (cp != 1)
    return false;
  Buffer copy = env[input];
  env.bind(result, std::move(copy));
  return true;
}

uint64_t fillBits(TypedAttr fill, Type elementType) {
  TypedAttr constant = fillConstant(fill, elementType);
  llvm::APInt bits = isa<FloatType>(elementType)
                         ? cast<FloatAttr>(constant).getValue().bitcastToAPInt()
                         : cast<IntegerAttr>(constant).getValue();
  return bits.getZExtValue();
}

LogicalResult referenceError(Operation *op, const std::string &message) {
  return op->emitOpError() << "cannot be evaluated: " << message;
}

LogicalResult checkEntries(Operation *op, const Buffer &array, int64_t n,
                           StringRef name) {
  if (array.size() >= n + 1)
    return success();
  return op->emitOpError() << "cannot be evaluated: " << name << " has "
                           << array.size() << " entries but num_seqs = " << n
                           << " needs " << n + 1;
}

LogicalResult checkNonDecreasing(Operation *op, const std::vector<int32_t> &cu,
                                 StringRef name) {
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      return op->emitOpError()
             << "cannot be evaluated: " << name << "[" << i << "] = " << cu[i]
             << " is below " << name << "[" << i - 1 << "] = " << cu[i - 1];
  return success();
}

int64_t boundedRows(int64_t total, int64_t staticRows) {
  return std::clamp<int64_t>(total, 0, staticRows);
}

LogicalResult checkInt32(Operation *op, int64_t value, StringRef what) {
  if (value >= std::numeric_limits<int32_t>::min() &&
      value <= std::numeric_limits<int32_t>::max())
    return success();
  return op->emitOpError() << "cannot be evaluated: " << what << " = " << value
                           << " does not fit i32";
}

} // namespace thdc::interpreter
