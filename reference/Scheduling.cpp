//===- Scheduling.cpp - S2, S3 sequence cap and packing -------------------===//
//
// Sections S2 and S3 of docs/semantics.md: the cap K on real sequences per
// pack (schedulerMaxRealNumSeqs) and the in-order next-fit packing of a
// global batch into microbatches, with the DP x CP group mapping
// (dpBalancedGroups). S3b, the dynamic-CP scheduler, is in DynamicCp.cpp
// and DynamicCpAlignment.cpp. The host planner (planner/Planner.h) builds
// on these.
//
//===----------------------------------------------------------------------===//

#include "reference/Scheduling.h"
#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

//===----------------------------------------------------------------------===//
// S2. Scheduler cap on real sequences
//===----------------------------------------------------------------------===//

Result<std::optional<int64_t>>
schedulerMaxRealNumSeqs(std::optional<int64_t> maxPackedSequences,
                        bool alignmentSet, bool dummyTail) {
  using Output = std::optional<int64_t>;
  if (!maxPackedSequences)
    return Output();
  int64_t n = *maxPackedSequences;
  if (n < 1)
    return Status::error(
        concat("thd_max_packed_sequences = ", n, " must be >= 1"));
  if (alignmentSet && dummyTail) {
    if (n < 2)
      return Status::error(
          concat("thd_max_packed_sequences = ", n,
                 " must be >= 2 when THD padding appends a dummy sequence "
                 "(one slot is reserved for it)"));
    return Output(n - 1);
  }
  return Output(n);
}

//===----------------------------------------------------------------------===//
// S3. Packing sequences into microbatches
//===----------------------------------------------------------------------===//

Result<PackingResult>
dpBalancedGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                 int64_t cp, int64_t dp, std::optional<int64_t> maxNumSeqs,
                 std::optional<int64_t> vppGroup) {
  if (maxPerRank < 1 || cp < 1 || dp < 1)
    return Status::error(concat("max_seqlen_per_dp_cp_rank C = ", maxPerRank,
                                ", cp = ", cp, " and dp = ", dp,
                                " must all be >= 1"));
  if (maxNumSeqs && *maxNumSeqs < 1)
    return Status::error(
        concat("sequence cap K = ", *maxNumSeqs, " must be >= 1"));
  if (vppGroup && *vppGroup < 1)
    return Status::error(concat(
        "microbatch_group_size_per_vp_stage = ", *vppGroup, " must be >= 1"));
  // Every product below is checked: wrapped, an absurd C*cp or dp*vppGroup
  // would become a small budget (or a zero divisor) without a word.
  const std::optional<int64_t> capacity = checkedMul(maxPerRank, cp);
  const std::optional<int64_t> multiple = checkedMul(dp, vppGroup.value_or(1));
  const std::optional<int64_t> ranks = checkedMul(dp, cp);
  if (!capacity)
    return Status::error(concat("the pack budget C * cp = ", maxPerRank, " * ",
                                cp, " overflows int64"));
  if (!multiple)
    return Status::error(concat("the pack multiple dp * vppGroup = ", dp, " * ",
                                *vppGroup, " overflows int64"));
  if (!ranks)
    return Status::error(
        concat("the rank count dp * cp = ", dp, " * ", cp, " overflows int64"));

  std::vector<std::vector<int32_t>> packs;
  std::vector<int32_t> current;
  int64_t currentTokens = 0;
  for (std::size_t i = 0; i < paddedLengths.size(); ++i) {
    int64_t length = paddedLengths[i];
    if (length < 0)
      return Status::error(
          concat("padded length p[", i, "] = ", length, " is negative"));
    bool fits = currentTokens + length <= *capacity &&
                (!maxNumSeqs || int64_t(current.size()) < *maxNumSeqs);
    if (fits) {
      current.push_back(static_cast<int32_t>(i));
      currentTokens += length;
    } else {
      // Next-fit: close the current pack even when it is empty.
      packs.push_back(std::move(current));
      current = {static_cast<int32_t>(i)};
      currentTokens = length;
    }
  }
  if (!current.empty())
    packs.push_back(std::move(current));

  const int64_t initialPacks = static_cast<int64_t>(packs.size());
  if (initialPacks % *multiple) {
    int64_t need = *multiple - initialPacks % *multiple;
    int64_t k = initialPacks - 1;
    while (need > 0) {
      if (k < 0)
        return Status::error(concat(
            "Not enough samples to move: ", initialPacks,
            " packs must be split into a multiple of dp * vppGroup = ",
            *multiple, " but ", need,
            " more packs are needed and no pack has more than one sequence "
            "left"));
      if (packs[k].size() > 1) {
        int32_t moved = packs[k].back();
        packs[k].pop_back();
        packs.push_back({moved});
        --need;
      } else {
        --k;
      }
    }
  }

  PackingResult result;
  const int64_t numMicrobatches = static_cast<int64_t>(packs.size()) / dp;
  for (int64_t m = 0; m < numMicrobatches; ++m) {
    std::vector<std::vector<int32_t>> group;
    for (int64_t j = 0; j < *ranks; ++j)
      group.push_back(packs[m * dp + j / cp]);
    result.groups.push_back(std::move(group));
  }
  result.packs = std::move(packs);
  return result;
}

} // namespace reference
} // namespace thdc
