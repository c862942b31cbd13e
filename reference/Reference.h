//===- Reference.h - Reference semantics of THD data prep -------*- C++ -*-===//
//
// Plain C++17 reference implementation of every step of the THD
// data-preparation pipeline defined in docs/semantics.md (Megatron-LM PR
// #4359 semantics, sections S1..S14). It has no MLIR/LLVM dependency and
// uses no exceptions: fallible steps return `Expected<T>`.
//
// Vocabulary (docs/semantics.md, Overview and Glossary):
//   cu_seqlens         `cu`  = [0, v0, v0+v1, ...]  cumulative valid lengths
//   cu_seqlens_padded  `cup` = [0, p0, p0+p1, ...]  physical buffer offsets
//   cp / rank          context-parallel size / rank
//   C                  max_seqlen_per_dp_cp_rank (token budget per CP rank)
//   N                  thd_max_packed_sequences (capacity incl. the dummy)
// Masks are std::vector<uint8_t> holding 0/1, with 1 (true) = padding.
//
// The definitions are split by section (reference/Sources.cmake):
//   Alignment.cpp S1, Scheduling.cpp S2-S3, Packing.cpp S4,
//   PaddingMask.cpp S5, CpSlice.cpp S7, Positions.cpp S8,
//   TailPadding.cpp S9-S10, GraphCapture.cpp S11-S12, Attention.cpp S14,
//   GraphStep.cpp (the graph-mode composite), PackStep.cpp (the same from a
//   pool of samples), Common.cpp (shared helpers);
//   the templates (S4 pack, S6 sanitize, S7 cpSlice, S10 padTail, S14
//   readHalf) are defined at the end of this header.
//
// This library is the single definition of the semantics: the compiler's
// lowering is tested against it (see megatronGraphStep).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_REFERENCE_H
#define THDC_REFERENCE_REFERENCE_H

#include "reference/StatusBits.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// Error handling
//===----------------------------------------------------------------------===//

/// Either a value of type T or an error message naming the offending values.
/// The reference never throws; every fallible step returns an Expected.
template <typename T> class Expected {
public:
  /// Wraps a successful result.
  Expected(T value) : storage(std::move(value)) {}

  /// Creates a failed result carrying `message`.
  static Expected failure(std::string message) {
    Expected result;
    result.message = std::move(message);
    return result;
  }

  /// True when a value is held.
  explicit operator bool() const { return storage.has_value(); }

  /// The held value; must only be called on success.
  T &operator*() {
    assert(storage && "dereferencing a failed Expected");
    return *storage;
  }
  /// The held value; must only be called on success.
  const T &operator*() const {
    assert(storage && "dereferencing a failed Expected");
    return *storage;
  }
  /// Member access to the held value; must only be called on success.
  T *operator->() { return &**this; }
  /// Member access to the held value; must only be called on success.
  const T *operator->() const { return &**this; }

  /// The error message (empty on success).
  const std::string &error() const { return message; }

private:
  Expected() = default;
  std::optional<T> storage;
  std::string message;
};

/// Shorthand for `Expected<T>::failure(message)`.
template <typename T> Expected<T> makeError(std::string message) {
  return Expected<T>::failure(std::move(message));
}

namespace detail {
/// Blocks template argument deduction through a parameter (C++20's
/// std::type_identity), so that `sanitize(tokens, mask, 0)` deduces T from
/// the vector only.
template <typename T> struct Identity { using type = T; };
/// Message for two arrays whose sizes must agree.
std::string sizeMismatch(const char *what, const char *firstName,
                         std::size_t firstSize, const char *secondName,
                         std::size_t secondSize);
/// Message for a target length shorter than the input ("refusing to
/// silently truncate").
std::string truncationRefused(std::size_t length, int64_t targetLength);
/// Message for a gather index outside [0, size).
std::string indexOutOfRange(std::size_t position, int64_t index,
                            std::size_t size);
} // namespace detail

//===----------------------------------------------------------------------===//
// Common helpers
//===----------------------------------------------------------------------===//

/// Returns ceil(value / multiple) * multiple (round_up in
/// docs/semantics.md). Requires multiple > 0 and a result that fits int64
/// (checkedRoundUp, reference/CheckedArithmetic.h, reports one that does
/// not); rounds towards +infinity for negative values too.
int64_t roundUp(int64_t value, int64_t multiple);

/// Returns the largest difference between consecutive entries of a cu array,
/// i.e. the longest sequence (S4 max_seqlen, S13); 0 when there are fewer
/// than two entries.
int32_t maxSeqlenFromCu(const std::vector<int32_t> &cuSeqlens);

//===----------------------------------------------------------------------===//
// S1. Per-sequence alignment
//===----------------------------------------------------------------------===//

/// S1: the token multiples that low-precision recipes need of the rows a
/// rank feeds its GEMMs, megatron-core's numbers (get_fp8_align_size: 32
/// for "mxfp8", 16 for every other FP8 recipe, "fp8", "delayed",
/// "tensorwise", "blockwise", "custom"; "hybridep" 64), in a fixed order.
/// The single table of these values: the Python planner exposes it as
/// thdc.planner.LOW_PRECISION_MULTIPLES.
struct LowPrecisionMultiple {
  /// The recipe's name.
  const char *recipe;
  /// The multiple m its token counts need.
  int64_t multiple;
};
const std::vector<LowPrecisionMultiple> &lowPrecisionMultiples();

/// S1: the multiple m of the recipe named `recipe`; an error naming the
/// known recipes otherwise.
Expected<int64_t> lowPrecisionMultiple(const std::string &recipe);

/// S1, graph mode: the rows per CP rank a static capacity must be a
/// multiple of for a recipe of multiple m: m * tp under sequence
/// parallelism (each TP rank feeds C/tp of the C rows to its GEMMs), else
/// m. Errors: tp or m below 1, a product outside int32.
Expected<int64_t> capacityRowMultiple(int64_t tp, bool sequenceParallel,
                                      int64_t multiple);

/// S1, graph mode: the condition a low-precision recipe puts on C, the
/// static rows of every CP rank (every rank feeds its GEMMs exactly C rows,
/// C/tp under sequence parallelism): C % capacityRowMultiple(...) == 0.
/// Returns that row multiple, or an error naming C, m, tp and the nearest
/// capacities that hold. Per-sequence rounding (padGranularity with a
/// multiple) is only for consumers of a variable packed length.
Expected<int64_t> checkCapacityAlignment(int64_t rowsPerRank, int64_t tp,
                                         bool sequenceParallel,
                                         int64_t multiple);

