//===- Interpreter.cpp - reference interpreter of thd pipelines -----------===//
//
// One `evaluate` overload per thd op. The dispatch below expands the
// dialect's generated op list, so an op added to THDOps.td without an
// overload here does not compile.
//
// Conventions every op shares, from the ODS descriptions:
// - `num_seqs %n` makes the first n+1 entries of a cu array meaningful; n is
//   clamped into the array (a count the array cannot hold has no meaning).
// - A CP rank read by a step is clamped into [0, cp).
// - Entry 0 of a cu array is 0 ("an array does not start at 0" is a fault
//   that thd.validate reports, after which the ops see an empty microbatch
//   and must return the outputs of one).
// - A result whose length depends on the data (`cu_seqlens_padded[n]` rows,
//   `T / cp` rows) is bounded by its static length; past its meaningful rows
//   it holds the op's fill: `pad` for thd.pack, true (padding) for
//   thd.padding_mask, 0 for thd.position_ids, 0 for thd.cp_slice (whose
//   rows there the ODS leaves unspecified; pipelines pad them with
//   thd.pad_tail, which reads only the meaningful rows).
//
//===----------------------------------------------------------------------===//

#include "interpreter/Interpreter.h"

#include "dialect/THDDialect.h"
#include "dialect/THDOps.h"
#include "reference/Reference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::thd;
namespace ref = thdc::reference;

