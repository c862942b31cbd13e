//===- TailPadding.cpp - S9, S10 padding modes and tail -------------------===//
//
// Sections S9 and S10 of docs/semantics.md: resolution of the padding mode
// (thdPaddingKwargs) and tail padding of a microbatch to an alignment or a
// static target: cu array padding, new metadata, merged mask (padCuSeqlens,
// padTailMetadata and padTailOffsets, mergeTailMask, metadataOnlyGlobalTarget;
// the template padTail lives in TailPadding.h). Implemented in the compiler by
// thd.pad_tail, thd.pad_tail_metadata and thd.pad_cu_seqlens.
//
//===----------------------------------------------------------------------===//

#include "reference/TailPadding.h"
#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

//===----------------------------------------------------------------------===//
// S9. Padding-mode resolution
//===----------------------------------------------------------------------===//

Result<ThdPaddingKwargs>
thdPaddingKwargs(PadAlignment alignment, int64_t maxSeqlenPerRank,
                 std::optional<int64_t> maxPackedSequences, bool cudaGraph,
                 bool schedulerOrDynamicCp, SemanticsVersion version) {
  const int64_t c = maxSeqlenPerRank;
  if (c < 1)
    return Status::error(
        concat("max_seqlen_per_dp_cp_rank = ", c, " must be set and >= 1"));
  if (!alignment.isMax && (alignment.value < 1 || alignment.value > c))
    return Status::error(concat("pad_packed_seq_alignment = ", alignment.value,
                                " must be \"max\" or a positive integer <= "
                                "max_seqlen_per_dp_cp_rank = ",
                                c));
  if (cudaGraph && schedulerOrDynamicCp && !alignment.isMax &&
      alignment.value != c)
    return Status::error(
        concat("with CUDA graphs and the sequence-packing scheduler "
               "pad_packed_seq_alignment must be \"max\" or exactly "
               "max_seqlen_per_dp_cp_rank = ",
               c, ", got ", alignment.value));
  const bool dev = version == SemanticsVersion::DevLater;
  if (cudaGraph && dev && !maxPackedSequences)
    return Status::error(
        "CUDA-graph THD padding requires --thd-max-packed-sequences");

  ThdPaddingKwargs kwargs;
  if (cudaGraph) {
    kwargs.targetLength = c;
    kwargs.maxNumSeqs = maxPackedSequences;
  } else if (alignment.isMax) {
    kwargs.targetLength = c;
    if (dev)
      kwargs.maxNumSeqs = maxPackedSequences;
  } else {
    kwargs.alignment = alignment.value;
    if (dev)
      kwargs.maxNumSeqs = maxPackedSequences;
  }
  return kwargs;
}

//===----------------------------------------------------------------------===//
// S10. Tail padding
//===----------------------------------------------------------------------===//

Result<std::vector<int32_t>> padCuSeqlens(const std::vector<int32_t> &cu,
                                          int64_t entries) {
  using Output = std::vector<int32_t>;
  if (cu.empty())
    return Status::error("padCuSeqlens: the cu array is empty");
  if (entries < 1)
    return Status::error(
        concat("padCuSeqlens: entries = ", entries, " must be >= 1"));
  if (static_cast<int64_t>(cu.size()) > entries)
    return Status::error(concat("Actual num_seqs (", cu.size() - 1,
                                ") exceeds thd_max_packed_sequences (",
                                entries - 1, ")"));
  Output padded(cu);
  padded.resize(static_cast<std::size_t>(entries), cu.back());
  return padded;
}

Result<TailPaddingResult>
padTailMetadata(const std::vector<int32_t> &cuSeqlens,
                const std::vector<int32_t> &cuSeqlensPadded, int32_t maxSeqlen,
                int64_t localLength, const TailPaddingConfig &config) {
  Result<TailPaddingResult> result = padTailOffsets(
      cuSeqlens, cuSeqlensPadded, maxSeqlen, localLength, config);
  if (!result)
    return result;
  for (int64_t row = 0; row < result->localTarget; ++row)
    result->tailMask.push_back(row >= localLength);
  return result;
}