/// S1: alignment granularity G = tpPad * lcm(cpPad, share * m), with
/// cpPad = 2*cp if cp > 1 else 1 (dynamic CP: 2*cp*dp always), share =
/// cpPad / 2 when cpPad > 1 else 1 (the ranks a sequence is divided among),
/// tpPad = tp under sequence parallelism else 1, and m = `multiple`: every
/// rank's share of every padded sequence is then a multiple of m (m = 1
/// gives cpPad * tpPad). Errors: cp, tp, dp or multiple below 1, and a G
/// outside int64 (checked, never wrapped). Golden: cp=2, tp=2, sp -> 8;
/// cp=2, tp=1 -> 4; cp=1, m=16 -> 16; cp=2, m=16 -> 32; cp=2, tp=2, sp,
/// m=16 -> 64; cp=1, tp=4, sp, m=128 -> 512.
Expected<int64_t> padGranularity(int64_t cp, int64_t tp, bool sequenceParallel,
                                 int64_t dp = 1, bool dynamicCp = false,
                                 int64_t multiple = 1);

/// S1: padded (physical) lengths p[i] = ceil(v[i] / G) * G of the valid
/// lengths v. Errors: granularity <= 0, a negative length, a result outside
/// int32. Golden: G=4, v=[3,2,4] -> [4,4,4].
Expected<std::vector<int32_t>>
alignLengths(const std::vector<int32_t> &validLengths, int64_t granularity);

/// S1: one aligned varlen-dataset sample (tensors of length p).
struct VarlenSample {
  /// ids[0:p] (padded with padId).
  std::vector<int64_t> tokens;
  /// targets[1:p+1] (padded with padId).
  std::vector<int64_t> labels;
  /// 0..p-1; padding rows keep counting.
  std::vector<int64_t> positionIds;
  /// 1 for rows k < v whose label is not ignoreIndex, else 0.
  std::vector<float> lossMask;
  /// v = len(ids) - 1 (number of next-token predictions).
  int32_t validLength = 0;
  /// p = round_up(v, G).
  int32_t paddedLength = 0;
};

/// S1 (varlen dataset): turns one truncated conversation `ids` (already
/// ending with EOD, at least 2 ids) and its `targets` (ids with prompt tokens
/// replaced by ignoreIndex, same length) into an aligned sample with
/// v = len(ids) - 1 and p = round_up(v, granularity); ids and targets are
/// right-padded with padId before the next-token shift.
Expected<VarlenSample> alignVarlenSample(const std::vector<int64_t> &ids,
                                         const std::vector<int64_t> &targets,
                                         int64_t granularity, int64_t padId,
                                         int64_t ignoreIndex);

//===----------------------------------------------------------------------===//
// S2. Scheduler cap on real sequences
//===----------------------------------------------------------------------===//

/// S2: the cap K on real sequences per pack given thd_max_packed_sequences N:
/// None when N is None; N - 1 when an alignment is set and the dummy tail is
/// enabled (one slot is reserved for the dummy, requires N >= 2); otherwise N
/// (requires N >= 1). Golden: (32, align, dummy) -> 31; (32, align, no dummy)
/// -> 32; (32, no align) -> 32; (1, align, dummy) -> error.
Expected<std::optional<int64_t>>
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
Expected<PackingResult>
dpBalancedGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                 int64_t cp, int64_t dp,
                 std::optional<int64_t> maxNumSeqs = std::nullopt,
                 std::optional<int64_t> vppGroup = std::nullopt);

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
Expected<DynamicCpGroups>
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
Expected<std::vector<std::vector<std::vector<int32_t>>>>
alignDynamicCpMicrobatches(std::vector<std::vector<std::vector<int32_t>>> groups,
                           int64_t multiple);

//===----------------------------------------------------------------------===//
// S4. Concatenating a pack into one buffer
//===----------------------------------------------------------------------===//

/// S4: [0, l0, l0+l1, ...] (n+1 entries). Errors: a negative length, a sum
/// outside int32.
Expected<std::vector<int32_t>>
cumulativeLengths(const std::vector<int32_t> &lengths);

/// S4: metadata of a packed microbatch.
struct PackMetadata {
  /// cu_seqlens = [0] ++ cumsum(v) (valid, compact coordinates).
  std::vector<int32_t> cuSeqlens;
  /// cu_seqlens_padded = [0] ++ cumsum(p) (physical offsets).
  std::vector<int32_t> cuSeqlensPadded;
  /// max(p) over the padded lengths (0 for an empty pack).
  int32_t maxSeqlen = 0;
};

/// S4: cu_seqlens, cu_seqlens_padded and max_seqlen of a pack with valid
/// lengths v and padded lengths p. Errors: size mismatch, negative lengths,
/// v[i] > p[i], int32 overflow. An empty pack gives [0], [0], 0 (the PR
/// crashes there instead; see the edge-case matrix of docs/semantics.md).
Expected<PackMetadata> packMetadata(const std::vector<int32_t> &validLengths,
                                    const std::vector<int32_t> &paddedLengths);

/// S4: how a pack is gathered from a pool of samples.
struct PackLayout {
  /// Metadata of the pack (cu, cup, max_seqlen).
  PackMetadata metadata;
  /// For every output row (sum(p) rows): the pool row it copies, or -1 for a
  /// padding row (k >= v[i] within sequence i).
  std::vector<int64_t> sourceRows;
};

/// S4: layout of the pack built from a flat pool of `poolSize` rows, where
/// sample s starts at sampleOffsets[s]: sequence i (sample sampleIds[i])
/// occupies output rows [cup[i], cup[i+1]), row cup[i]+k copies pool row
/// sampleOffsets[sampleIds[i]] + k for k < v[i] and is padding for
/// v[i] <= k < p[i]. Errors: size mismatch, v > p, negative values, sample id
/// out of range, a read past the end of the pool.
Expected<PackLayout> packLayout(std::size_t poolSize,
                                const std::vector<int64_t> &sampleOffsets,
                                const std::vector<int32_t> &sampleIds,
                                const std::vector<int32_t> &validLengths,
                                const std::vector<int32_t> &paddedLengths);

/// S4: one packed token-like buffer plus its metadata.
template <typename T> struct PackedBuffer {
  /// The buffer of sum(p) rows.
  std::vector<T> values;
  /// cu_seqlens, cu_seqlens_padded, max_seqlen.
  PackMetadata metadata;
};