namespace thdc::interpreter {

unsigned Buffer::widthOf(Type elementType) {
  return std::max<unsigned>(1, (elementType.getIntOrFloatBitWidth() + 7) / 8);
}

Buffer::Buffer(Type elementType, int64_t elements)
    : elementType(elementType), elementWidth(widthOf(elementType)),
      elements(elements), rows(elements),
      bytes(size_t(elements) * widthOf(elementType), 0) {}

namespace {

/// The values of a pipeline function being interpreted.
class Environment {
public:
  const Buffer &operator[](Value value) const {
    auto found = values.find(value);
    assert(found != values.end() && "operand evaluated before its use");
    return found->second;
  }
  void bind(Value value, Buffer buffer) { values[value] = std::move(buffer); }

private:
  llvm::DenseMap<Value, Buffer> values;
};

//===----------------------------------------------------------------------===//
// Reading attributes and operands
//===----------------------------------------------------------------------===//

/// An integer attribute's value; a parameter expression not yet bound is an
/// error naming the attribute.
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

/// The static length of a result (or operand) type.
FailureOr<int64_t> staticLength(Operation *op, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!type.hasStaticShape())
    return op->emitOpError()
           << "cannot be evaluated: " << type
           << " is not static; run thd-force-static-shapes first";
  return type.getDimSize(0);
}

/// A fresh result buffer of `value`'s static type.
FailureOr<Buffer> resultBuffer(Operation *op, Value value) {
  FailureOr<int64_t> length = staticLength(op, value);
  if (failed(length))
    return failure();
  return Buffer(getElementTypeOrSelf(value.getType()), *length);
}

/// Element 0 of a tensor<1xi32>.
int32_t scalarOf(const Buffer &buffer) { return buffer.get<int32_t>(0); }

std::vector<int32_t> int32Values(const Buffer &buffer) {
  return buffer.values<int32_t>();
}

/// The number of meaningful sequences of an array of `entries` entries read
/// with `numSeqs` (all of them without it), clamped into the array.
int64_t countOf(Environment &env, Value numSeqs, int64_t entries) {
  int64_t last = std::max<int64_t>(entries - 1, 0);
  if (!numSeqs)
    return last;
  return std::clamp<int64_t>(scalarOf(env[numSeqs]), 0, last);
}

/// The reference's name for an op's CP partition mode.
ref::CpMode referenceMode(CpMode mode) {
  return mode == CpMode::zigzag ? ref::CpMode::Zigzag
                                : ref::CpMode::Contiguous;
}

/// A CP rank read by a step, clamped into [0, cp): a rank outside is a
/// fault that thd.validate reports, and with cp = 1 every rank reads the
/// whole buffer.
int64_t clampedRank(const Buffer &rank, int64_t cp) {
  return std::clamp<int64_t>(scalarOf(rank), 0, std::max<int64_t>(cp - 1, 0));
}

/// The meaningful entries [0, a1, ..., an] of a cu array (entry 0 is 0).
std::vector<int32_t> meaningful(const Buffer &array, int64_t n) {
  std::vector<int32_t> result(size_t(n) + 1, 0);
  for (int64_t i = 1; i <= n; ++i)
    result[size_t(i)] = array.get<int32_t>(i);
  return result;
}

/// The meaningful entries of the cu array `offsets` for the step's num_seqs
/// (all of them without one).
std::vector<int32_t> meaningful(Environment &env, Value offsets,
                                Value numSeqs) {
  const Buffer &array = env[offsets];
  return meaningful(array, countOf(env, numSeqs, array.size()));
}

/// With cp = 1 a CP slice and its inverse give their input unchanged: binds
/// `result` to it and returns true; false for any other cp.
bool passedThroughAtOneRank(int64_t cp, Value input, Value result,
                            Environment &env) {
  if (cp != 1)
    return false;
  Buffer copy = env[input];
  env.bind(result, std::move(copy));
  return true;
}

/// The bit pattern of `fill` (zero when absent) as an element of
/// `elementType`.
uint64_t fillBits(TypedAttr fill, Type elementType) {
  TypedAttr constant = fillConstant(fill, elementType);
  llvm::APInt bits = isa<FloatType>(elementType)
                         ? cast<FloatAttr>(constant).getValue().bitcastToAPInt()
                         : cast<IntegerAttr>(constant).getValue();
  return bits.getZExtValue();
}

/// Calls `body(T{})` with the unsigned integer type of `width` bytes: the
/// data-moving ops copy elements bit for bit, whatever their type.
template <typename Body> auto withElementWidth(unsigned width, Body body) {
  switch (width) {
  case 1:
    return body(uint8_t{});
  case 2:
    return body(uint16_t{});
  case 4:
    return body(uint32_t{});
  default:
    return body(uint64_t{});
  }
}

/// Reports a reference error at `op`; returns failure.
LogicalResult referenceError(Operation *op, const std::string &message) {
  return op->emitOpError() << "cannot be evaluated: " << message;
}

/// The first `rows` values of a buffer as T.
template <typename T> std::vector<T> firstRows(const Buffer &buffer) {
  std::vector<T> all = buffer.values<T>();
  all.resize(size_t(std::clamp<int64_t>(buffer.getRows(), 0, buffer.size())));
  return all;
}

/// Fails unless the cu array `array` holds the n+1 entries read from it.
LogicalResult checkEntries(Operation *op, const Buffer &array, int64_t n,
                           StringRef name) {
  if (array.size() >= n + 1)
    return success();
  return op->emitOpError() << "cannot be evaluated: " << name << " has "
                           << array.size() << " entries but num_seqs = " << n
                           << " needs " << n + 1;
}

/// Fails unless the meaningful entries do not decrease: the row-wise ops
/// look rows up in them, which has no meaning for a decreasing array.
LogicalResult checkNonDecreasing(Operation *op, const std::vector<int32_t> &cu,
                                 StringRef name) {
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      return op->emitOpError()
             << "cannot be evaluated: " << name << "[" << i << "] = " << cu[i]
             << " is below " << name << "[" << i - 1 << "] = " << cu[i - 1];
  return success();
}

/// Rows of a data-dependent result: `total` bounded by the static length.
int64_t boundedRows(int64_t total, int64_t staticRows) {
  return std::clamp<int64_t>(total, 0, staticRows);
}

/// A per-sequence cu array computed in 64 bits must fit i32.
LogicalResult checkInt32(Operation *op, int64_t value, StringRef what) {
  if (value >= std::numeric_limits<int32_t>::min() &&
      value <= std::numeric_limits<int32_t>::max())
    return success();
  return op->emitOpError() << "cannot be evaluated: " << what << " = " << value
                           << " does not fit i32";
}

//===----------------------------------------------------------------------===//
// One overload per op
//===----------------------------------------------------------------------===//

LogicalResult evaluate(AlignLengthsOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<int64_t> tp = intValue(op, op.getTp(), "tp");
  FailureOr<int64_t> dp =
      op.getDpAttr() ? intValue(op, op.getDpAttr(), "dp") : FailureOr<int64_t>(1);
  FailureOr<int64_t> multiple =
      op.getMultipleAttr() ? intValue(op, op.getMultipleAttr(), "multiple")
                           : FailureOr<int64_t>(1);
  FailureOr<Buffer> result = resultBuffer(op, op.getPaddedLens());
  if (failed(cp) || failed(tp) || failed(dp) || failed(multiple) ||
      failed(result))
    return failure();
  ref::Expected<int64_t> granularity = ref::padGranularity(
      *cp, *tp, op.getSequenceParallel(), *dp, bool(op.getDpAttr()), *multiple);
  if (!granularity)
    return referenceError(op, granularity.error());
  std::vector<int32_t> valid = int32Values(env[op.getValidLens()]);
  // p = ceil(v / G) * G for every v, negative ones included (the reference's
  // S1 step refuses those; bad lengths are reported by thd.validate).
  std::vector<int32_t> padded(valid.size());
  if (std::all_of(valid.begin(), valid.end(),
                  [](int32_t v) { return v >= 0; })) {
    ref::Expected<std::vector<int32_t>> aligned =
        ref::alignLengths(valid, *granularity);
    if (!aligned)
      return referenceError(op, aligned.error());
    padded = *aligned;
  } else {
    for (size_t i = 0; i < valid.size(); ++i) {
      int64_t p = ref::roundUp(valid[i], *granularity);
      if (failed(checkInt32(op, p, "a padded length")))
        return failure();
      padded[i] = int32_t(p);
    }
  }
  result->assign(padded, 0);
  env.bind(op.getPaddedLens(), std::move(*result));
  return success();
}

LogicalResult evaluate(GatherOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getResult());
  if (failed(result))
    return failure();
  const Buffer &values = env[op.getValues()];
  std::vector<int32_t> ids = int32Values(env[op.getIds()]);
  if (values.size() == 0)
    return referenceError(op, "values has no entry to gather");
  int64_t n = op.getNumSeqs()
                  ? std::clamp<int64_t>(scalarOf(env[op.getNumSeqs()]), 0,
                                        int64_t(ids.size()))
                  : int64_t(ids.size());
  // The first n ids, clamped into `values`; the entries beyond are 0.
  ids.resize(size_t(n));
  for (int32_t &id : ids)
    id = std::clamp<int32_t>(id, 0, int32_t(values.size() - 1));
  ref::Expected<std::vector<int32_t>> gathered =
      ref::cpSlice(int32Values(values), ids);
  if (!gathered)
    return referenceError(op, gathered.error());
  result->assign(*gathered, 0);
  env.bind(op.getResult(), std::move(*result));
  return success();
}

