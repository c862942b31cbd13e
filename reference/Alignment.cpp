//===- Alignment.cpp - S1 per-sequence alignment --------------------------===//
//
// Section S1 of docs/semantics.md: the alignment granularity G and the
// padded (physical) length p = ceil(v / G) * G of every sequence, and the
// aligned varlen-dataset sample (padGranularity, alignLengths,
// alignVarlenSample). Implemented in the compiler by thd.align_lengths.
//
//===----------------------------------------------------------------------===//

#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

namespace {
/// a * b, or the int64 bound of its sign when it does not fit.
int64_t saturatingMul(int64_t a, int64_t b) {
  if (std::optional<int64_t> product = checkedMul(a, b))
    return *product;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                            : std::numeric_limits<int64_t>::max();
}
} // namespace

int64_t padGranularity(int64_t cp, int64_t tp, bool sequenceParallel,
                       int64_t dp, bool dynamicCp) {
  // Saturating, not wrapping (which can give a small, valid looking G): a G
  // of int64 max makes alignLengths refuse every positive length.
  int64_t cpPad = dynamicCp ? saturatingMul(saturatingMul(2, cp), dp)
                            : (cp > 1 ? saturatingMul(2, cp) : 1);
  int64_t tpPad = sequenceParallel ? tp : 1;
  return saturatingMul(cpPad, tpPad);
}

Expected<std::vector<int32_t>>
alignLengths(const std::vector<int32_t> &validLengths, int64_t granularity) {
  using Result = std::vector<int32_t>;
  if (granularity <= 0)
    return makeError<Result>(
        concat("alignment granularity G = ", granularity, " must be > 0"));
  Result padded;
  padded.reserve(validLengths.size());
  for (std::size_t i = 0; i < validLengths.size(); ++i) {
    if (validLengths[i] < 0)
      return makeError<Result>(concat("valid length v[", i,
                                      "] = ", validLengths[i], " is negative"));
    int64_t p = roundUp(validLengths[i], granularity);
    if (!fitsInt32(p))
      return makeError<Result>(concat("padded length of v[", i,
                                      "] = ", validLengths[i],
                                      " rounded up to G = ", granularity,
                                      " is ", p, ", outside the int32 range"));
    padded.push_back(static_cast<int32_t>(p));
  }
  return padded;
}

Expected<VarlenSample> alignVarlenSample(const std::vector<int64_t> &ids,
                                         const std::vector<int64_t> &targets,
                                         int64_t granularity, int64_t padId,
                                         int64_t ignoreIndex) {
  if (granularity <= 0)
    return makeError<VarlenSample>(
        concat("alignment granularity G = ", granularity, " must be > 0"));
  if (ids.size() < 2)
    return makeError<VarlenSample>(
        concat("a varlen sample needs at least 2 ids (conversation + EOD; an "
               "empty tokenisation is [eod, eod]), got ",
               ids.size()));
  if (targets.size() != ids.size())
    return makeError<VarlenSample>(detail::sizeMismatch(
        "alignVarlenSample", "ids", ids.size(), "targets", targets.size()));
  int64_t valid = static_cast<int64_t>(ids.size()) - 1;
  int64_t padded = roundUp(valid, granularity);
  if (padded + 1 > kInt32Max)
    return makeError<VarlenSample>(
        concat("padded length ", padded, " is outside the int32 range"));
  std::vector<int64_t> paddedIds(ids), paddedTargets(targets);
  paddedIds.resize(static_cast<std::size_t>(padded + 1), padId);
  paddedTargets.resize(static_cast<std::size_t>(padded + 1), padId);

  VarlenSample sample;
  sample.validLength = static_cast<int32_t>(valid);
  sample.paddedLength = static_cast<int32_t>(padded);
  sample.tokens.assign(paddedIds.begin(), paddedIds.end() - 1);
  sample.labels.assign(paddedTargets.begin() + 1, paddedTargets.end());
  for (int64_t k = 0; k < padded; ++k) {
    sample.positionIds.push_back(k);
    bool counted = k < valid && sample.labels[k] != ignoreIndex;
    sample.lossMask.push_back(counted ? 1.0f : 0.0f);
  }
  return sample;
}

} // namespace reference
} // namespace thdc