/// S4: packs the chosen samples of `pool` into one buffer (see packLayout),
/// writing `padValue` into padding rows. Golden: pool A,B,C with v=[3,2,4],
/// p=[4,4,4] -> [11,12,13,P,21,22,P,P,31,32,33,34], cu [0,3,5,9],
/// cup [0,4,8,12], max_seqlen 4.
template <typename T>
Expected<PackedBuffer<T>>
pack(const std::vector<T> &pool, const std::vector<int64_t> &sampleOffsets,
     const std::vector<int32_t> &sampleIds,
     const std::vector<int32_t> &validLengths,
     const std::vector<int32_t> &paddedLengths,
     const typename detail::Identity<T>::type &padValue);

/// S4 (plain form, `_pack_sequences`): concatenates already padded samples
/// (sample i has exactly p[i] rows) in pack order, keeping their contents.
/// Errors: a sample whose size differs from p[i], plus packMetadata's.
template <typename T>
Expected<PackedBuffer<T>>
concatSamples(const std::vector<std::vector<T>> &samples,
              const std::vector<int32_t> &validLengths,
              const std::vector<int32_t> &paddedLengths);

//===----------------------------------------------------------------------===//
// S5. Padding mask
//===----------------------------------------------------------------------===//

/// S5 (`_build_thd_padding_mask`): mask of cup[-1] rows, 1 = padding. Row
/// pos belongs to sequence s = #{entries of cup[1:] <= pos} and is padding
/// iff pos >= cup[s] + max(cu[s+1] - cu[s], 0). cup[-1] == 0 -> empty mask;
/// a single entry -> all padding; zero-length sequences are skipped; v > p
/// gives no padding in that slot. Errors: size mismatch, empty arrays,
/// negative cup[-1]. Golden: cu [0,3,5,9], cup [0,4,8,12] ->
/// [0,0,0,1,0,0,1,1,0,0,0,0].
Expected<std::vector<uint8_t>>
paddingMask(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded);

//===----------------------------------------------------------------------===//
// S6. Sanitising padded slots
//===----------------------------------------------------------------------===//

/// S6 (`_sanitize_thd_padding_values`): copy of `values` with every row whose
/// mask entry is 1 replaced by `fill` (0 for tokens, labels, position_ids;
/// 0.0 for loss_mask). Error: size mismatch.
template <typename T>
Expected<std::vector<T>>
sanitize(const std::vector<T> &values, const std::vector<uint8_t> &mask,
         const typename detail::Identity<T>::type &fill);

//===----------------------------------------------------------------------===//
// S7. Context-parallel slicing
//===----------------------------------------------------------------------===//

/// S7: how the token axis is split over CP ranks.
enum class CpMode {
  /// TE dual-chunk ("zigzag"): each sequence is cut into 2*cp chunks and rank
  /// r keeps chunks r and 2*cp-1-r.
  Zigzag,
  /// [dev-later] rank r keeps rows [r*T/cp, (r+1)*T/cp).
  Contiguous,
};

/// S7 (TE `thd_get_partitioned_indices`): the T/cp global rows kept by CP
/// rank `rank`, in local order. cp == 1 is a no-op: identity [0, T), no error
/// even for T == 0. Zigzag (cp > 1): for local row t, s = the sequence found
/// by TE's binary search over cs = cup/cp (rows past cs[n] join the last
/// entry), L = cs[s+1]-cs[s], k = t-cs[s], index = k + cs[s]*cp + (L/2) *
/// (k < L/2 ? rank : 2*cp-2-rank). Zigzag errors (TE checks): fewer than 2
/// entries, T <= 0, T % (2*cp) != 0, an entry of cup not divisible by 2*cp.
/// Contiguous requires T % cp == 0. Always: cp >= 1, 0 <= rank < cp, T >= 0.
/// Golden: cup [0,8,16], T=16, cp=2 -> r0 [0,1,6,7,8,9,14,15].
Expected<std::vector<int32_t>>
cpPartitionIndices(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t totalTokens, int64_t cp, int64_t rank,
                   CpMode mode = CpMode::Zigzag);

/// S7: gathers values[indices[i]] (the CP slice x[idx]). Error: an index
/// outside [0, values.size()).
template <typename T>
Expected<std::vector<T>> cpSlice(const std::vector<T> &values,
                                 const std::vector<int32_t> &indices);

/// S7, the inverse of cpSlice over all ranks: `values` holds the local rows
/// of the `cp` ranks gathered rank after rank, `rowsPerRank` (R) each; the
/// result is the row of `values` that each of the cp*R rows of the packed
/// buffer comes from. With T = min(cup.back(), cp*R) and Tl = T/cp, row
/// g < T of sequence s (the last s < len(cup)-1 with cup[s] <= g) at offset
/// k = g-cup[s]: zigzag, h = max((cup[s+1]-cup[s]) / (2*cp), 1), chunk
/// c = k/h on rank r = c < cp ? c : 2*cp-1-c (clamped into [0, cp)), index
/// r*R + cup[s]/cp + k%h (+ h when c >= cp); contiguous, with
/// q = max(Tl, 1), rank r = min(g/q, cp-1), index r*R + g - r*q. Every such
/// index is clamped into [0, cp*R). Rows g >= T take the ranks' padded
/// tails in rank order: g = T + r*(R-Tl) + j reads r*R + Tl + j. On
/// offsets that cpPartitionIndices accepts with T <= cp*R the result is a
/// permutation and undoes the slices padded to R rows (on others it still
/// indexes inside the gathered rows). cp == 1 is the identity [0, R).
/// Errors: cp < 1, R < 1, cp*R above int32 max, cup empty, not starting at 0
/// or decreasing. Golden: cup [0,4,8,12], cp 2, R 6 ->
/// [0,6,7,1,2,8,9,3,4,10,11,5].
Expected<std::vector<int32_t>>
cpUnsliceIndices(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
                 int64_t rowsPerRank, CpMode mode = CpMode::Zigzag);

/// S14 (TE `thd_sequence_order_to_cp_rank_order`): the concatenation over
/// ranks r = 0..cp-1 of cpPartitionIndices(cup, cup[-1], cp, r, Zigzag), i.e.
/// the global rows in CP-rank order. Same errors as cpPartitionIndices.
Expected<std::vector<int32_t>>
sequenceOrderToCpRankOrder(const std::vector<int32_t> &cuSeqlensPadded,
                           int64_t cp);