LogicalResult evaluate(CuSeqlensOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getOffsets());
  if (failed(result))
    return failure();
  std::vector<int32_t> lengths = int32Values(env[op.getLengths()]);
  int64_t n = countOf(env, op.getNumSeqs(), result->size());
  lengths.resize(size_t(std::min<int64_t>(n, lengths.size())));
  std::vector<int32_t> offsets;
  if (std::all_of(lengths.begin(), lengths.end(),
                  [](int32_t v) { return v >= 0; })) {
    ref::Expected<std::vector<int32_t>> cumulative =
        ref::cumulativeLengths(lengths);
    if (!cumulative)
      return referenceError(op, cumulative.error());
    offsets = *cumulative;
  } else {
    // Negative lengths (bad data, reported by thd.validate) still sum.
    int64_t sum = 0;
    offsets.push_back(0);
    for (int32_t length : lengths) {
      sum += length;
      if (failed(checkInt32(op, sum, "a cumulative length")))
        return failure();
      offsets.push_back(int32_t(sum));
    }
  }
  // The entries past the n-th repeat the total.
  result->assign(offsets, uint32_t(offsets.back()));
  env.bind(op.getOffsets(), std::move(*result));
  return success();
}

LogicalResult evaluate(MaxSeqlenOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getMaxSeqlen());
  if (failed(result))
    return failure();
  const Buffer &offsets = env[op.getOffsets()];
  int64_t n = countOf(env, op.getNumSeqs(), offsets.size());
  result->set<int32_t>(0, ref::maxSeqlenFromCu(meaningful(offsets, n)));
  env.bind(op.getMaxSeqlen(), std::move(*result));
  return success();
}

/// The padding mask of the meaningful rows of (cu, cup) read with
/// `numSeqs`, and n; shared by the ops that derive rows from it.
struct RowLayout {
  std::vector<int32_t> cu, cup;
  std::vector<uint8_t> mask;
  int64_t n = 0;
};

FailureOr<RowLayout> rowLayout(Operation *op, Environment &env, Value cuValue,
                               Value cupValue, Value numSeqs) {
  const Buffer &cuBuffer = env[cuValue], &cupBuffer = env[cupValue];
  RowLayout layout;
  layout.n = countOf(env, numSeqs, cupBuffer.size());
  if (failed(checkEntries(op, cuBuffer, layout.n, "cu_seqlens")))
    return failure();
  layout.cu = meaningful(cuBuffer, layout.n);
  layout.cup = meaningful(cupBuffer, layout.n);
  if (failed(checkNonDecreasing(op, layout.cup, "cu_seqlens_padded")))
    return failure();
  ref::Expected<std::vector<uint8_t>> mask =
      ref::paddingMask(layout.cu, layout.cup);
  if (!mask)
    return referenceError(op, mask.error());
  layout.mask = std::move(*mask);
  return layout;
}

LogicalResult evaluate(PaddingMaskOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getMask());
  FailureOr<RowLayout> layout = rowLayout(
      op, env, op.getCuSeqlens(), op.getCuSeqlensPadded(), op.getNumSeqs());
  if (failed(result) || failed(layout))
    return failure();
  result->setRows(boundedRows(layout->cup.back(), result->size()));
  result->assign(layout->mask, /*fill=*/1);
  env.bind(op.getMask(), std::move(*result));
  return success();
}

