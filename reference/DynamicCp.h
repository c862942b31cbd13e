//===- DynamicCp.h - S3b dynamic-CP scheduling ------------------*- C++ -*-===//
//
// Section S3b of docs/semantics.md: the dynamic-CP scheduler and its
// alignment to virtual pipeline stages. Defined in reference/DynamicCp.cpp
// and reference/DynamicCpAlignment.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_DYNAMICCP_H
#define THDC_REFERENCE_DYNAMICCP_H

#include "reference/Status.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S3b. Dynamic-CP scheduling
//===----------------------------------------------------------------------===//

/// S3b: the CP size a sequence of `length` padded tokens needs: the smallest
/// power of two p with p*C >= length, at least minCp (and 1 for length 0).
/// Golden (C = 1024): 1 -> 1, 1024 -> 1, 1025 -> 2, 3000 -> 4; minCp 2: 10 -> 2.
int64_t dynamicCpSizeNeeded(int64_t length, int64_t maxPerRank, int64_t minCp);

/// S3b: result of the dynamic-CP scheduler.
struct DynamicCpGroups {
  /// groups[m][j]: the ids DP x CP rank j receives in microbatch m, in
  /// placement order; the ranks of one CP sub-group receive the same ids.
  std::vector<std::vector<std::vector<int32_t>>> groups;
  /// cpSizes[m][j]: rank j's local CP size in microbatch m (the ranks that
  /// share its ids); its sub-group is the block of that many ranks holding j,
  /// starting at a multiple of the size.
  std::vector<std::vector<int32_t>> cpSizes;
};

/// S3b: the reference framework's default dynamic-CP scheduler over
/// `ranks` = dp*cp DP x CP ranks: sequences longest first, each microbatch
/// formed greedily (a sequence joins a sub-group of its CP size or larger, a
/// power of two, that keeps every rank's packed share within C and the
/// busiest rank's work sum(l^2/size) lowest and within 1.05*tallest*C),
/// empty ranks filled by doubling the smallest sub-group, else the whole
/// DP x CP group takes the longest sequences that fit. maxNumSeqs (thdc's
/// bound; the reference has none): at most that many sequences per
/// sub-group. Errors: C, ranks, minCp < 1, minCp > ranks, a negative
/// length, a sequence needing more than `ranks` ranks.
/// microbatchGroupSize (the framework's microbatch_group_size_per_vp_stage,
/// virtual pipeline stages): above 1, the microbatches are then made a
/// multiple of it by alignDynamicCpMicrobatches.
Result<DynamicCpGroups>
dynamicCpGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                int64_t ranks, int64_t minCp = 1,
                std::optional<int64_t> maxNumSeqs = std::nullopt,
                int64_t microbatchGroupSize = 1);

/// S3b with virtual pipeline stages: the framework's align_sample_id_groups
/// (data_schedule_utils.py:834-923 on dev). While the microbatch count is
/// not a multiple of `multiple`, microbatches from the last backwards are
/// split where their sub-groups (largest first) reach half the ranks, each
/// half's sub-groups widened (the smallest leftmost one doubled, again and
/// again) until they cover every rank; a microbatch of one sub-group is
/// skipped. Errors: multiple < 1; no microbatch left to split; a
/// microbatch whose sub-group sizes increase; a half whose empty ranks no
/// sub-group can be widened onto (the framework loops forever there; with
/// non-power-of-two rank counts, e.g. sub-groups of 3 and 1).
Result<std::vector<std::vector<std::vector<int32_t>>>>
alignDynamicCpMicrobatches(
    std::vector<std::vector<std::vector<int32_t>>> groups, int64_t multiple);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_DYNAMICCP_H
