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
//                   microbatches, so it never needs more;
//   microbatchInputs  what examples/pack_microbatch.mlir takes for one DP x CP
//                   rank and each microbatch of a plan (sample_ids, num_seqs);
//   microbatchUpperBound, graphCaptureCount  the S12 figures for a config
//                   and a plan (how many graph slots to capture).
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
#include "reference/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace thdc {
namespace planner {

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
  /// The data-parallel size dp the groups are for.
  int64_t dp = 1;
  /// The context-parallel size cp the groups are for (groups[m] has dp*cp
  /// entries).
  int64_t cp = 1;

  /// Number of microbatches, packs.size() / dp.
  int64_t numMicrobatches() const { return int64_t(groups.size()); }
};

/// S2: the cap K on real sequences per pack for `config` (N - 1 with an
/// alignment set and the dummy tail, N otherwise, nullopt without N); the
/// errors of reference::schedulerMaxRealNumSeqs. Golden: (32, align, dummy)
/// -> 31; (32, align, no dummy) -> 32; (1, align, dummy) -> error.
Result<std::optional<int64_t>> plannerSequenceCap(const PlannerConfig &config);

/// S3 group mapping: for microbatch m and DP x CP rank j (j = dpIdx*cp +
/// cpIdx), groups[m][j] = packs[m*dp + j/cp]. Requires dp, cp >= 1, dp*cp
/// within int64 and packs.size() a multiple of dp.
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
/// recorded capacity, cap, dp and cp. Returns the first violation as the
/// error.
Status checkPlan(const MicrobatchPlan &plan,
                 const std::vector<int32_t> &paddedLengths,
                 const PlannerConfig &config);

/// The per-microbatch inputs of examples/pack_microbatch.mlir for one
/// DP x CP rank, for every microbatch of a plan, laid out to be uploaded to
/// the device at once: microbatch m's `sample_ids` are the `slots` entries
/// from sampleIds[m*slots], its `num_seqs` is numSeqs[m].
struct MicrobatchInputs {
  /// Entries of sample_ids per microbatch: N-1.
  int64_t slots = 0;
  /// numMicrobatches() * slots sample ids: those of each microbatch's pack
  /// in pack order (global ids, indices into the planned lengths), then 0.
  std::vector<int32_t> sampleIds;
  /// The number of sequences of each microbatch's pack.
  std::vector<int32_t> numSeqs;

  /// Number of microbatches.
  int64_t numMicrobatches() const { return int64_t(numSeqs.size()); }
};

/// The inputs of examples/pack_microbatch.mlir for DP x CP rank `rank`
/// (j = dpIdx*cp + cpIdx, the index into plan.groups[m]; its cp_rank is
/// rank % cp) of every microbatch m: sample_ids holds groups[m][rank] (N-1
/// entries: the pack's ids, then zeros) and num_seqs its size. Errors: N < 2
/// (sample_ids would have no entry), N above int32 max (the pipeline's
/// range), microbatches * (N-1) entries past what a buffer holds (computed
/// without overflow), rank outside [0, dp*cp), and a pack of
/// more than N-1 sequences, which leaves no slot for the dummy sequence (a
/// plan made with this N, an alignment and the dummy tail has none).
/// Golden: p = [5,3,4,2,2,1,6], C = 4, cp = 2, N = 4 (K = 3), rank 1 ->
/// sample_ids [[0,1,0], [2,3,4], [5,6,0]], num_seqs [2, 3, 2].
Result<MicrobatchInputs> microbatchInputs(const MicrobatchPlan &plan,
                                          int64_t rank,
                                          int64_t maxPackedSequences);

/// S12: the upper bound U on the microbatches of a global batch of
/// `globalBatchSize` sequences whose padded lengths are at most maxSeqLen
/// (Lmax), under `config`: reference::maxMicrobatchesUpperBound with the
/// config's C, cp, dp, vppGroup and its S2 cap K. A next-fit plan of such a
/// batch never has more microbatches, and balancedPlan never more than
/// next-fit. Errors: S2's, and non-positive sizes. Golden: GBS 64, dp 2,
/// cp 2, C 4096, Lmax 2048, N 32 with an alignment and the dummy tail
/// (K = 31) -> 8.
Result<int64_t> microbatchUpperBound(const PlannerConfig &config,
                                     int64_t globalBatchSize,
                                     int64_t maxSeqLen);

/// S12: how many graph slots to capture for `plan`:
/// max(plan.numMicrobatches(), upperBound), or the plan's count alone when
/// the runtime count must be used (reference::graphCaptureCount).
int64_t graphCaptureCount(const MicrobatchPlan &plan, int64_t upperBound,
                          bool useRuntimeCount = false);

//===----------------------------------------------------------------------===//
// Capacity ladders (docs/capacity-ladder.md)
//===----------------------------------------------------------------------===//