LogicalResult evaluate(PositionIdsOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getPositionIds());
  FailureOr<RowLayout> layout = rowLayout(
      op, env, op.getCuSeqlens(), op.getCuSeqlensPadded(), op.getNumSeqs());
  if (failed(result) || failed(layout))
    return failure();
  ref::Expected<std::vector<int64_t>> positions =
      ref::positionIds(layout->cu, layout->cup);
  if (!positions)
    return referenceError(op, positions.error());
  result->setRows(boundedRows(layout->cup.back(), result->size()));
  withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    std::vector<T> narrowed(positions->begin(), positions->end());
    result->assign(narrowed, 0);
  });
  env.bind(op.getPositionIds(), std::move(*result));
  return success();
}

LogicalResult evaluate(PackOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getPacked());
  FailureOr<RowLayout> layout = rowLayout(
      op, env, op.getCuSeqlens(), op.getCuSeqlensPadded(), op.getNumSeqs());
  if (failed(result) || failed(layout))
    return failure();
  const Buffer &pool = env[op.getPool()];
  std::vector<int32_t> offsets = int32Values(env[op.getSampleOffsets()]);
  std::vector<int32_t> ids = int32Values(env[op.getSampleIds()]);
  int64_t total = layout->cup.back();
  if (total > 0 && (pool.size() == 0 || offsets.empty()))
    return referenceError(op, "the pool has no row to pack");
  if (layout->n > int64_t(ids.size()))
    return referenceError(
        op, "sample_ids has " + std::to_string(ids.size()) +
                " entries but num_seqs = " + std::to_string(layout->n));
  // The sequence of every row, then the pool row of every valid row; the
  // reads are clamped into the ids, the offsets and the pool (a chosen
  // sample outside the pool is reported by thd.validate).
  ref::Expected<std::vector<int32_t>> sequenceOf =
      ref::seqIdx(layout->cup, total);
  if (!sequenceOf)
    return referenceError(op, sequenceOf.error());
  int64_t rows = boundedRows(total, result->size());
  std::vector<int32_t> sourceRows;
  std::vector<uint8_t> isPadding(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    isPadding[size_t(r)] = layout->mask[size_t(r)];
    int64_t s = (*sequenceOf)[size_t(r)];
    int64_t id =
        std::clamp<int64_t>(ids[size_t(s)], 0, int64_t(offsets.size()) - 1);
    int64_t source =
        int64_t(offsets[size_t(id)]) + (r - layout->cup[size_t(s)]);
    sourceRows.push_back(
        int32_t(std::clamp<int64_t>(source, 0, pool.size() - 1)));
  }
  uint64_t pad = fillBits(op.getPad(), result->getElementType());
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    ref::Expected<std::vector<T>> gathered =
        ref::cpSlice(pool.values<T>(), sourceRows);
    if (!gathered)
      return referenceError(op, gathered.error());
    T padValue;
    std::memcpy(&padValue, &pad, sizeof(T));
    ref::Expected<std::vector<T>> packed =
        ref::sanitize(*gathered, isPadding, padValue);
    if (!packed)
      return referenceError(op, packed.error());
    result->assign(*packed, pad);
    return success();
  });
  if (failed(status))
    return failure();
  result->setRows(rows);
  env.bind(op.getPacked(), std::move(*result));
  return success();
}

LogicalResult evaluate(SanitizeOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getResult());
  if (failed(result))
    return failure();
  const Buffer &input = env[op.getInput()], &mask = env[op.getMask()];
  if (input.size() != mask.size() || input.size() != result->size())
    return referenceError(op, "the input has " + std::to_string(input.size()) +
                                  " rows, the mask " +
                                  std::to_string(mask.size()));
  // Rows past the mask's meaningful ones are padding.
  std::vector<uint8_t> isPadding = mask.values<uint8_t>();
  for (int64_t r = std::max<int64_t>(mask.getRows(), 0); r < mask.size(); ++r)
    isPadding[size_t(r)] = 1;
  uint64_t fill = fillBits(op.getFillAttr(), result->getElementType());
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    T fillValue;
    std::memcpy(&fillValue, &fill, sizeof(T));
    ref::Expected<std::vector<T>> sanitized =
        ref::sanitize(input.values<T>(), isPadding, fillValue);
    if (!sanitized)
      return referenceError(op, sanitized.error());
    result->assign(*sanitized, fill);
    return success();
  });
  if (failed(status))
    return failure();
  result->setRows(std::min(input.getRows(), mask.getRows()));
  env.bind(op.getResult(), std::move(*result));
  return success();
}

