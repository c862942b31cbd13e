//===- Planner.h - Host-side microbatch planner -----------------*- C++ -*-===//
//
// Plans how the sequences of one global batch are packed into microbatches
// before the THD data step runs (docs/semantics.md S2, S3, S12):
//
//   nextFitPlan     the reference framework's dp_balanced scheduler: the S2
//                   cap K and the S3 in-order next-fit packing, computed by
//                   reference::dpBalancedGroups (the single definition of that
//                   semantics) and validated here;
//   balancedPlan    first-fit-decreasing under the same constraints, falling
//                   back to next-fit whenever next-fit needs fewer
//                   microbatches, so it never needs more.
//
// Unlike the reference, the planner rejects a sequence longer than the pack
// budget C*cp with an error naming it, instead of emitting an empty or an
// oversize pack that fails later (S3 edge cases, S10 "refusing to silently
// truncate"). Every plan it returns passes checkPlan.
//
// Plain C++17, no exceptions, no LLVM/MLIR dependency. Errors are the
// runtime's (runtime/Status.h, header only): a Status or Result<T> whose
// message names what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PLANNER_PLANNER_H
#define THDC_PLANNER_PLANNER_H

#include "reference/Reference.h"
#include "runtime/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace thdc {
namespace planner {

using runtime::Result;
using runtime::Status;

/// Sequence ids (indices into the padded lengths) of one pack.
using Pack = std::vector<int32_t>;
/// groups[m][j]: the pack of microbatch m on DP x CP rank j.
using MicrobatchGroups = std::vector<std::vector<Pack>>;

/// Parallel layout and scheduler settings of one planning call.
struct PlannerConfig {
  /// C = max_seqlen_per_dp_cp_rank, the token budget per CP rank; a pack
  /// holds at most C*cp padded tokens.
  int64_t maxSeqlenPerRank = 0;
  /// Context-parallel size cp (all CP ranks of a DP replica share a pack).
  int64_t cp = 1;
  /// Data-parallel size dp (dp packs per microbatch).
  int64_t dp = 1;
  /// N = thd_max_packed_sequences (capacity including the dummy); nullopt
  /// means no cap on the number of sequences per pack.
  std::optional<int64_t> maxPackedSequences;
  /// Whether pad_packed_seq_alignment is set.
  bool alignmentSet = false;
  /// Whether THD tail padding appends a dummy sequence (append_dummy_seq).
  bool dummyTail = false;
  /// microbatch_group_size_per_vp_stage under virtual pipelining, else
  /// nullopt; the number of packs is a multiple of dp * (vppGroup or 1).
  std::optional<int64_t> vppGroup;
};

/// The packing algorithm that produced a plan.
enum class PlanAlgorithm {
  /// S3 in-order next-fit (reference::dpBalancedGroups).
  NextFit,
  /// First-fit decreasing (firstFitDecreasingPlan).
  FirstFitDecreasing,
};

/// A packing of one global batch into microbatches.
struct MicrobatchPlan {
  /// Sequence ids of every pack, each pack in increasing id order. Never
  /// empty packs; the count is a multiple of dp * (vppGroup or 1).
  std::vector<Pack> packs;
  /// Total padded length of every pack (<= capacity).
  std::vector<int64_t> packTokens;
  /// groups[m][j] = packs[m*dp + j/cp] for j = dpIdx*cp + cpIdx
  /// (see microbatchGroups).
  MicrobatchGroups groups;
  /// The pack budget C*cp.
  int64_t capacity = 0;
  /// The S2 cap K on real sequences per pack (nullopt: none).
  std::optional<int64_t> maxRealSeqs;
  /// Which algorithm produced the packs.
  PlanAlgorithm algorithm = PlanAlgorithm::NextFit;

  /// Number of microbatches, packs.size() / dp.
  int64_t numMicrobatches() const { return int64_t(groups.size()); }
};

/// S2: the cap K on real sequences per pack for `config` (N - 1 with an
/// alignment set and the dummy tail, N otherwise, nullopt without N); the
/// errors of reference::schedulerMaxRealNumSeqs. Golden: (32, align, dummy)
/// -> 31; (32, align, no dummy) -> 32; (1, align, dummy) -> error.
Result<std::optional<int64_t>> plannerSequenceCap(const PlannerConfig &config);

/// S3 group mapping: for microbatch m and DP x CP rank j (j = dpIdx*cp +
/// cpIdx), groups[m][j] = packs[m*dp + j/cp]. Requires dp, cp >= 1 and
/// packs.size() a multiple of dp.
MicrobatchGroups microbatchGroups(const std::vector<Pack> &packs, int64_t dp,
                                  int64_t cp);

/// S3 next-fit plan of the padded lengths (in global id order): the
/// reference scheduler (reference::dpBalancedGroups with the S2 cap),
/// including its "make #packs a multiple of dp*(vppGroup or 1)" step. Errors:
/// those of S2 and S3 (non-positive C/cp/dp/vppGroup, a negative length,
/// "Not enough samples to move"), and a sequence longer than C*cp, named by
/// its index and length. Golden: p=[5,3,4,2,2,1,6], C=4, cp=2, K=3, dp=1 ->
/// [[0,1],[2,3,4],[5,6]].
Result<MicrobatchPlan> nextFitPlan(const std::vector<int32_t> &paddedLengths,
                                   const PlannerConfig &config);

/// First-fit-decreasing plan: sequences in decreasing length (ties by id)
/// go to the first pack with room for their tokens and a free slot under K.
/// While the pack count is not a multiple of dp*(vppGroup or 1), the longest
/// sequence of the heaviest multi-sequence pack moves into a new singleton
/// pack ("Not enough samples to move" when none is left). Packs are then
/// ordered by their smallest id. Errors as for nextFitPlan. It may need more
/// microbatches than next-fit on some inputs; balancedPlan never does.
Result<MicrobatchPlan>
firstFitDecreasingPlan(const std::vector<int32_t> &paddedLengths,
                       const PlannerConfig &config);

/// The better of firstFitDecreasingPlan and nextFitPlan: the FFD plan unless
/// it fails or needs more microbatches than next-fit, so it never needs more
/// microbatches than nextFitPlan (and succeeds whenever nextFitPlan does).
/// Golden: p=[5,3,4,2,2,1,6], C=4, cp=2, K=3, dp=1 -> [[0,1],[2,4,5],[3,6]].
Result<MicrobatchPlan> balancedPlan(const std::vector<int32_t> &paddedLengths,
                                    const PlannerConfig &config);

/// Checks a plan against the lengths and the config: every id in exactly one
/// pack, no empty pack, ids increasing within a pack, packTokens equal to
/// the pack sums and <= C*cp, at most K sequences per pack, the pack count a
/// multiple of dp*(vppGroup or 1), groups equal to microbatchGroups, and the
/// recorded capacity and cap. Returns the first violation as the error.
Status checkPlan(const MicrobatchPlan &plan,
                 const std::vector<int32_t> &paddedLengths,
                 const PlannerConfig &config);

} // namespace planner
} // namespace thdc

#endif // THDC_PLANNER_PLANNER_H
