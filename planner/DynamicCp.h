//===- DynamicCp.h - Host-side dynamic-CP planner ---------------*- C++ -*-===//
//
// Plans a global batch for dynamic context parallelism (docs/semantics.md
// S3b): in every microbatch the DP x CP ranks are cut into sub-groups, each
// a block of ranks that receives the same sequences and splits them as one
// CP group, long sequences over many ranks and short ones over few:
//
//   dynamicCpPlan       the reference framework's default dynamic-CP
//                       scheduler, computed by reference::dynamicCpGroups
//                       (the single definition of that semantics) with the
//                       S2 cap of planner/Planner.h, and validated here;
//   checkDynamicCpPlan  the promises of such a plan;
//   microbatchInputs    what examples/pack_microbatch.mlir takes for one
//                       DP x CP rank and each microbatch of a plan
//                       (sample_ids, num_seqs), and the rank's CP size.
//
// Every plan dynamicCpPlan returns passes checkDynamicCpPlan. Plain C++17,
// no exceptions, no LLVM/MLIR dependency; errors are the runtime's Status
// and Result<T> (runtime/Status.h), as in planner/Planner.h.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PLANNER_DYNAMICCP_H
#define THDC_PLANNER_DYNAMICCP_H

#include "planner/Planner.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace thdc {
namespace planner {

/// A global batch planned for dynamic CP: for every microbatch m and DP x CP
/// rank j (j = dpIdx*cp + cpIdx), the sequence ids the rank receives and its
/// CP size. Rank j's sub-group is the block of cpSizes[m][j] ranks holding
/// it, starting at a multiple of that size (subGroup); every rank of the
/// block receives the same ids, and its CP rank there is j mod the size
/// (localRank).
struct DynamicCpPlan {
  /// groups[m][j]: the ids rank j receives in microbatch m, in the
  /// scheduler's placement order (longest first); never empty.
  MicrobatchGroups groups;
  /// cpSizes[m][j]: rank j's CP size in microbatch m, a power of two
  /// >= minCpSize or all dp*cp ranks.
  std::vector<std::vector<int32_t>> cpSizes;
  /// The padded lengths the plan was made for, in global id order.
  std::vector<int32_t> lengths;
  /// C = max_seqlen_per_dp_cp_rank: a sub-group of s ranks holds at most
  /// C*s padded tokens.
  int64_t C = 0;
  /// The data-parallel size dp.
  int64_t dp = 1;
  /// The context-parallel size cp (the static maximum of a step).
  int64_t cp = 1;
  /// min_dynamic_context_parallel_size: the smallest CP size planned.
  int64_t minCpSize = 1;
  /// The S2 cap K on the sequences of a sub-group (nullopt: none).
  std::optional<int64_t> maxRealSeqs;

  /// The DP x CP rank count dp*cp.
  int64_t ranks() const { return dp * cp; }
  /// Number of microbatches.
  int64_t numMicrobatches() const { return int64_t(groups.size()); }
  /// The CP sizes the plan uses, smallest first.
  std::vector<int32_t> sizes() const;
  /// Whether microbatch m and rank j are in range; the error names both
  /// and the plan's microbatches and ranks.
  Status checkIndex(int64_t microbatch, int64_t rank) const;
  /// Rank j's CP rank in its sub-group of microbatch m: j mod
  /// cpSizes[m][j]. Requires m and j in range (checkIndex).
  int64_t localRank(int64_t microbatch, int64_t rank) const;
  /// The ranks [first, second) of rank j's sub-group in microbatch m.
  /// Requires m and j in range.
  std::pair<int64_t, int64_t> subGroup(int64_t microbatch, int64_t rank) const;
  /// The padded tokens of rank j's sub-group in microbatch m (all its
  /// ranks; at most C times its size). Requires m and j in range.
  int64_t tokens(int64_t microbatch, int64_t rank) const;
};

/// S3b: plans the padded lengths (in global id order) over the dp*cp ranks
/// of `config` as the reference framework's default dynamic-CP scheduler
/// does (reference::dynamicCpGroups): config's maxSeqlenPerRank is C, its
/// vppGroup the framework's microbatch_group_size_per_vp_stage (above 1 the
/// microbatch count is made a multiple of it), and its N, alignment and
/// tail policy give the S2 cap K on the sequences of a sub-group, a bound
/// the framework's scheduler does not apply. minCpSize is
/// min_dynamic_context_parallel_size. Errors: cp or dp below 1, dp*cp past
/// int64, those of S2, and the scheduler's, with its message (C or
/// minCpSize out of range, a negative length, a sequence needing more
/// ranks than there are, ranks it cannot fill, a microbatch count it
/// cannot align). Golden: p = [3000, 1000, 500, 200, 100], C = 1024,
/// cp = 4 -> groups [[0,1] x 4], [[2], [2], [3,4], [3,4]], CP sizes
/// [4,4,4,4], [2,2,2,2].
Result<DynamicCpPlan> dynamicCpPlan(const std::vector<int32_t> &paddedLengths,
                                    const PlannerConfig &config,
                                    int64_t minCpSize = 1);

/// Checks a dynamic-CP plan against the lengths and the settings it was
/// made with: the recorded lengths, C, dp, cp, minCpSize and S2 cap; a CP
/// size per rank of every microbatch; every sub-group a block of a power
/// of two >= minCpSize (or all) ranks starting at a multiple of its size,
/// its ranks sharing ids and size; no empty rank; every id in exactly one
/// sub-group; at most K ids per sub-group; a sub-group's tokens <= C times
/// its size and no sequence on fewer ranks than it needs
/// (reference::dynamicCpSizeNeeded); the microbatch count a multiple of
/// vppGroup. Returns the first violation as the error.
Status checkDynamicCpPlan(const DynamicCpPlan &plan,
                          const std::vector<int32_t> &paddedLengths,
                          const PlannerConfig &config, int64_t minCpSize = 1);

/// The inputs of examples/pack_microbatch.mlir for one DP x CP rank of a
/// dynamic-CP plan, and the rank's CP size in each microbatch (its
/// sub-group's size: the step variant that runs it).
struct DynamicCpInputs : MicrobatchInputs {
  /// The rank's CP size in every microbatch.
  std::vector<int32_t> cpSizes;
};

/// The inputs of examples/pack_microbatch.mlir for DP x CP rank `rank` of
/// every microbatch m of a dynamic-CP plan, as microbatchInputs gives them
/// for a MicrobatchPlan: sample_ids holds groups[m][rank] (N-1 entries: the
/// ids, then zeros), num_seqs its size, and cpSizes cpSizes[m][rank].
/// Errors: N < 2, N above int32 max, microbatches * (N-1) entries past what
/// a buffer holds, rank outside [0, dp*cp), and a microbatch that gives the
/// rank more than N-1 sequences. Golden: p = [3000, 1000, 500, 200, 100],
/// C = 1024, cp = 4, rank 3, N = 4 -> sample_ids [[0,1,0], [3,4,0]],
/// num_seqs [2, 2], CP sizes [4, 2].
Result<DynamicCpInputs> microbatchInputs(const DynamicCpPlan &plan,
                                         int64_t rank,
                                         int64_t maxPackedSequences);

} // namespace planner
} // namespace thdc

#endif // THDC_PLANNER_DYNAMICCP_H
