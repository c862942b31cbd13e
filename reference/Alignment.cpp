//===- Alignment.cpp - S1 per-sequence alignment --------------------------===//
//
// Section S1 of docs/semantics.md: the alignment granularity G and the
// padded (physical) length p = ceil(v / G) * G of every sequence, the
// low-precision multiples, and the aligned varlen-dataset sample
// (lowPrecisionMultiples, padGranularity, alignLengths, alignVarlenSample).
// Implemented in the compiler by thd.align_lengths.
//
//===----------------------------------------------------------------------===//

#include "reference/Alignment.h"
#include "reference/Common.h"
#include "reference/Internal.h"

#include <algorithm>
#include <numeric>

namespace thdc {
namespace reference {

using namespace internal;

const std::vector<LowPrecisionMultiple> &lowPrecisionMultiples() {
  // megatron-core's numbers: get_fp8_align_size (megatron/core/fp8_utils.py)
  // gives 32 for MXFP8 and 16 for every other FP8 recipe; HybridEP aligns
  // each rank's tokens to 64 (megatron/core/transformer/moe/fused_a2a.py).
  // The names are --fp8-recipe's, "fp8" for any of its 16s.
  static const std::vector<LowPrecisionMultiple> table = {
      {"fp8", 16},        {"delayed", 16}, {"tensorwise", 16},
      {"blockwise", 16},  {"custom", 16},  {"mxfp8", 32},
      {"hybridep", 64},
  };
  return table;
}

Result<int64_t> lowPrecisionMultiple(const std::string &recipe) {
  std::string names;
  for (const LowPrecisionMultiple &entry : lowPrecisionMultiples()) {
    if (recipe == entry.recipe)
      return entry.multiple;
    names += (names.empty() ? "'" : ", '") + std::string(entry.recipe) + "'";
  }
  return Status::error(concat("unknown low-precision recipe '", recipe,
                              "'; the recipes are ", names));
}

Result<int64_t> capacityRowMultiple(int64_t tp, bool sequenceParallel,
                                    int64_t multiple) {
  if (tp < 1 || multiple < 1)
    return Status::error(concat(
        "the capacity's row multiple needs tp and the multiple >= 1 (tp = ", tp,
        ", multiple = ", multiple, ")"));
  std::optional<int64_t> rows = checkedMul(sequenceParallel ? tp : 1, multiple);
  if (!rows || !fitsInt32(*rows))
    return Status::error(concat("the capacity's row multiple ", multiple,
                                " * tp ", tp, " is outside the int32 range"));
  return *rows;
}

Result<int64_t> checkCapacityAlignment(int64_t rowsPerRank, int64_t tp,
                                       bool sequenceParallel,
                                       int64_t multiple) {
  Result<int64_t> rows = capacityRowMultiple(tp, sequenceParallel, multiple);
  if (!rows || rowsPerRank % *rows == 0)
    return rows;
  std::string why =
      sequenceParallel && tp > 1
          ? concat("m * tp = ", multiple, " * ", tp, " = ", *rows,
                   " (each of the tp = ", tp, " sequence-parallel ranks holds C/tp = ",
                   rowsPerRank, "/", tp, " rows and needs a multiple of m = ",
                   multiple, ")")
          : concat("m = ", multiple);
  const int64_t below = rowsPerRank / *rows * *rows, above = below + *rows;
  return Status::error(concat(
      "C = ", rowsPerRank, " is not a multiple of ", why,
      ": every rank feeds its GEMMs exactly C rows in graph mode; the nearest "
      "C that is: ",
      below > 0 ? concat(below, " or ", above) : concat(above)));
}

Result<int64_t> padGranularity(int64_t cp, int64_t tp, bool sequenceParallel,
                               int64_t dp, bool dynamicCp, int64_t multiple) {
  if (cp < 1 || tp < 1 || dp < 1 || multiple < 1)
    return Status::error(concat(
        "the alignment granularity needs cp, tp, dp and the multiple "
        ">= 1 (cp = ",
        cp, ", tp = ", tp, ", dp = ", dp, ", multiple = ", multiple, ")"));
  // Checked, not wrapped or saturated: a wrapped G can be small and valid
  // looking.
  auto overflow = [&] {
    return Status::error(concat("the alignment granularity for cp = ", cp,
                                ", tp = ", tp,
                                sequenceParallel ? " (sequence parallel)" : "",
                                ", dp = ", dp, dynamicCp ? " (dynamic CP)" : "",
                                ", multiple = ", multiple, " overflows int64"));
  };
  std::optional<int64_t> twoCp = checkedMul(2, cp);
  if (!twoCp)
    return overflow();
  std::optional<int64_t> cpPad =
      dynamicCp ? checkedMul(*twoCp, dp) : (cp > 1 ? *twoCp : 1);
  if (!cpPad)
    return overflow();
  // The ranks a sequence is divided among: each holds 2 of the cpPad chunks.
  const int64_t share = *cpPad > 1 ? *cpPad / 2 : 1;
  std::optional<int64_t> perRank = checkedMul(share, multiple);
  if (!perRank)
    return overflow();
  // lcm(a, b) = a / gcd(a, b) * b; a / gcd divides exactly.
  std::optional<int64_t> lcm =
      checkedMul(*cpPad / std::gcd(*cpPad, *perRank), *perRank);
  if (!lcm)
    return overflow();
  std::optional<int64_t> granularity =
      checkedMul(sequenceParallel ? tp : 1, *lcm);
  if (!granularity)
    return overflow();
  return *granularity;
}

Result<std::vector<int32_t>>
alignLengths(const std::vector<int32_t> &validLengths, int64_t granularity) {
  using Output = std::vector<int32_t>;
  if (granularity <= 0)
    return Status::error(
        concat("alignment granularity G = ", granularity, " must be > 0"));
  Output padded;
  padded.reserve(validLengths.size());
  for (std::size_t i = 0; i < validLengths.size(); ++i) {
    if (validLengths[i] < 0)
      return Status::error(concat("valid length v[", i, "] = ", validLengths[i],
                                  " is negative"));
    int64_t p = roundUp(validLengths[i], granularity);
    if (!fitsInt32(p))
      return Status::error(concat("padded length of v[", i,
                                  "] = ", validLengths[i],
                                  " rounded up to G = ", granularity, " is ", p,
                                  ", outside the int32 range"));
    padded.push_back(static_cast<int32_t>(p));
  }
  return padded;
}

Result<VarlenSample> alignVarlenSample(const std::vector<int64_t> &ids,
                                       const std::vector<int64_t> &targets,
                                       int64_t granularity, int64_t padId,
                                       int64_t ignoreIndex) {
  if (granularity <= 0)
    return Status::error(
        concat("alignment granularity G = ", granularity, " must be > 0"));
  if (ids.size() < 2)
    return Status::error(
        concat("a varlen sample needs at least 2 ids (conversation + EOD; an "
               "empty tokenisation is [eod, eod]), got ",
               ids.size()));
  if (targets.size() != ids.size())
    return Status::error(detail::sizeMismatch(
        "alignVarlenSample", "ids", ids.size(), "targets", targets.size()));
  int64_t valid = static_cast<int64_t>(ids.size()) - 1;
  int64_t padded = roundUp(valid, granularity);
  if (padded + 1 > kInt32Max)
    return Status::error(
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
