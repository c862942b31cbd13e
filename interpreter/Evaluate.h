//===- Evaluate.h - one evaluate overload per thd op ------------*- C++ -*-===//
//
// The interpreter evaluates every thd op through an overload of `evaluate`,
// declared here and defined in the file of its family, as codegen/lowering/
// groups the steps:
//   EvaluateOffsets.cpp   align_lengths, gather, cu_seqlens, pad_cu_seqlens
//   EvaluateRows.cpp      padding_mask, position_ids, pack, sanitize, cp_slice,
//                         cp_unslice, rope_positions, seq_idx, pad_tail
//   EvaluateMetadata.cpp  max_seqlen, pad_tail_metadata, validate, dropped,
//                         linear_chunks
//   Interpreter.cpp       fused, yield (beside the dispatch over the op list)
// and what they share: the environment of values, and the reading of
// attributes and operands (Operands.cpp).
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

#ifndef THDC_INTERPRETER_EVALUATE_H
#define THDC_INTERPRETER_EVALUATE_H

#include "interpreter/Buffer.h"

#include "dialect/THDOps.h"
#include "reference/CpSlice.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <string>
#include <vector>

namespace thdc::interpreter {

/// The values of a pipeline function being interpreted.
class Environment {
public:
  const Buffer &operator[](mlir::Value value) const {
    auto found = values.find(value);
    assert(found != values.end() && "operand evaluated before its use");
    return found->second;
  }
  void bind(mlir::Value value, Buffer buffer) {
    values[value] = std::move(buffer);
  }

private:
  llvm::DenseMap<mlir::Value, Buffer> values;
};

//===----------------------------------------------------------------------===//
// Reading attributes and operands
//===----------------------------------------------------------------------===//

/// An integer attribute's value; a parameter expression not yet bound is an
/// error naming the attribute.
mlir::FailureOr<int64_t> intValue(mlir::Operation *op, mlir::Attribute attr,
                                  llvm::StringRef name);

/// The static length of a result (or operand) type.
mlir::FailureOr<int64_t> staticLength(mlir::Operation *op, mlir::Value value);

/// A fresh result buffer of `value`'s static type.
mlir::FailureOr<Buffer> resultBuffer(mlir::Operation *op, mlir::Value value);

/// Element 0 of a tensor<1xi32>.
int32_t scalarOf(const Buffer &buffer);

/// All elements of an i32 buffer.
std::vector<int32_t> int32Values(const Buffer &buffer);

/// The number of meaningful sequences of an array of `entries` entries read
/// with `numSeqs` (all of them without it), clamped into the array.
int64_t countOf(Environment &env, mlir::Value numSeqs, int64_t entries);

/// The reference's name for an op's CP partition mode.
reference::CpMode referenceMode(mlir::thd::CpMode mode);

/// A CP rank read by a step, clamped into [0, cp): a rank outside is a
/// fault that thd.validate reports, and with cp = 1 every rank reads the
/// whole buffer.
int64_t clampedRank(const Buffer &rank, int64_t cp);

/// The meaningful entries [0, a1, ..., an] of a cu array (entry 0 is 0).
std::vector<int32_t> meaningful(const Buffer &array, int64_t n);

/// The meaningful entries of the cu array `offsets` for the step's num_seqs
/// (all of them without one).
std::vector<int32_t> meaningful(Environment &env, mlir::Value offsets,
                                mlir::Value numSeqs);

/// With cp = 1 a CP slice and its inverse give their input unchanged: binds
/// `result` to it and returns true; false for any other cp.
bool passedThroughAtOneRank(int64_t cp, mlir::Value input, mlir::Value result,
                            Environment &env);

/// The bit pattern of `fill` (zero when absent) as an element of
/// `elementType`.
uint64_t fillBits(mlir::TypedAttr fill, mlir::Type elementType);

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
mlir::LogicalResult referenceError(mlir::Operation *op,
                                   const std::string &message);

/// The first `rows` values of a buffer as T.
template <typename T> std::vector<T> firstRows(const Buffer &buffer) {
  std::vector<T> all = buffer.values<T>();
  all.resize(size_t(std::clamp<int64_t>(buffer.getRows(), 0, buffer.size())));
  return all;
}

/// Fails unless the cu array `array` holds the n+1 entries read from it.
mlir::LogicalResult checkEntries(mlir::Operation *op, const Buffer &array,
                                 int64_t n, llvm::StringRef name);

/// Fails unless the meaningful entries do not decrease: the row-wise ops
/// look rows up in them, which has no meaning for a decreasing array.
mlir::LogicalResult checkNonDecreasing(mlir::Operation *op,
                                       const std::vector<int32_t> &cu,
                                       llvm::StringRef name);

/// Rows of a data-dependent result: `total` bounded by the static length.
int64_t boundedRows(int64_t total, int64_t staticRows);

/// A per-sequence cu array computed in 64 bits must fit i32.
mlir::LogicalResult checkInt32(mlir::Operation *op, int64_t value,
                               llvm::StringRef what);

//===----------------------------------------------------------------------===//
// One overload per op
//===----------------------------------------------------------------------===//

// EvaluateOffsets.cpp
mlir::LogicalResult evaluate(mlir::thd::AlignLengthsOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::GatherOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::CuSeqlensOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::PadCuSeqlensOp op, Environment &env);
// EvaluateRows.cpp
mlir::LogicalResult evaluate(mlir::thd::PaddingMaskOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::PositionIdsOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::PackOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::SanitizeOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::CpSliceOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::CpUnsliceOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::RopePositionsOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::SeqIdxOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::PadTailOp op, Environment &env);
// EvaluateMetadata.cpp
mlir::LogicalResult evaluate(mlir::thd::MaxSeqlenOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::PadTailMetadataOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::ValidateOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::DroppedOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::LinearChunksOp op, Environment &env);
// Interpreter.cpp
mlir::LogicalResult evaluate(mlir::thd::FusedOp op, Environment &env);
mlir::LogicalResult evaluate(mlir::thd::YieldOp op, Environment &env);

} // namespace thdc::interpreter

#endif // THDC_INTERPRETER_EVALUATE_H