LogicalResult evaluate(CpSliceOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<Buffer> result = resultBuffer(op, op.getResult());
  if (failed(cp) || failed(result))
    return failure();
  if (passedThroughAtOneRank(*cp, op.getInput(), op.getResult(), env))
    return success();
  const Buffer &input = env[op.getInput()];
  std::vector<int32_t> cup =
      meaningful(env, op.getCuSeqlensPadded(), op.getNumSeqs());
  int64_t total = cup.back();
  int64_t rank = clampedRank(env[op.getCpRank()], *cp);
  std::vector<int32_t> indices;
  // An empty microbatch has an empty slice (TE would reject T == 0).
  if (total != 0) {
    ref::Expected<std::vector<int32_t>> partition = ref::cpPartitionIndices(
        cup, total, *cp, rank, referenceMode(op.getMode()));
    if (!partition)
      return referenceError(op, partition.error());
    indices = std::move(*partition);
  }
  int64_t rows = boundedRows(int64_t(indices.size()), result->size());
  indices.resize(size_t(rows));
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    ref::Expected<std::vector<T>> slice =
        ref::cpSlice(input.values<T>(), indices);
    if (!slice)
      return referenceError(op, slice.error());
    result->assign(*slice, 0);
    return success();
  });
  if (failed(status))
    return failure();
  result->setRows(rows);
  env.bind(op.getResult(), std::move(*result));
  return success();
}

LogicalResult evaluate(CpUnsliceOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<int64_t> rowsPerRank =
      intValue(op, op.getRowsPerRank(), "rows_per_rank");
  FailureOr<Buffer> result = resultBuffer(op, op.getResult());
  if (failed(cp) || failed(rowsPerRank) || failed(result))
    return failure();
  if (passedThroughAtOneRank(*cp, op.getInput(), op.getResult(), env))
    return success();
  const Buffer &input = env[op.getInput()];
  ref::Expected<std::vector<int32_t>> indices = ref::cpUnsliceIndices(
      meaningful(env, op.getCuSeqlensPadded(), op.getNumSeqs()), *cp,
      *rowsPerRank, referenceMode(op.getMode()));
  if (!indices)
    return referenceError(op, indices.error());
  if (int64_t(indices->size()) != result->size())
    return referenceError(op, "the result has " +
                                  std::to_string(result->size()) +
                                  " rows but cp * rows_per_rank is " +
                                  std::to_string(indices->size()));
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    ref::Expected<std::vector<T>> rows =
        ref::cpSlice(input.values<T>(), *indices);
    if (!rows)
      return referenceError(op, rows.error());
    result->assign(*rows, 0);
    return success();
  });
  if (failed(status))
    return failure();
  env.bind(op.getResult(), std::move(*result));
  return success();
}

LogicalResult evaluate(RopePositionsOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<int64_t> length = intValue(op, op.getLength(), "length");
  FailureOr<int64_t> tableRows = intValue(op, op.getTableRows(), "table_rows");
  FailureOr<Buffer> result = resultBuffer(op, op.getPositions());
  if (failed(cp) || failed(length) || failed(tableRows) || failed(result))
    return failure();
  std::vector<int32_t> cup =
      meaningful(env, op.getCuSeqlensPadded(), op.getNumSeqs());
  if (cup.size() == 1)
    return referenceError(op, "rope positions need at least one sequence "
                              "(num_seqs is 0)");
  ref::Expected<std::vector<int64_t>> rows = ref::ropeTableRows(
      cup, *cp, clampedRank(env[op.getCpRank()], *cp),
      result->size(), scalarOf(env[op.getMaxSeqlen()]), *tableRows);
  if (!rows)
    return referenceError(op, rows.error());
  std::vector<int32_t> narrowed(rows->begin(), rows->end());
  result->assign(narrowed, 0);
  env.bind(op.getPositions(), std::move(*result));
  return success();
}

LogicalResult evaluate(SeqIdxOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getSeqIdx());
  if (failed(result))
    return failure();
  std::vector<int32_t> cup =
      meaningful(env, op.getCuSeqlensPadded(), op.getNumSeqs());
  if (failed(checkNonDecreasing(op, cup, "cu_seqlens_padded")))
    return failure();
  // The tail [cup[n], length) is sequence n; a total past the length is cut.
  int64_t total = std::max<int64_t>(cup.back(), result->size());
  ref::Expected<std::vector<int32_t>> indices = ref::seqIdx(cup, total);
  if (!indices)
    return referenceError(op, indices.error());
  result->assign(*indices, 0);
  env.bind(op.getSeqIdx(), std::move(*result));
  return success();
}

