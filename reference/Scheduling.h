//===- Scheduling.h - S2, S3 sequence cap and packing -----------*- C++ -*-===//
//
// Sections S2 and S3 of docs/semantics.md: the cap on real sequences per
// pack and the next-fit packing of a global batch into microbatches.
// Defined in reference/Scheduling.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_SCHEDULING_H
#define THDC_REFERENCE_SCHEDULING_H

#include "reference/Status.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S2. Scheduler cap on real sequences
//===----------------------------------------------------------------------===//

/// S2: the cap K on real sequences per pack given thd_max_packed_sequences N:
/// None when N is None; N - 1 when an alignment is set and the dummy tail is
/// enabled (one slot is reserved for the dummy, requires N >= 2); otherwise N
/// (requires N >= 1). Golden: (32, align, dummy) -> 31; (32, align, no dummy)
/// -> 32; (32, no align) -> 32; (1, align, dummy) -> error.
Result<std::optional<int64_t>>
schedulerMaxRealNumSeqs(std::optional<int64_t> maxPackedSequences,
                        bool alignmentSet, bool dummyTail);

//===----------------------------------------------------------------------===//
// S3. Packing sequences into microbatches
//===----------------------------------------------------------------------===//

/// S3: result of the dp_balanced scheduler.
struct PackingResult {
  /// Sequence ids (indices into the input lengths) of every pack, in order.
  /// The first pack is empty when the first sequence exceeds C*cp.
  std::vector<std::vector<int32_t>> packs;
  /// groups[m][j]: ids for microbatch m on DP x CP rank j = dpIdx*cp + cpIdx,
  /// i.e. packs[m*dp + j/cp] (all CP ranks of a DP replica share a pack).
  std::vector<std::vector<std::vector<int32_t>>> groups;
};

/// S3: in-order next-fit packing of the padded lengths into packs of at most
/// C*cp tokens and (if set) maxNumSeqs sequences; a sequence that does not
/// fit closes the current pack (which may be empty). Then the number of packs
/// is made a multiple of dp*(vppGroup or 1) by moving the last sequence of
/// the last multi-sequence packs into singleton packs. Errors: non-positive
/// C/cp/dp/maxNumSeqs/vppGroup, C*cp, dp*vppGroup or dp*cp outside int64,
/// negative lengths, "Not enough samples to move". Golden: p=[5,3,4,2,2,1,6],
/// C=4, cp=2, K=3 -> [[0,1],[2,3,4],[5,6]].
Result<PackingResult>
dpBalancedGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                 int64_t cp, int64_t dp,
                 std::optional<int64_t> maxNumSeqs = std::nullopt,
                 std::optional<int64_t> vppGroup = std::nullopt);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_SCHEDULING_H