//===----------------------------------------------------------------------===//
// S8. Position ids, RoPE positions, seq_idx
//===----------------------------------------------------------------------===//

/// S8: model-input position_ids of the packed buffer: 0..p_i-1 per sequence
/// (as the dataset writes them), then S6-sanitised with the S5 mask, so
/// padding rows are 0. Errors: paddingMask's, cup not starting at 0 or
/// decreasing. Golden: cu [0,3,5,9], cup [0,4,8,12] ->
/// [0,1,2,0,0,1,0,0,0,1,2,3].
Expected<std::vector<int64_t>>
positionIds(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded);

/// S8: RoPE table row of each of the `localLength` local rows of CP rank
/// `rank`, before the optional absolute shift: with local lengths
/// ll = diff(cuPadded)/cp and lcu = cumsum0(ll), row t belongs to the
/// sequence s found by searchsorted (clamped to the last entry, so tail rows
/// continue the last sequence), k = t - lcu[s], h = ll[s]/2, and
/// pos = k (cp == 1), r*h + k (k < h), or ll[s]*cp - (r+1)*h + (k-h).
/// Errors: fewer than 2 entries, decreasing cu, cp < 1, rank outside
/// [0, cp), negative localLength. Golden: cu [0,4,8,12,16,16,16], cp=2,
/// 8 rows -> r0 [0,3,0,3,0,3,0,3], r1 [1,2,1,2,1,2,1,2].
Expected<std::vector<int64_t>>
ropePositions(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength);

/// S8: the RoPE table row actually read: ropePositions plus cu[s] when
/// freqRows > maxSeqlen (the "absolute" table heuristic), clamped to
/// [0, freqRows-1]. Errors: ropePositions', freqRows < 1.
Expected<std::vector<int64_t>>
ropeTableRows(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength, int64_t maxSeqlen,
              int64_t freqRows);

/// S8 (Mamba seq_idx): with c = cu ++ [totalTokens], row-wise sequence index
/// repeat(i, max(c[i+1]-c[i], 0)). Errors: empty cu, totalTokens outside
/// [0, int32 max], a result whose length differs from totalTokens. Golden: cu
/// [0,5,7,11], total 16 -> [0]*5 + [1]*2 + [2]*4 + [3]*5.
Expected<std::vector<int32_t>> seqIdx(const std::vector<int32_t> &cuSeqlens,
                                      int64_t totalTokens);

//===----------------------------------------------------------------------===//
// S9. Padding-mode resolution
//===----------------------------------------------------------------------===//

/// S9: pad_packed_seq_alignment, either "max" or a positive integer.
struct PadAlignment {
  /// True for "max".
  bool isMax = false;
  /// The integer alignment when !isMax.
  int64_t value = 0;
  /// The "max" setting.
  static PadAlignment maxLength() { return PadAlignment{true, 0}; }
  /// An integer alignment.
  static PadAlignment multipleOf(int64_t a) { return PadAlignment{false, a}; }
};

/// S9: which version of the semantics a mode-dependent step follows.
enum class SemanticsVersion {
  /// PR #4359 as merged.
  PR4359,
  /// [dev-later] dev branch after #5724 / #5541.
  DevLater,
};

/// S9: arguments of the tail-padding step (exactly one of alignment/target).
struct ThdPaddingKwargs {
  /// Round the local length up to this multiple.
  std::optional<int64_t> alignment;
  /// Pad the local length to exactly this value.
  std::optional<int64_t> targetLength;
  /// Pad cu arrays to maxNumSeqs+1 entries (static capacity N).
  std::optional<int64_t> maxNumSeqs;
};

/// S9 (`get_thd_padding_kwargs` + config validation): graph -> (None, C, N);
/// eager "max" -> (None, C, None) [PR] / (None, C, N) [dev]; eager integer a
/// -> (a, None, None) [PR] / (a, None, N) [dev]. Errors: C < 1; an integer
/// alignment outside [1, C]; with graphs and (scheduler or dynamic CP) an
/// alignment other than "max" or C; [dev] graph mode without N.
Expected<ThdPaddingKwargs>
thdPaddingKwargs(PadAlignment alignment, int64_t maxSeqlenPerRank,
                 std::optional<int64_t> maxPackedSequences, bool cudaGraph,
                 bool schedulerOrDynamicCp, SemanticsVersion version);

//===----------------------------------------------------------------------===//
// S10. Tail padding
//===----------------------------------------------------------------------===//

/// S10: what covers the tail rows [gA, gT) of the padded buffer.
enum class TailPolicy {
  /// append_dummy_seq: one extra sequence [gA, gT); valid arrays get
  /// cu[n] + (gT - gA) (compact coordinates, [dev-later]).
  AppendDummySequence,
  /// [dev-later] extend_last: the last padded entry is raised to gT.
  ExtendLast,
  /// No metadata change: the tail belongs to no sequence (PR, flag off).
  None,
  /// thdc: the tail covered by k dummy sequences of dummyLength rows over
  /// the spare entries (k = min(ceil(d / dummyLength), maxNumSeqs - n)),
  /// the last one ending at gT (it takes what the spare entries cannot
  /// split): causal attention over the tail costs about d * dummyLength
  /// instead of d^2 (docs/capacity-ladder.md). Needs maxNumSeqs.
  SplitDummySequences,
};

/// S10: configuration of padTailMetadata.
struct TailPaddingConfig {
  /// CP size.
  int64_t cp = 1;
  /// CP partitioning mode (zigzag imposes 2*cp divisibility).
  CpMode mode = CpMode::Zigzag;
  /// Round the local length up to this multiple (eager mode).
  std::optional<int64_t> alignment;
  /// Pad the local length to exactly this (graph mode: C).
  std::optional<int64_t> target;
  /// Static capacity N: pad cu arrays to N+1 entries.
  std::optional<int64_t> maxNumSeqs;
  /// What covers the tail.
  TailPolicy policy = TailPolicy::AppendDummySequence;
  /// SplitDummySequences: the rows of each dummy sequence but the last
  /// (>= 1; under zigzag CP with cp > 1 a multiple of 2*cp).
  std::optional<int64_t> dummyLength;
};

