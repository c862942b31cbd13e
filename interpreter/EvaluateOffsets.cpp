//===- EvaluateOffsets.cpp - steps that compute offset arrays -------------===//
//
// The evaluate overloads of the steps whose results are offset or length
// arrays: aligned lengths (S1), the chosen samples' lengths (S3/S4), their
// cumulative offsets (S4) and a cu array padded to a static number of
// entries (S10). Sections are those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "interpreter/Evaluate.h"

#include "reference/Reference.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::thd;
namespace ref = thdc::reference;

namespace thdc::interpreter {

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
  Result<int64_t> granularity = ref::padGranularity(
      *cp, *tp, op.getSequenceParallel(), *dp, bool(op.getDpAttr()), *multiple);
  if (!granularity)
    return referenceError(op, granularity.status().message());
  std::vector<int32_t> valid = int32Values(env[op.getValidLens()]);
  // p = ceil(v / G) * G for every v, negative ones included (the reference's
  // S1 step refuses those; bad lengths are reported by thd.validate).
  std::vector<int32_t> padded(valid.size());
  if (std::all_of(valid.begin(), valid.end(),
                  [](int32_t v) { return v >= 0; })) {
    Result<std::vector<int32_t>> aligned =
        ref::alignLengths(valid, *granularity);
    if (!aligned)
      return referenceError(op, aligned.status().message());
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
  Result<std::vector<int32_t>> gathered =
      ref::cpSlice(int32Values(values), ids);
  if (!gathered)
    return referenceError(op, gathered.status().message());
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
    Result<std::vector<int32_t>> cumulative = ref::cumulativeLengths(lengths);
    if (!cumulative)
      return referenceError(op, cumulative.status().message());
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

LogicalResult evaluate(PadCuSeqlensOp op, Environment &env) {
  FailureOr<int64_t> entries = intValue(op, op.getEntries(), "entries");
  FailureOr<Buffer> result = resultBuffer(op, op.getPadded());
  if (failed(entries) || failed(result))
    return failure();
  const Buffer &offsets = env[op.getOffsets()];
  int64_t n = countOf(env, op.getNumSeqs(), offsets.size());
  Result<std::vector<int32_t>> padded =
      ref::padCuSeqlens(meaningful(offsets, n), *entries);
  if (!padded)
    return referenceError(op, padded.status().message());
  if (int64_t(padded->size()) != result->size())
    return referenceError(op, "'entries' is " + std::to_string(*entries) +
                                  " but the result has " +
                                  std::to_string(result->size()) + " entries");
  result->assign(*padded, 0);
  env.bind(op.getPadded(), std::move(*result));
  return success();
}

} // namespace thdc::interpreter