/// One rung of a capacity ladder: a static shape the step is compiled for,
/// B rows per CP rank (the rung's C) and its sequence capacity (the rung's
/// N, the dummy included).
struct Rung {
  /// B, rows per CP rank; a pack at this rung holds at most B*cp tokens.
  int64_t rows = 0;
  /// The rung's N (nullopt: no cap, for a config without N); the pack's
  /// sequences are capped by the S2 cap of this N under the config's
  /// alignment and tail policy (N - 1 with both).
  std::optional<int64_t> sequences;
};

/// Checks a ladder: at least one rung, rows >= 1 and non-decreasing,
/// sequences either all nullopt or all >= 1 and non-decreasing (a rung
/// that holds more rows never holds fewer sequences); two rungs of equal
/// rows differ in sequences, the later holding more (a ladder may end in
/// (C, 24), (C, 64): most microbatches at C need few offsets). The error
/// names the first offending rung.
Status checkLadder(const std::vector<Rung> &ladder);

/// The smallest rung of `ladder` that holds a pack of `rows` padded rows
/// over config.cp ranks (all of them: the pack's tokens) and `sequences`
/// sequences: B*cp >= rows and the S2 cap of the rung's N under config's
/// alignment and tail policy (N - 1 with both, N otherwise; no cap without
/// N) >= sequences. The rule assignRungs places every pack by; config's C,
/// N, dp and vppGroup are not used. Errors: a bad ladder (checkLadder), cp
/// below 1, negative rows or sequences, a rung whose B*cp overflows int64
/// or whose N S2 refuses, and no rung that holds the pack, named with its
/// rows and sequences and the top rung's limits. Golden: rows {2, 3, 4},
/// N 4 each (K = 3 with an alignment and the dummy tail), cp 2: 6 rows and
/// 3 sequences -> rung 1; 7 rows -> 2; 4 sequences or 9 rows -> error.
Result<int32_t> rungIndex(const std::vector<Rung> &ladder, int64_t rows,
                          int64_t sequences, const PlannerConfig &config);

/// A plan over a ladder: every pack at the smallest rung that holds it.
struct LadderPlan {
  /// The packing (its capacity is the top rung's B*cp).
  MicrobatchPlan plan;
  /// The ladder it was assigned on.
  std::vector<Rung> ladder;
  /// The rung of every pack (index into ladder).
  std::vector<int32_t> packRungs;
  /// The rows every pack occupies at its rung, B*cp (all CP ranks).
  std::vector<int64_t> packRows;
  /// The largest padded length of every pack (0 for none): the tightest
  /// max_seqlen its attention can be given, known on the host.
  std::vector<int64_t> packMaxLengths;

  /// Padded tokens of the whole plan (sum of plan.packTokens).
  int64_t tokens() const;
  /// Rows of the whole plan at its rungs (sum of packRows).
  int64_t rows() const;
  /// rows() - tokens(): the rows the step pads (dummy sequences).
  int64_t paddedRows() const { return rows() - tokens(); }
  /// The rung microbatch m runs at on DP x CP rank j = dpIdx*cp + cpIdx:
  /// packRungs[m*dp + j/cp]. Requires m and j in range.
  int32_t rung(int64_t microbatch, int64_t rank) const;
};

/// The smallest rung of `ladder` that holds each pack of `plan`
/// (rungIndex of its padded tokens and sequences under `config`). Errors:
/// a bad ladder (checkLadder), a plan for another cp or dp, a rung
/// rungIndex refuses, and a pack no rung holds, named with its tokens and
/// sequences. Golden: cp 2, K = 3, lengths [5,3,4,2,2,1,6] -> next-fit packs
/// of 8, 8, 7 tokens, rows {2, 4} (B*cp = 4, 8) -> rungs [1, 1, 1], padded
/// rows 1; lengths [3,1,6,7,2] -> packs of 4, 6, 7, 2 tokens, rows {2, 3, 4}
/// -> rungs [0, 1, 2, 0].
Result<LadderPlan> assignRungs(const MicrobatchPlan &plan,
                               const std::vector<int32_t> &paddedLengths,
                               const std::vector<Rung> &ladder,
                               const PlannerConfig &config);

/// Plans a global batch over a ladder: the packing is planned with the top
/// rung's rows as C and its sequences as N (config's own C and N are
/// ignored), by next-fit and by balancedPlan, and the plan whose packs
/// occupy fewer rows at their rungs is kept (ties: fewer microbatches, then
/// next-fit, the reference framework's). Neither candidate needs more
/// microbatches than next-fit, so the S12 bound of the top rung holds.
/// Errors: those of checkLadder and of the planners.
Result<LadderPlan> ladderPlan(const std::vector<int32_t> &paddedLengths,
                              const PlannerConfig &config,
                              const std::vector<Rung> &ladder);

} // namespace planner
} // namespace thdc

#endif // THDC_PLANNER_PLANNER_H