/// S10: metadata after tail padding.
struct TailPaddingResult {
  /// Lt: local (per CP rank) padded length.
  int64_t localTarget = 0;
  /// gT = Lt * cp.
  int64_t globalTarget = 0;
  /// New cu_seqlens (valid, compact coordinates).
  std::vector<int32_t> cuSeqlens;
  /// New cu_seqlens_padded.
  std::vector<int32_t> cuSeqlensPadded;
  /// New max_seqlen (gT when maxNumSeqs is set).
  int32_t maxSeqlen = 0;
  /// Meaningful sequences after padding: n plus the dummies.
  int64_t numSeqs = 0;
  /// Lt when maxNumSeqs is unset (eager), otherwise none (graph).
  std::optional<int64_t> totalTokens;
  /// Lt rows, 1 for local rows >= localLength (the new tail).
  std::vector<uint8_t> tailMask;
};

/// S10 (`pad_sequence_for_thd`, tensor path): Lt = target or
/// round_up(localLength, alignment), gT = Lt*cp, gA = cup[n]. Checks: exactly
/// one of alignment/target; alignment, target, cp, maxNumSeqs positive; cp,
/// maxNumSeqs and gT within int32 (Lt computed without overflow);
/// max(diff(cup)) <= gT ("Individual request length ... exceeds");
/// localLength <= Lt and gA <= gT ("refusing to silently truncate").
/// AppendDummySequence: when gT > gA, cup gets gT and cu gets cu[n]+(gT-gA)
/// (zigzag, cp > 1: gT-gA must be divisible by 2*cp); ExtendLast: cup[n]
/// raised to gT (needs >= 1 sequence; zigzag, cp > 1: gT % (2*cp) == 0);
/// None: unchanged; SplitDummySequences: when gT > gA, k = min(ceil(d /
/// dummyLength), maxNumSeqs - n) dummies of dummyLength rows, the k-th
/// ending at gT (errors: no maxNumSeqs, no spare entry, dummyLength < 1 or,
/// zigzag with cp > 1, not a multiple of 2*cp). With maxNumSeqs both arrays are padded to maxNumSeqs+1
/// entries (padCuSeqlens) and max_seqlen = gT; otherwise max_seqlen =
/// max(old, dummy length) / max(old, last padded length if extended) / old
/// and totalTokens = Lt. Golden: cp=1, alignment 8, cup [0,4,8,12] ->
/// Lt 16, cu* [0,4,8,12,16].
Expected<TailPaddingResult>
padTailMetadata(const std::vector<int32_t> &cuSeqlens,
                const std::vector<int32_t> &cuSeqlensPadded, int32_t maxSeqlen,
                int64_t localLength, const TailPaddingConfig &config);

/// S10 (`_pad_cu_seqlens`): pads a cu array to `entries` entries by
/// repeating its last value. Errors: empty array, entries < 1, "Actual
/// num_seqs (k) exceeds thd_max_packed_sequences (N)" when it has more than
/// `entries` = N+1 entries.
Expected<std::vector<int32_t>> padCuSeqlens(const std::vector<int32_t> &cu,
                                            int64_t entries);

/// S10: right-pads a token-like tensor with `fill` to `targetLength` rows.
/// Error: values longer than targetLength ("refusing to silently truncate").
template <typename T>
Expected<std::vector<T>>
padTail(const std::vector<T> &values, int64_t targetLength,
        const typename detail::Identity<T>::type &fill);

/// S10: the merged local padding mask of localTarget rows:
/// pad(oldMask, Lt, fill = 1) OR (row >= localLength). Errors: oldMask or
/// localLength longer than localTarget. Golden: [0,0,0,1,0,0,1,1], target
/// 10 -> [0,0,0,1,0,0,1,1,1,1].
Expected<std::vector<uint8_t>>
mergeTailMask(const std::vector<uint8_t> &oldMask, int64_t localLength,
              int64_t localTarget);

/// S10 (PR metadata-only path, middle PP stages): gT = target*cp, or
/// round_up(gA, alignment) on the *global* length (the tensor path rounds the
/// local length: the two disagree under CP, e.g. gA=3200, cp=2, a=128 ->
/// 3200 here vs 3328). Errors: not exactly one of alignment/target,
/// non-positive values, a result outside int64.
Expected<int64_t> metadataOnlyGlobalTarget(int64_t totalPadded, int64_t cp,
                                           std::optional<int64_t> alignment,
                                           std::optional<int64_t> target);

//===----------------------------------------------------------------------===//
// S11. CUDA-graph static inputs
//===----------------------------------------------------------------------===//

/// S11: capture seed of the four static cu inputs, [0, C*cp, ..., C*cp]
/// (N+1 entries: one sequence covering the whole buffer plus zero-length
/// entries). Requires C >= 1, cp >= 1, 1 <= N <= int32 max, C*cp within
/// int32 (checked without overflow; aborts with a message).
std::vector<int32_t> graphCaptureCuSeed(int64_t maxSeqlenPerRank, int64_t cp,
                                        int64_t maxPackedSequences);

//===----------------------------------------------------------------------===//
// S12. Microbatch count and graph slots
//===----------------------------------------------------------------------===//

/// S12: upper bound U on microbatches for the dp_balanced scheduler:
/// s = max(1, floor(C*cp / Lmax)), capped by max(1, K) when K is set;
/// U = max(1, roundup(ceil(GBS / s), dp*(vppGroup or 1)) / dp).
/// Errors: non-positive inputs, C*cp, dp*vppGroup or the rounded pack
/// count outside int64. Golden: GBS 64, dp 2, cp 2, C 4096,
/// Lmax 2048, K 31 -> 8.
Expected<int64_t>
maxMicrobatchesUpperBound(int64_t globalBatchSize, int64_t dp, int64_t cp,
                          int64_t maxPerRank, int64_t maxSeqLen,
                          std::optional<int64_t> vppGroup = std::nullopt,
                          std::optional<int64_t> maxNumSeqs = std::nullopt);

/// S12: graph capture count max(runtimeNmb, upperBound), or runtimeNmb when
/// the runtime count must be used (EP-overlap or delayed wgrad).
int64_t graphCaptureCount(int64_t runtimeNumMicrobatches, int64_t upperBound,
                          bool useRuntimeCount);

/// S12: slot liveness probe for one PP stage: `order` lists chunk ids, +c
/// for a forward and -c for a backward of (1-based) chunk c; the need is the
/// max over chunks of the peak number of outstanding forwards (forwards
/// minus backwards so far). Error: a chunk id 0 (or int64 min, which has no
/// positive counterpart).
Expected<int64_t> graphSlotsNeeded(const std::vector<int64_t> &order);