LogicalResult evaluate(PadTailOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getResult());
  if (failed(result))
    return failure();
  const Buffer &input = env[op.getInput()];
  int64_t target = result->size();
  if (op.getTargetAttr()) {
    FailureOr<int64_t> value = intValue(op, op.getTargetAttr(), "target");
    if (failed(value))
      return failure();
    target = *value;
  } else {
    FailureOr<int64_t> alignment =
        intValue(op, op.getAlignmentAttr(), "alignment");
    if (failed(alignment))
      return failure();
    if (*alignment < 1)
      return referenceError(op, "the alignment " + std::to_string(*alignment) +
                                    " is not positive");
    target = ref::roundUp(input.getRows(), *alignment);
  }
  uint64_t fill = fillBits(op.getFillAttr(), result->getElementType());
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    T fillValue;
    std::memcpy(&fillValue, &fill, sizeof(T));
    ref::Expected<std::vector<T>> padded =
        ref::padTail(firstRows<T>(input), target, fillValue);
    if (!padded)
      return referenceError(op, padded.error());
    if (int64_t(padded->size()) > result->size())
      return referenceError(op, "the padded length " +
                                    std::to_string(padded->size()) +
                                    " exceeds the static length " +
                                    std::to_string(result->size()));
    result->assign(*padded, fill);
    result->setRows(int64_t(padded->size()));
    return success();
  });
  if (failed(status))
    return failure();
  env.bind(op.getResult(), std::move(*result));
  return success();
}

LogicalResult evaluate(PadTailMetadataOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<Buffer> cuOut = resultBuffer(op, op.getCuSeqlensOut());
  FailureOr<Buffer> cupOut = resultBuffer(op, op.getCuSeqlensPaddedOut());
  FailureOr<Buffer> maxOut = resultBuffer(op, op.getMaxSeqlenOut());
  FailureOr<Buffer> countOut = resultBuffer(op, op.getNumSeqsOut());
  if (failed(cp) || failed(cuOut) || failed(cupOut) || failed(maxOut) ||
      failed(countOut))
    return failure();
  ref::TailPaddingConfig config;
  config.cp = *cp;
  config.mode = referenceMode(op.getMode());
  auto optionalValue = [&](Attribute attr, StringRef name,
                           std::optional<int64_t> &into) {
    if (!attr)
      return success();
    FailureOr<int64_t> value = intValue(op, attr, name);
    if (failed(value))
      return failure();
    into = *value;
    return success();
  };
  if (failed(optionalValue(op.getTargetAttr(), "target", config.target)) ||
      failed(optionalValue(op.getAlignmentAttr(), "alignment",
                           config.alignment)) ||
      failed(optionalValue(op.getMaxSeqsAttr(), "max_seqs", config.maxNumSeqs)))
    return failure();
  switch (op.getPolicy()) {
  case TailPolicy::append_dummy_sequence:
    config.policy = ref::TailPolicy::AppendDummySequence;
    break;
  case TailPolicy::extend_last:
    config.policy = ref::TailPolicy::ExtendLast;
    break;
  case TailPolicy::none:
    config.policy = ref::TailPolicy::None;
    break;
  case TailPolicy::split_dummy_sequences:
    config.policy = ref::TailPolicy::SplitDummySequences;
    if (failed(optionalValue(op.getDummyLengthAttr(), "dummy_length",
                             config.dummyLength)))
      return failure();
    break;
  }
  const Buffer &cuBuffer = env[op.getCuSeqlens()];
  const Buffer &cupBuffer = env[op.getCuSeqlensPadded()];
  int64_t n = countOf(env, op.getNumSeqs(), cuBuffer.size());
  if (failed(checkEntries(op, cupBuffer, n, "cu_seqlens_padded")))
    return failure();
  std::vector<int32_t> cu = meaningful(cuBuffer, n);
  std::vector<int32_t> cup = meaningful(cupBuffer, n);
  // extend_last with no sequence (an empty microbatch, or one thd.validate
  // rejected) leaves the tail uncovered, as the op defines; the reference
  // refuses it.
  if (config.policy == ref::TailPolicy::ExtendLast && n == 0)
    config.policy = ref::TailPolicy::None;
  int64_t globalLength = std::max<int64_t>(cup.back(), 0);
  ref::Expected<ref::TailPaddingResult> tail = ref::padTailMetadata(
      cu, cup, scalarOf(env[op.getMaxSeqlen()]), globalLength / *cp, config);
  if (!tail)
    return referenceError(op, tail.error());
  if (int64_t(tail->cuSeqlens.size()) > cuOut->size() ||
      int64_t(tail->cuSeqlensPadded.size()) > cupOut->size())
    return referenceError(op, "the result has " +
                                  std::to_string(tail->cuSeqlens.size()) +
                                  " entries, more than its static " +
                                  std::to_string(cuOut->size()));
  // Entries past the meaningful ones repeat the last one.
  cuOut->assign(tail->cuSeqlens, uint32_t(tail->cuSeqlens.back()));
  cupOut->assign(tail->cuSeqlensPadded, uint32_t(tail->cuSeqlensPadded.back()));
  maxOut->set<int32_t>(0, tail->maxSeqlen);
  countOut->set<int32_t>(0, int32_t(tail->numSeqs));
  env.bind(op.getCuSeqlensOut(), std::move(*cuOut));
  env.bind(op.getCuSeqlensPaddedOut(), std::move(*cupOut));
  env.bind(op.getMaxSeqlenOut(), std::move(*maxOut));
  env.bind(op.getNumSeqsOut(), std::move(*countOut));
  return success();
}

