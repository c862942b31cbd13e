//===- TailPadding.h - S9 padding mode, S10 tail padding --------*- C++ -*-===//
//
// Sections S9 and S10 of docs/semantics.md: the padding arguments a
// configuration resolves to, and the tail padding of the metadata and the
// buffers. Defined in reference/TailPadding.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_TAILPADDING_H
#define THDC_REFERENCE_TAILPADDING_H

#include "reference/Common.h"
#include "reference/CpSlice.h"
#include "reference/Status.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace thdc {
namespace reference {

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
Result<ThdPaddingKwargs>
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
Result<TailPaddingResult>
padTailMetadata(const std::vector<int32_t> &cuSeqlens,
                const std::vector<int32_t> &cuSeqlensPadded, int32_t maxSeqlen,
                int64_t localLength, const TailPaddingConfig &config);

/// padTailMetadata without the tail mask (tailMask left empty): the same
/// checks, targets and cu arrays in work linear in the cu arrays' entries
/// whatever Lt, for callers that need only the metadata.
Result<TailPaddingResult>
padTailOffsets(const std::vector<int32_t> &cuSeqlens,
               const std::vector<int32_t> &cuSeqlensPadded, int32_t maxSeqlen,
               int64_t localLength, const TailPaddingConfig &config);

/// S10 (`_pad_cu_seqlens`): pads a cu array to `entries` entries by
/// repeating its last value. Errors: empty array, entries < 1, "Actual
/// num_seqs (k) exceeds thd_max_packed_sequences (N)" when it has more than
/// `entries` = N+1 entries.
Result<std::vector<int32_t>> padCuSeqlens(const std::vector<int32_t> &cu,
                                          int64_t entries);

/// S10: right-pads a token-like tensor with `fill` to `targetLength` rows.
/// Error: values longer than targetLength ("refusing to silently truncate").
template <typename T>
Result<std::vector<T>> padTail(const std::vector<T> &values,
                               int64_t targetLength,
                               const typename detail::Identity<T>::type &fill);

/// S10: the merged local padding mask of localTarget rows:
/// pad(oldMask, Lt, fill = 1) OR (row >= localLength). Errors: oldMask or
/// localLength longer than localTarget. Golden: [0,0,0,1,0,0,1,1], target
/// 10 -> [0,0,0,1,0,0,1,1,1,1].
Result<std::vector<uint8_t>> mergeTailMask(const std::vector<uint8_t> &oldMask,
                                           int64_t localLength,
                                           int64_t localTarget);

/// S10 (PR metadata-only path, middle PP stages): gT = target*cp, or
/// round_up(gA, alignment) on the *global* length (the tensor path rounds the
/// local length: the two disagree under CP, e.g. gA=3200, cp=2, a=128 ->
/// 3200 here vs 3328). Errors: not exactly one of alignment/target,
/// non-positive values, a result outside int64.
Result<int64_t> metadataOnlyGlobalTarget(int64_t totalPadded, int64_t cp,
                                         std::optional<int64_t> alignment,
                                         std::optional<int64_t> target);

//===----------------------------------------------------------------------===//
// Template definitions
//===----------------------------------------------------------------------===//

template <typename T>
Result<std::vector<T>> padTail(const std::vector<T> &values,
                               int64_t targetLength,
                               const typename detail::Identity<T>::type &fill) {
  if (targetLength < 0 || static_cast<int64_t>(values.size()) > targetLength)
    return Status::error(
        detail::truncationRefused(values.size(), targetLength));
  std::vector<T> result(values);
  result.resize(static_cast<std::size_t>(targetLength), fill);
  return result;
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_TAILPADDING_H