//===----------------------------------------------------------------------===//
// S14. TE semantics used inside attention
//===----------------------------------------------------------------------===//

/// S14 (TE `thd_read_half_tensor`): source rows of the half read: with
/// cs = cuLocal/2, output row j < cs[n] reads row j + cs[s+half], s the
/// sequence of j in cs. Errors: fewer than 2 entries, odd or decreasing
/// entries, half not 0/1, a row past `rows`.
Expected<std::vector<int32_t>> readHalfRows(const std::vector<int32_t> &cuLocal,
                                            int half, std::size_t rows);

/// S14: concatenation of every sequence's first (half 0) or second (half 1)
/// half of the local buffer x. Golden: cu [0,4,8] -> half 0 = rows
/// [0,1,4,5], half 1 = rows [2,3,6,7].
template <typename T>
Expected<std::vector<T>> readHalf(const std::vector<T> &x,
                                  const std::vector<int32_t> &cuLocal,
                                  int half);

/// S14: LSE merge max(a,b) + log1p(exp(min(a,b) - max(a,b))); -inf when both
/// are -inf. Golden: lseMerge(0, 0) = ln 2.
double lseMerge(double a, double b);

/// S14: output correction out + outStep * exp(lseStep - lseFinal), where a
/// step value exactly 0 contributes 0. Golden: merging two steps of LSE 0
/// weights each by exp(0 - ln 2) = 0.5.
double correctOutput(double out, double outStep, double lseStep,
                     double lseFinal);

//===----------------------------------------------------------------------===//
// Composite: one microbatch of the CUDA-graph data step
//===----------------------------------------------------------------------===//

// The status bits (StatusBit) are defined in reference/StatusBits.h.

/// StatusSampleOutOfRange when one of the first n = clamp(numSeqs, 0,
/// sampleIds.size()) chosen samples is out of range: an id outside
/// [0, sampleLengths.size()), a negative offset or length, or
/// offset + length above poolRows; else 0. Sizes as in the pipeline:
/// sampleOffsets and sampleLengths have one entry per pool sample.
int32_t sampleStatus(const std::vector<int32_t> &sampleOffsets,
                     const std::vector<int32_t> &sampleLengths,
                     const std::vector<int32_t> &sampleIds, int64_t numSeqs,
                     int64_t poolRows);

/// StatusRowsNotGiven when the rows the offsets claim, cuSeqlensPadded[n]
/// with n = clamp(numSeqs, 0, cuSeqlensPadded.size() - 1), are more than
/// `rowsGiven`, the rows the caller copied into the static data buffers, or
/// when rowsGiven is negative; else 0 (thd.validate with rows(...)). An
/// empty cuSeqlensPadded claims nothing. Golden: cup [0, 16, 32], numSeqs 2,
/// rowsGiven 20 -> StatusRowsNotGiven; rowsGiven 32 or 40 -> 0.
int32_t rowsStatus(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t numSeqs, int64_t rowsGiven);

/// StatusNumSeqsOutOfRange when numSeqs is negative or above maxSeqs, or,
/// with tailSlot, equal to maxSeqs while the padded total
/// cuSeqlensPadded[numSeqs] is below maxTokens; else 0 (thd.validate's
/// num_seqs check; docs/semantics.md, "One microbatch in graph mode").
/// tailSlot: a tail (total below maxTokens) is covered by a dummy sequence
/// that takes one of the maxSeqs slots, so only a microbatch without a tail
/// may fill all of them, as in megatron-core dev d48bd6be0a
/// (megatron/core/packed_seq_params.py:446-700 appends the dummy only when
/// the target exceeds the actual total). An index past cuSeqlensPadded
/// reads its last entry. Golden (maxSeqs 3, maxTokens 16, tailSlot): cup
/// [0,4,8,16], numSeqs 3 -> 0; cup [0,4,8,12], numSeqs 3 -> bit; numSeqs 2
/// -> 0; numSeqs 4 or -1 -> bit; without tailSlot cup [0,4,8,12], numSeqs 3
/// -> 0.
int32_t numSeqsStatus(const std::vector<int32_t> &cuSeqlensPadded,
                      int64_t numSeqs, int64_t maxSeqs, int64_t maxTokens,
                      bool tailSlot);

/// What a microbatch loses when validation empties it (thd.dropped).
struct DroppedCounts {
  /// The sequences it claimed: clamp(numSeqs, 0, E-1).
  int32_t sequences = 0;
  /// The valid tokens they claimed: max(cuSeqlens[sequences], 0).
  int32_t tokens = 0;
};

/// The sequences and valid tokens that a microbatch with fault bits
/// `status` (graphStepStatus, sampleStatus, thd.validate) loses: none when
/// status is 0; otherwise sequences = clamp(numSeqs, 0, E-1), E the entries
/// of cuSeqlens (its static capacity, N+1 in graph mode), and tokens =
/// max(cuSeqlens[sequences], 0), the valid tokens the microbatch claimed.
/// Garbage (a num_seqs outside the array, negative offsets) never reads
/// out of bounds or reports negative counts. Error: an empty cuSeqlens.
/// Golden: status 8, cu [0,3,5,9], numSeqs 2 -> (2, 5); numSeqs 7 -> (3, 9);
/// status 0 -> (0, 0).
Expected<DroppedCounts> droppedCounts(int32_t status,
                                      const std::vector<int32_t> &cuSeqlens,
                                      int64_t numSeqs);

/// Input of one microbatch of megatronGraphStep, in the static shapes of the
/// graph: the global (pre-CP) buffer has C*cp rows of which the first
/// cu_seqlens_padded[numSeqs] are meaningful (the rest is arbitrary); the cu
/// arrays have N+1 entries of which the first numSeqs+1 are meaningful (the
/// rest is arbitrary garbage).
struct GraphStepInput {
  /// Token ids, C*cp rows.
  std::vector<int64_t> tokens;
  /// Labels, C*cp rows.
  std::vector<int64_t> labels;
  /// Dataset position ids (0..p_i-1 per sequence), C*cp rows.
  std::vector<int64_t> positionIds;
  /// Loss mask, C*cp rows.
  std::vector<float> lossMask;
  /// Valid offsets cu_seqlens, N+1 entries.
  std::vector<int32_t> cuSeqlens;
  /// Physical offsets cu_seqlens_padded, N+1 entries.
  std::vector<int32_t> cuSeqlensPadded;
  /// Number n of real sequences.
  int32_t numSeqs = 0;
  /// CP rank r whose slice is produced.
  int32_t cpRank = 0;
  /// The rows of the data buffers the caller gave (copied in for this
  /// microbatch; the rest hold an earlier one's), when the step checks them
  /// (rowsStatus); nullopt: every row is the caller's.
  std::optional<int64_t> rowsGiven;
};