LogicalResult evaluate(PadCuSeqlensOp op, Environment &env) {
  FailureOr<int64_t> entries = intValue(op, op.getEntries(), "entries");
  FailureOr<Buffer> result = resultBuffer(op, op.getPadded());
  if (failed(entries) || failed(result))
    return failure();
  const Buffer &offsets = env[op.getOffsets()];
  int64_t n = countOf(env, op.getNumSeqs(), offsets.size());
  ref::Expected<std::vector<int32_t>> padded =
      ref::padCuSeqlens(meaningful(offsets, n), *entries);
  if (!padded)
    return referenceError(op, padded.error());
  if (int64_t(padded->size()) != result->size())
    return referenceError(op, "'entries' is " + std::to_string(*entries) +
                                  " but the result has " +
                                  std::to_string(result->size()) + " entries");
  result->assign(*padded, 0);
  env.bind(op.getPadded(), std::move(*result));
  return success();
}

LogicalResult evaluate(ValidateOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<int64_t> maxTokens = intValue(op, op.getMaxTokens(), "max_tokens");
  FailureOr<int64_t> maxSeqs = intValue(op, op.getMaxSeqs(), "max_seqs");
  FailureOr<Buffer> status = resultBuffer(op, op.getStatus());
  FailureOr<Buffer> checked = resultBuffer(op, op.getCheckedNumSeqs());
  if (failed(cp) || failed(maxTokens) || failed(maxSeqs) || failed(status) ||
      failed(checked))
    return failure();
  const Buffer &cuBuffer = env[op.getCuSeqlens()];
  const Buffer &cupBuffer = env[op.getCuSeqlensPadded()];
  int64_t last = cuBuffer.size() - 1;
  if (last < 0 || cupBuffer.size() != cuBuffer.size())
    return referenceError(op, "cu_seqlens has " +
                                  std::to_string(cuBuffer.size()) +
                                  " entries and cu_seqlens_padded " +
                                  std::to_string(cupBuffer.size()) +
                                  "; both need the same number, at least 1");
  std::vector<int32_t> cu = int32Values(cuBuffer), cup = int32Values(cupBuffer);
  int64_t raw = op.getNumSeqs() ? scalarOf(env[op.getNumSeqs()]) : last;
  int64_t rank = scalarOf(env[op.getCpRank()]);
  // Zigzag cuts every sequence into 2*cp chunks; contiguous CP cuts only
  // the buffer padded to max_tokens rows (checked by the verifier).
  int64_t multiple = *cp > 1 && op.getMode() == CpMode::zigzag ? 2 * *cp : 1;
  int32_t bits =
      ref::numSeqsStatus(cup, raw, *maxSeqs, *maxTokens, op.getTailSlot());
  if (rank < 0 || rank >= *cp)
    bits |= ref::StatusCpRankOutOfRange;
  // The other checks read the entries that num_seqs, clamped, makes
  // meaningful.
  size_t n = size_t(std::clamp<int64_t>(raw, 0, last));
  if (cu[0] != 0 || cup[0] != 0)
    bits |= ref::StatusNotMonotonic;
  if (cup[n] > *maxTokens)
    bits |= ref::StatusTotalExceedsCapacity;
  if (op.getRows())
    bits |= ref::rowsStatus(cup, int64_t(n), scalarOf(env[op.getRows()]));
  for (size_t i = 0; i <= n; ++i)
    if (multiple > 1 && cup[i] % multiple != 0)
      bits |= ref::StatusNotDivisibleBy2Cp;
  for (size_t i = 1; i <= n; ++i) {
    if (cu[i] < cu[i - 1] || cup[i] < cup[i - 1])
      bits |= ref::StatusNotMonotonic;
    if (int64_t(cu[i]) - cu[i - 1] > int64_t(cup[i]) - cup[i - 1])
      bits |= ref::StatusValidExceedsPadded;
  }
  if (op.getSampleIds()) {
    FailureOr<int64_t> poolRows =
        intValue(op, op.getPoolRowsAttr(), "pool_rows");
    if (failed(poolRows))
      return failure();
    bits |= ref::sampleStatus(int32Values(env[op.getSampleOffsets()]),
                              int32Values(env[op.getSampleLengths()]),
                              int32Values(env[op.getSampleIds()]), int64_t(n),
                              *poolRows);
  }
  status->set<int32_t>(0, bits);
  checked->set<int32_t>(0, bits == 0 ? int32_t(raw) : 0);
  env.bind(op.getStatus(), std::move(*status));
  env.bind(op.getCheckedNumSeqs(), std::move(*checked));
  return success();
}