Result<TailPaddingResult>
padTailOffsets(const std::vector<int32_t> &cuSeqlens,
               const std::vector<int32_t> &cuSeqlensPadded, int32_t maxSeqlen,
               int64_t localLength, const TailPaddingConfig &config) {
  using Output = TailPaddingResult;
  const std::vector<int32_t> &cu = cuSeqlens;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  const int64_t cp = config.cp;
  if (config.alignment.has_value() == config.target.has_value())
    return Status::error(
        concat("exactly one of alignment and target must be set (got "
               "alignment = ",
               optionalToString(config.alignment),
               ", target = ", optionalToString(config.target), ")"));
  if (config.alignment && *config.alignment <= 0)
    return Status::error(
        concat("alignment = ", *config.alignment, " must be > 0"));
  if (config.target && *config.target <= 0)
    return Status::error(concat("target = ", *config.target, " must be > 0"));
  if (cp < 1)
    return Status::error(concat("cp = ", cp, " must be >= 1"));
  if (config.maxNumSeqs && *config.maxNumSeqs < 1)
    return Status::error(concat(
        "thd_max_packed_sequences = ", *config.maxNumSeqs, " must be >= 1"));
  if (cu.size() != cup.size())
    return Status::error(detail::sizeMismatch("padTailMetadata", "cu_seqlens",
                                              cu.size(), "cu_seqlens_padded",
                                              cup.size()));
  if (cup.empty())
    return Status::error(
        "padTailMetadata: the cu arrays must have at least one entry");
  if (localLength < 0)
    return Status::error(concat("local length ", localLength, " is negative"));

  if (cp > kInt32Max)
    return Status::error(concat("cp = ", cp, " is outside the int32 range"));
  if (config.maxNumSeqs && *config.maxNumSeqs > kInt32Max)
    return Status::error(
        concat("thd_max_packed_sequences = ", *config.maxNumSeqs,
               " is outside the int32 range (the cu arrays get N+1 entries)"));
  const std::optional<int64_t> target =
      config.target ? config.target
                    : checkedRoundUp(localLength, *config.alignment);
  if (!target)
    return Status::error(concat("local length ", localLength,
                                " rounded up to the alignment ",
                                *config.alignment, " overflows int64"));
  const int64_t localTarget = *target;
  if (localTarget > kInt32Max / cp)
    return Status::error(concat("global target length Lt * cp = ", localTarget,
                                " * ", cp, " is outside the int32 range"));
  const int64_t globalTarget = localTarget * cp;
  const int64_t globalActual = cup.back();
  const std::size_t n = cup.size() - 1;

  for (std::size_t i = 0; i < n; ++i) {
    int64_t length = int64_t(cup[i + 1]) - cup[i];
    if (length > globalTarget)
      return Status::error(
          concat("Individual request length ", length, " (sequence ", i,
                 ") exceeds the global target length gT = ", globalTarget,
                 " (Lt ", localTarget, " * cp ", cp, ")"));
  }
  if (localLength > localTarget)
    return Status::error(
        concat("local length ", localLength,
               " exceeds the local target length Lt = ", localTarget,
               "; refusing to silently truncate"));
  if (globalActual > globalTarget)
    return Status::error(concat(
        "total padded length cu_seqlens_padded[", n, "] = ", globalActual,
        " exceeds the global target length gT = ", globalTarget,
        "; refusing to silently truncate"));

  const bool zigzagCp = cp > 1 && config.mode == CpMode::Zigzag;
  std::vector<int32_t> outCu(cu), outCup(cup);
  int64_t newMaxSeqlen = maxSeqlen;
  // The dummy sequences over the tail [gA, gT) are partitioned like any
  // sequence: under zigzag CP the tail is a multiple of 2*cp.
  auto tailDivisible = [&]() -> Status {
    const int64_t tail = globalTarget - globalActual;
    if (!zigzagCp || tail % (2 * cp) == 0)
      return Status();
    return Status::error(concat("dummy sequence length ", tail, " (gT ",
                                globalTarget, " - cu_seqlens_padded[", n, "] ",
                                globalActual,
                                ") is not divisible by 2*cp = ", 2 * cp,
                                "; zigzag CP partitioning requires it"));
  };
  switch (config.policy) {
  case TailPolicy::AppendDummySequence:
    if (globalTarget > globalActual) {
      const int64_t dummy = globalTarget - globalActual;
      if (Status divisible = tailDivisible(); !divisible)
        return divisible;
      const int64_t validEnd = int64_t(cu.back()) + dummy;
      if (!fitsInt32(validEnd))
        return Status::error(concat("dummy end cu_seqlens[", n, "] + ", dummy,
                                    " = ", validEnd,
                                    " is outside the int32 range"));
      outCup.push_back(static_cast<int32_t>(globalTarget));
      outCu.push_back(static_cast<int32_t>(validEnd));
      newMaxSeqlen = std::max(newMaxSeqlen, dummy);
    }
    break;
  case TailPolicy::ExtendLast:
    if (zigzagCp && globalTarget % (2 * cp))
      return Status::error(concat("global target length gT = ", globalTarget,
                                  " is not divisible by 2*cp = ", 2 * cp,
                                  "; extend_last under zigzag CP requires it"));
    if (globalTarget > globalActual) {
      if (n == 0)
        return Status::error(
            concat("extend_last needs at least one real sequence to extend "
                   "(cu_seqlens_padded = ",
                   list(cup), ")"));
      outCup.back() = static_cast<int32_t>(globalTarget);
      newMaxSeqlen =
          std::max<int64_t>(newMaxSeqlen, int64_t(outCup[n]) - outCup[n - 1]);
    }
    break;
  case TailPolicy::None:
    break;
  case TailPolicy::SplitDummySequences: {
    if (!config.maxNumSeqs)
      return Status::error("split dummy sequences go in the spare entries "
                           "of the N+1: thd_max_packed_sequences must be "
                           "set");
    if (!config.dummyLength || *config.dummyLength < 1)
      return Status::error(concat("dummy length ",
                                  optionalToString(config.dummyLength),
                                  " must be set and >= 1"));
    const int64_t length = *config.dummyLength;
    if (zigzagCp && length % (2 * cp))
      return Status::error(concat(
          "dummy length ", length, " is not divisible by 2*cp = ", 2 * cp,
          "; zigzag CP partitioning requires it of every sequence"));
    if (globalTarget <= globalActual)
      break;
    const int64_t tail = globalTarget - globalActual;
    if (Status divisible = tailDivisible(); !divisible)
      return divisible;
    const int64_t spare = *config.maxNumSeqs - int64_t(n);
    if (spare < 1)
      return Status::error(concat(n, " sequences leave no spare entry of N = ",
                                  *config.maxNumSeqs, " for a dummy sequence"));
    const int64_t count = std::min((tail - 1) / length + 1, spare);
    const int64_t validStart = cu.back();
    if (!fitsInt32(validStart + tail))
      return Status::error(concat("dummy end cu_seqlens[", n, "] + ", tail,
                                  " = ", validStart + tail,
                                  " is outside the int32 range"));
    for (int64_t t = 1; t <= count; ++t) {
      const int64_t end = t < count ? globalActual + t * length : globalTarget;
      outCup.push_back(static_cast<int32_t>(end));
      outCu.push_back(static_cast<int32_t>(validStart + (end - globalActual)));
    }
    newMaxSeqlen =
        std::max(newMaxSeqlen, std::max(std::min(length, tail),
                                        tail - (count - 1) * length));
    break;
  }
  }

  Output result;
  result.localTarget = localTarget;
  result.globalTarget = globalTarget;
  result.numSeqs = int64_t(outCup.size()) - 1;
  if (config.maxNumSeqs) {
    Result<std::vector<int32_t>> paddedCu =
        padCuSeqlens(outCu, *config.maxNumSeqs + 1);
    if (!paddedCu)
      return paddedCu.status();
    Result<std::vector<int32_t>> paddedCup =
        padCuSeqlens(outCup, *config.maxNumSeqs + 1);
    if (!paddedCup)
      return paddedCup.status();
    result.cuSeqlens = std::move(*paddedCu);
    result.cuSeqlensPadded = std::move(*paddedCup);
    result.maxSeqlen = static_cast<int32_t>(globalTarget);
  } else {
    result.cuSeqlens = std::move(outCu);
    result.cuSeqlensPadded = std::move(outCup);
    result.maxSeqlen = static_cast<int32_t>(newMaxSeqlen);
    result.totalTokens = localTarget;
  }
  return result;
}