/// Output of megatronGraphStep for one CP rank: static shapes [C] and [N+1].
struct GraphStepOutput {
  /// Local tokens, C rows (0 on padding rows).
  std::vector<int64_t> tokens;
  /// Local labels, C rows (0 on padding rows).
  std::vector<int64_t> labels;
  /// Local position ids, C rows (0 on padding rows).
  std::vector<int64_t> positionIds;
  /// Local loss mask, C rows (0 on padding rows).
  std::vector<float> lossMask;
  /// Local padding mask, C rows, 1 = padding (incl. the tail).
  std::vector<uint8_t> paddingMask;
  /// Global padded offsets with the dummy, N+1 entries.
  std::vector<int32_t> cuSeqlensPadded;
  /// Global valid offsets with the dummy (compact), N+1 entries.
  std::vector<int32_t> cuSeqlens;
  /// Static max_seqlen = C*cp.
  int32_t maxSeqlen = 0;
  /// 0 when valid, else an OR of StatusBit values.
  int32_t status = 0;
};

/// The first broken precondition of graphStepStatus and megatronGraphStep
/// for this input and configuration, as a message naming the values, or
/// nullopt when they all hold: C >= 1, cp >= 1, N >= 1, C even when cp > 1,
/// C*cp within int32 (checked without overflow: C = 2^61 + 4 with cp = 8 is
/// refused, not wrapped to 32), N within int32, data sizes C*cp and cu sizes
/// N+1. Callers that take C, cp, N or the buffers from users check here
/// first: the two functions abort with this message.
std::optional<std::string>
graphStepPreconditionError(const GraphStepInput &input,
                           int64_t maxSeqlenPerRank, int64_t cp,
                           int64_t maxPackedSequences);

/// Validation of a GraphStepInput: the OR of every StatusBit that applies
/// (0 = valid). numSeqs may be N only when cuSeqlensPadded[N] is C*cp (no
/// tail, so no dummy sequence needs a slot): numSeqsStatus with maxSeqs N,
/// maxTokens C*cp and tailSlot. When bit 1 is set the other checks use
/// numSeqs clamped into [0, N]. Preconditions as for megatronGraphStep.
int32_t graphStepStatus(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                        int64_t cp, int64_t maxPackedSequences);

/// One microbatch of the THD data step in CUDA-graph mode for CP rank
/// input.cpRank, with C = maxSeqlenPerRank and N = maxPackedSequences.
/// Composed of the steps above, on the meaningful prefix (n = numSeqs,
/// cu = cuSeqlens[0..n], cup = cuSeqlensPadded[0..n], T = cup[n]):
///   1. S5 mask = paddingMask(cu, cup) over the first T rows;
///   2. S6 sanitize tokens, labels, position_ids, loss_mask (fill 0);
///   3. S7 zigzag CP slice (cpPartitionIndices(cup, T, cp, r)) of the four
///      data keys and the mask (an empty microbatch, T == 0, has an empty
///      slice; TE would reject T == 0 under CP);
///   4. S10 in graph mode: padTailMetadata with target C, maxNumSeqs N,
///      AppendDummySequence, compact valid coordinates; data keys padded
///      with 0 and the mask with 1 to C rows (mergeTailMask).
/// Result: cu_seqlens_padded = cup, then C*cp when T < C*cp (the dummy),
/// then repeats to N+1 entries; cu_seqlens = cu, then cu[n] + (C*cp - T),
/// then repeats; max_seqlen = C*cp. When graphStepStatus is nonzero the
/// outputs are those of an empty microbatch: data 0, mask all 1, both cu
/// arrays [0, C*cp, ..., C*cp], max_seqlen C*cp, and `status` holds the bits.
/// Preconditions (checked, abort with a message; graphStepPreconditionError
/// reports them without aborting): C >= 1, cp >= 1, N >= 1, C even when
/// cp > 1, C*cp and N fit int32, data sizes C*cp, cu sizes N+1.
/// Golden (S10 "graph: cp=2, target 8, N=6"): r0 tokens
/// [11,0,21,0,31,34,0,0], mask [0,1,0,1,0,0,1,1].
/// dummyLength: cover the tail with SplitDummySequences of that length
/// instead (>= 1, a multiple of 2*cp when cp > 1: a precondition).
GraphStepOutput
megatronGraphStep(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                  int64_t cp, int64_t maxPackedSequences,
                  std::optional<int64_t> dummyLength = std::nullopt);

//===----------------------------------------------------------------------===//
// Composite: one microbatch packed from a pool of samples
//===----------------------------------------------------------------------===//

/// Input of one microbatch of packMicrobatchStep, in the static shapes of
/// examples/pack_microbatch.mlir (P pool rows, S pool samples, N-1 chosen
/// ids). Sample k occupies pool rows [sampleOffsets[k], sampleOffsets[k] +
/// sampleLengths[k]); its labels are stored already shifted and its loss
/// mask is the dataset's (0.0 where the label is ignored).
struct PackStepInput {
  /// Token ids of every sample, P rows.
  std::vector<int64_t> tokenPool;
  /// Labels of every sample, P rows.
  std::vector<int64_t> labelPool;
  /// Loss mask of every sample, P rows.
  std::vector<float> lossMaskPool;
  /// First pool row of every sample, S entries.
  std::vector<int32_t> sampleOffsets;
  /// Valid length of every sample, S entries.
  std::vector<int32_t> sampleLengths;
  /// The chosen samples in pack order, N-1 entries of which the first
  /// numSeqs are meaningful (the rest is arbitrary).
  std::vector<int32_t> sampleIds;
  /// Number n of chosen samples.
  int32_t numSeqs = 0;
  /// CP rank r whose slice is produced.
  int32_t cpRank = 0;
};

/// Output of packMicrobatchStep for one CP rank: the graph step's outputs,
/// static shapes [C] and [N+1] (the loss mask is 0.0 on padding rows).
using PackStepOutput = GraphStepOutput;