LogicalResult evaluate(DroppedOp op, Environment &env) {
  FailureOr<Buffer> seqs = resultBuffer(op, op.getDroppedSeqs());
  FailureOr<Buffer> tokens = resultBuffer(op, op.getDroppedTokens());
  if (failed(seqs) || failed(tokens))
    return failure();
  ref::Expected<ref::DroppedCounts> dropped = ref::droppedCounts(
      scalarOf(env[op.getStatus()]), int32Values(env[op.getCuSeqlens()]),
      scalarOf(env[op.getNumSeqs()]));
  if (!dropped)
    return referenceError(op, dropped.error());
  seqs->set<int32_t>(0, dropped->sequences);
  tokens->set<int32_t>(0, dropped->tokens);
  env.bind(op.getDroppedSeqs(), std::move(*seqs));
  env.bind(op.getDroppedTokens(), std::move(*tokens));
  return success();
}

LogicalResult evaluateBlock(Block &block, Environment &env);

LogicalResult evaluate(FusedOp op, Environment &env) {
  Block &body = op.getBody().front();
  if (failed(evaluateBlock(body, env)))
    return failure();
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [result, yielded] : llvm::zip(op.getResults(), yield.getValues()))
    env.bind(result, env[yielded]);
  return success();
}

/// The terminator of a fused op's body: its operands become the fused op's
/// results (see the FusedOp overload).
LogicalResult evaluate(YieldOp, Environment &) { return success(); }

//===----------------------------------------------------------------------===//
// Dispatch over the dialect's op list
//===----------------------------------------------------------------------===//

/// Evaluates `op` with the overload of its class among `Ops`; std::nullopt
/// when it is none of them. Every class of `Ops` needs an overload.
template <typename... Ops> struct Dispatch {
  static std::optional<LogicalResult> evaluateAny(Operation *op,
                                                  Environment &env) {
    std::optional<LogicalResult> result;
    (void)((isa<Ops>(op) ? (result = evaluate(cast<Ops>(op), env), true)
                         : false) ||
           ...);
    return result;
  }
};

using THDDispatch = Dispatch<
#define GET_OP_LIST
#include "dialect/THDOps.cpp.inc"
    >;

LogicalResult evaluateBlock(Block &block, Environment &env) {
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    std::optional<LogicalResult> result = THDDispatch::evaluateAny(&op, env);
    if (!result)
      return op.emitOpError()
             << "cannot be evaluated: the interpreter evaluates thd ops only";
    if (failed(*result))
      return failure();
  }
  return success();
}

} // namespace

FailureOr<std::vector<Buffer>> run(func::FuncOp function,
                                   ArrayRef<Buffer> inputs) {
  if (function.isExternal())
    return function.emitOpError() << "has no body to interpret";
  Block &entry = function.front();
  if (inputs.size() != entry.getNumArguments())
    return function.emitOpError()
           << "takes " << entry.getNumArguments() << " arguments but "
           << inputs.size() << " buffers were given";
  Environment env;
  for (auto [argument, input] : llvm::zip(entry.getArguments(), inputs)) {
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!type || type.getRank() != 1 || !type.hasStaticShape())
      return function.emitOpError()
             << "argument #" << argument.getArgNumber() << " has the type "
             << argument.getType()
             << "; the interpreter needs static 1-D tensors (run "
                "thd-force-static-shapes first)";
    if (input.getElementType() != type.getElementType() ||
        input.size() != type.getDimSize(0))
      return function.emitOpError()
             << "argument #" << argument.getArgNumber() << " is " << type
             << " but its buffer holds " << input.size() << " elements of "
             << input.getElementType();
    Buffer copy = input;
    copy.setRows(copy.size());
    env.bind(argument, std::move(copy));
  }
  if (failed(evaluateBlock(entry, env)))
    return failure();
  auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!ret)
    return function.emitOpError() << "does not end with func.return";
  std::vector<Buffer> results;
  for (Value value : ret.getOperands())
    results.push_back(env[value]);
  return results;
}

} // namespace thdc::interpreter