Result<std::vector<uint8_t>> mergeTailMask(const std::vector<uint8_t> &oldMask,
                                           int64_t localLength,
                                           int64_t localTarget) {
  using Output = std::vector<uint8_t>;
  if (localLength > localTarget)
    return Status::error(
        concat("local length ", localLength,
               " exceeds the local target length Lt = ", localTarget,
               "; refusing to silently truncate"));
  Result<Output> merged = padTail(oldMask, localTarget, 1);
  if (!merged)
    return merged;
  for (int64_t row = std::max<int64_t>(localLength, 0); row < localTarget;
       ++row)
    (*merged)[row] = 1;
  return merged;
}

Result<int64_t> metadataOnlyGlobalTarget(int64_t totalPadded, int64_t cp,
                                         std::optional<int64_t> alignment,
                                         std::optional<int64_t> target) {
  if (alignment.has_value() == target.has_value())
    return Status::error(
        concat("exactly one of alignment and target must be set (got "
               "alignment = ",
               optionalToString(alignment),
               ", target = ", optionalToString(target), ")"));
  if (cp < 1)
    return Status::error(concat("cp = ", cp, " must be >= 1"));
  if (target) {
    if (*target <= 0)
      return Status::error(concat("target = ", *target, " must be > 0"));
    if (std::optional<int64_t> global = checkedMul(*target, cp))
      return *global;
    return Status::error(concat("global target length target * cp = ", *target,
                                " * ", cp, " overflows int64"));
  }
  if (*alignment <= 0)
    return Status::error(concat("alignment = ", *alignment, " must be > 0"));
  if (std::optional<int64_t> global = checkedRoundUp(totalPadded, *alignment))
    return *global;
  return Status::error(concat("total padded length ", totalPadded,
                              " rounded up to the alignment ", *alignment,
                              " overflows int64"));
}

} // namespace reference
} // namespace thdc