/// One microbatch packed from a pool for CP rank input.cpRank, with
/// C = maxSeqlenPerRank and N = maxPackedSequences: the reference of
/// examples/pack_microbatch.mlir, composed from the steps above exactly as
/// the pipeline composes its ops:
///   1. thd.gather: v[i] = sampleLengths[sampleIds[i]] for the first
///      numSeqs ids (clamped into [0, N-1]), each id clamped into [0, S);
///   2. S1 p = alignLengths(v, G), G = 2*cp (cp > 1) or 1; S4 cu, cup =
///      cumulativeLengths(v), (p);
///   3. thd.validate: graphStepStatus over cu, cup padded to N+1 entries by
///      repeats, with the raw numSeqs and cpRank, OR numSeqsStatus with
///      maxSeqs N-1 and no tail slot (N-1 chosen ids), OR sampleStatus over the
///      raw ids and the pool's P rows; a nonzero status leaves no sequence
///      (and rank 0) for the steps below;
///   4. S4 pack tokens, labels (pad 0) and the loss mask (pad 0.0) from the
///      pools; S5 mask; S6 sanitize (fill 0, 0.0); S8 positionIds;
///   5. S7 zigzag slice for the rank (an empty microbatch has an empty
///      slice), S10 padTail to C rows (data 0, mask 1) and padTailMetadata
///      {target C, maxNumSeqs N, AppendDummySequence}.
/// The result has the layout of megatronGraphStep's on the packed buffer
/// (an invalid microbatch gives its empty microbatch). Errors: a
/// configuration or buffer size the pipeline cannot have (C, cp, N < 1, odd
/// C with cp > 1, C*cp or N outside int32, checked without overflow, pools of
/// different sizes, offsets and lengths of different sizes or none, sampleIds
/// not N-1 entries), and data the reference steps refuse where the pipeline
/// sets status bits (a chosen sample's negative length, int32 overflow of the
/// lengths). Golden (C = 8, cp = 2, N = 6, the running example, all-ones loss
/// masks): r0 tokens [11,0,21,0,31,34,0,0], loss_mask [1,0,1,0,1,1,0,0]; r1
/// loss_mask [1,1,1,0,1,1,0,0].
Expected<PackStepOutput> packMicrobatchStep(const PackStepInput &input,
                                            int64_t maxSeqlenPerRank,
                                            int64_t cp,
                                            int64_t maxPackedSequences);

//===----------------------------------------------------------------------===//
// Template definitions
//===----------------------------------------------------------------------===//

template <typename T>
Expected<PackedBuffer<T>>
pack(const std::vector<T> &pool, const std::vector<int64_t> &sampleOffsets,
     const std::vector<int32_t> &sampleIds,
     const std::vector<int32_t> &validLengths,
     const std::vector<int32_t> &paddedLengths,
     const typename detail::Identity<T>::type &padValue) {
  Expected<PackLayout> layout = packLayout(
      pool.size(), sampleOffsets, sampleIds, validLengths, paddedLengths);
  if (!layout)
    return makeError<PackedBuffer<T>>(layout.error());
  PackedBuffer<T> result;
  result.values.reserve(layout->sourceRows.size());
  for (int64_t row : layout->sourceRows)
    result.values.push_back(row < 0 ? padValue
                                    : pool[static_cast<std::size_t>(row)]);
  result.metadata = std::move(layout->metadata);
  return result;
}

template <typename T>
Expected<PackedBuffer<T>>
concatSamples(const std::vector<std::vector<T>> &samples,
              const std::vector<int32_t> &validLengths,
              const std::vector<int32_t> &paddedLengths) {
  if (samples.size() != paddedLengths.size())
    return makeError<PackedBuffer<T>>(
        detail::sizeMismatch("concatSamples", "samples", samples.size(),
                             "padded lengths", paddedLengths.size()));
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (paddedLengths[i] < 0 ||
        samples[i].size() != static_cast<std::size_t>(paddedLengths[i]))
      return makeError<PackedBuffer<T>>(
          "sample " + std::to_string(i) + " has " +
          std::to_string(samples[i].size()) + " rows but its padded length p[" +
          std::to_string(i) + "] = " + std::to_string(paddedLengths[i]));
  Expected<PackMetadata> metadata = packMetadata(validLengths, paddedLengths);
  if (!metadata)
    return makeError<PackedBuffer<T>>(metadata.error());
  PackedBuffer<T> result;
  for (const std::vector<T> &sample : samples)
    result.values.insert(result.values.end(), sample.begin(), sample.end());
  result.metadata = std::move(*metadata);
  return result;
}

template <typename T>
Expected<std::vector<T>>
sanitize(const std::vector<T> &values, const std::vector<uint8_t> &mask,
         const typename detail::Identity<T>::type &fill) {
  if (values.size() != mask.size())
    return makeError<std::vector<T>>(detail::sizeMismatch(
        "sanitize", "values", values.size(), "padding mask", mask.size()));
  std::vector<T> result(values);
  for (std::size_t i = 0; i < result.size(); ++i)
    if (mask[i])
      result[i] = fill;
  return result;
}

template <typename T>
Expected<std::vector<T>> cpSlice(const std::vector<T> &values,
                                 const std::vector<int32_t> &indices) {
  std::vector<T> result;
  result.reserve(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || static_cast<std::size_t>(indices[i]) >= values.size())
      return makeError<std::vector<T>>(
          detail::indexOutOfRange(i, indices[i], values.size()));
    result.push_back(values[static_cast<std::size_t>(indices[i])]);
  }
  return result;
}

template <typename T>
Expected<std::vector<T>>
padTail(const std::vector<T> &values, int64_t targetLength,
        const typename detail::Identity<T>::type &fill) {
  if (targetLength < 0 || static_cast<int64_t>(values.size()) > targetLength)
    return makeError<std::vector<T>>(
        detail::truncationRefused(values.size(), targetLength));
  std::vector<T> result(values);
  result.resize(static_cast<std::size_t>(targetLength), fill);
  return result;
}

template <typename T>
Expected<std::vector<T>> readHalf(const std::vector<T> &x,
                                  const std::vector<int32_t> &cuLocal,
                                  int half) {
  Expected<std::vector<int32_t>> rows = readHalfRows(cuLocal, half, x.size());
  if (!rows)
    return makeError<std::vector<T>>(rows.error());
  return cpSlice(x, *rows);
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_REFERENCE_H
