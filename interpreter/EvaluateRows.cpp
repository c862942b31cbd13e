//===- EvaluateRows.cpp - steps that compute per-token buffers ------------===//
//
// The evaluate overloads of the steps whose results are per-token buffers:
// the padding mask (S5), position ids (S8), packing from a pool (S4),
// sanitised rows (S6), a rank's CP slice and every rank's gathered rows
// back in sequence order (S7), RoPE positions and the sequence index of a
// row (S8), and tail padding (S10). Sections are those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "interpreter/Evaluate.h"

#include "reference/Reference.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::thd;
namespace ref = thdc::reference;

namespace thdc::interpreter {

namespace {

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
  Result<std::vector<uint8_t>> mask = ref::paddingMask(layout.cu, layout.cup);
  if (!mask)
    return referenceError(op, mask.status().message());
  layout.mask = std::move(*mask);
  return layout;
}

} // namespace

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
  Result<std::vector<int64_t>> positions =
      ref::positionIds(layout->cu, layout->cup);
  if (!positions)
    return referenceError(op, positions.status().message());
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
  Result<std::vector<int32_t>> sequenceOf = ref::seqIdx(layout->cup, total);
  if (!sequenceOf)
    return referenceError(op, sequenceOf.status().message());
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
    Result<std::vector<T>> gathered =
        ref::cpSlice(pool.values<T>(), sourceRows);
    if (!gathered)
      return referenceError(op, gathered.status().message());
    T padValue;
    std::memcpy(&padValue, &pad, sizeof(T));
    Result<std::vector<T>> packed =
        ref::sanitize(*gathered, isPadding, padValue);
    if (!packed)
      return referenceError(op, packed.status().message());
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
    Result<std::vector<T>> sanitized =
        ref::sanitize(input.values<T>(), isPadding, fillValue);
    if (!sanitized)
      return referenceError(op, sanitized.status().message());
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
    Result<std::vector<int32_t>> partition = ref::cpPartitionIndices(
        cup, total, *cp, rank, referenceMode(op.getMode()));
    if (!partition)
      return referenceError(op, partition.status().message());
    indices = std::move(*partition);
  }
  int64_t rows = boundedRows(int64_t(indices.size()), result->size());
  indices.resize(size_t(rows));
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    Result<std::vector<T>> slice = ref::cpSlice(input.values<T>(), indices);
    if (!slice)
      return referenceError(op, slice.status().message());
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
  Result<std::vector<int32_t>> indices = ref::cpUnsliceIndices(
      meaningful(env, op.getCuSeqlensPadded(), op.getNumSeqs()), *cp,
      *rowsPerRank, referenceMode(op.getMode()));
  if (!indices)
    return referenceError(op, indices.status().message());
  if (int64_t(indices->size()) != result->size())
    return referenceError(op, "the result has " +
                                  std::to_string(result->size()) +
                                  " rows but cp * rows_per_rank is " +
                                  std::to_string(indices->size()));
  LogicalResult status = withElementWidth(result->width(), [&](auto t) {
    using T = decltype(t);
    Result<std::vector<T>> rows = ref::cpSlice(input.values<T>(), *indices);
    if (!rows)
      return referenceError(op, rows.status().message());
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
  Result<std::vector<int64_t>> rows = ref::ropeTableRows(
      cup, *cp, clampedRank(env[op.getCpRank()], *cp), result->size(),
      scalarOf(env[op.getMaxSeqlen()]), *tableRows);
  if (!rows)
    return referenceError(op, rows.status().message());
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
  Result<std::vector<int32_t>> indices = ref::seqIdx(cup, total);
  if (!indices)
    return referenceError(op, indices.status().message());
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
    Result<std::vector<T>> padded =
        ref::padTail(firstRows<T>(input), target, fillValue);
    if (!padded)
      return referenceError(op, padded.status().message());
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

} // namespace thdc::interpreter
