//===- GraphStep.cpp - S5-S10 one graph-mode step -------------------------===//
//
// The composite of sections S5, S6, S7 and S10 of docs/semantics.md
// ("One microbatch in graph mode"): validation into status bits
// (sampleStatus, graphStepStatus), what an invalid microbatch loses
// (droppedCounts), and one microbatch of the CUDA-graph
// data step for one CP rank (megatronGraphStep), or its metadata alone
// (graphStepMetadata). The compiled pipelines
// (examples/megatron_graph_step.mlir) are tested against it.
//
//===----------------------------------------------------------------------===//

#include "reference/GraphStep.h"
#include "reference/Common.h"
#include "reference/CpSlice.h"
#include "reference/Internal.h"
#include "reference/PaddingMask.h"
#include "reference/TailPadding.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

Status internal::checkStepConfiguration(int64_t c, int64_t cp, int64_t n) {
  if (c < 1 || cp < 1 || n < 1)
    return Status::error(concat("needs C >= 1, cp >= 1 and N >= 1 (C = ", c,
                                ", cp = ", cp, ", N = ", n, ")"));
  if (cp > 1 && c % 2)
    return Status::error(
        concat("C = ", c, " must be even when cp = ", cp,
               " > 1 (the dummy length C*cp - T must be divisible by "
               "2*cp)"));
  std::optional<int64_t> rows = checkedMul(c, cp);
  if (!rows || *rows > kInt32Max)
    return Status::error(
        concat("C * cp = ", c, " * ", cp,
               rows ? concat(" = ", *rows) : std::string(" overflows int64"),
               ", outside the int32 range of the cu arrays"));
  if (n > kInt32Max)
    return Status::error(
        concat("N = ", n,
               " is outside the int32 range (the cu arrays have N+1 "
               "entries)"));
  return Status();
}

namespace {

/// The preconditions of megatronGraphStep (withData) or graphStepMetadata,
/// an error naming the first that fails: the configuration, the data sizes C*cp
/// (withData) and the cu sizes N+1.
Status checkPreconditions(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                          int64_t cp, int64_t maxPackedSequences,
                          bool withData) {
  if (Status problem =
          checkStepConfiguration(maxSeqlenPerRank, cp, maxPackedSequences);
      !problem)
    return problem;
  // Both products fit: checkStepConfiguration bounds C*cp and N by int32.
  const std::size_t rows = static_cast<std::size_t>(maxSeqlenPerRank * cp);
  const std::size_t entries = static_cast<std::size_t>(maxPackedSequences + 1);
  if (withData &&
      (input.tokens.size() != rows || input.labels.size() != rows ||
       input.positionIds.size() != rows || input.lossMask.size() != rows))
    return Status::error(
        concat("tokens/labels/position_ids/loss_mask have ",
               input.tokens.size(), "/", input.labels.size(), "/",
               input.positionIds.size(), "/", input.lossMask.size(),
               " rows, not C*cp rows; all must have C*cp = ", rows));
  if (input.cuSeqlens.size() != entries ||
      input.cuSeqlensPadded.size() != entries)
    return Status::error(
        concat("cu_seqlens/cu_seqlens_padded have ", input.cuSeqlens.size(),
               "/", input.cuSeqlensPadded.size(),
               " entries, not N+1; both must have N+1 = ", entries));
  return Status();
}

} // namespace

Status checkGraphStepPreconditions(const GraphStepInput &input,
                                   int64_t maxSeqlenPerRank, int64_t cp,
                                   int64_t maxPackedSequences) {
  return checkPreconditions(input, maxSeqlenPerRank, cp, maxPackedSequences,
                            /*withData=*/true);
}

Status checkGraphStepMetadataPreconditions(const GraphStepInput &input,
                                           int64_t maxSeqlenPerRank, int64_t cp,
                                           int64_t maxPackedSequences) {
  return checkPreconditions(input, maxSeqlenPerRank, cp, maxPackedSequences,
                            /*withData=*/false);
}

namespace {

/// S6 -> S7 -> S10 for one data key: sanitise the first mask.size() rows,
/// gather the CP slice and right-pad with 0 to the local target.
template <typename T>
std::vector<T>
prepareDataKey(const std::vector<T> &values, const std::vector<uint8_t> &mask,
               const std::vector<int32_t> &indices, int64_t localTarget) {
  std::vector<T> buffer(values.begin(), values.begin() + mask.size());
  std::vector<T> clean =
      unwrap(sanitize(buffer, mask, T(0)), "megatronGraphStep (S6)");
  std::vector<T> local =
      unwrap(cpSlice(clean, indices), "megatronGraphStep (S7)");
  return unwrap(padTail(local, localTarget, T(0)), "megatronGraphStep (S10)");
}

/// S10 in graph mode for the prefix cu/cup of valid metadata whose CP slice
/// has localLength rows: the tail metadata with target C, maxNumSeqs N and
/// a dummy sequence (SplitDummySequences of dummyLength with one), without
/// the tail mask (the step merges its own).
TailPaddingResult graphTail(const std::vector<int32_t> &cu,
                            const std::vector<int32_t> &cup,
                            int64_t localLength, int64_t c, int64_t cp,
                            int64_t n, std::optional<int64_t> dummyLength) {
  TailPaddingConfig config;
  config.cp = cp;
  config.mode = CpMode::Zigzag;
  config.target = c;
  config.maxNumSeqs = n;
  config.policy = dummyLength ? TailPolicy::SplitDummySequences
                              : TailPolicy::AppendDummySequence;
  config.dummyLength = dummyLength;
  return unwrap(
      padTailOffsets(cu, cup, maxSeqlenFromCu(cup), localLength, config),
      "megatronGraphStep (S10)");
}

} // namespace

GraphStepOutput internal::graphStepOnPrefix(
    const GraphStepInput &input, const std::vector<int32_t> &cu,
    const std::vector<int32_t> &cup, int64_t rank, int64_t c, int64_t cp,
    int64_t n, std::optional<int64_t> dummyLength) {
  std::vector<uint8_t> mask =
      unwrap(paddingMask(cu, cup), "megatronGraphStep (S5)");
  const int64_t total = static_cast<int64_t>(mask.size());
  // An empty microbatch has an empty slice (TE would reject T == 0 under CP).
  std::vector<int32_t> indices;
  if (cp == 1 || total > 0)
    indices = unwrap(cpPartitionIndices(cup, total, cp, rank, CpMode::Zigzag),
                     "megatronGraphStep (S7)");
  const int64_t localLength = static_cast<int64_t>(indices.size());
  TailPaddingResult tail =
      graphTail(cu, cup, localLength, c, cp, n, dummyLength);

  GraphStepOutput output;
  output.tokens = prepareDataKey(input.tokens, mask, indices, tail.localTarget);
  output.labels = prepareDataKey(input.labels, mask, indices, tail.localTarget);
  output.positionIds =
      prepareDataKey(input.positionIds, mask, indices, tail.localTarget);
  output.lossMask =
      prepareDataKey(input.lossMask, mask, indices, tail.localTarget);
  std::vector<uint8_t> localMask =
      unwrap(cpSlice(mask, indices), "megatronGraphStep (S7)");
  output.paddingMask =
      unwrap(mergeTailMask(localMask, localLength, tail.localTarget),
             "megatronGraphStep (S10)");
  output.cuSeqlensPadded = std::move(tail.cuSeqlensPadded);
  output.cuSeqlens = std::move(tail.cuSeqlens);
  output.maxSeqlen = tail.maxSeqlen;
  return output;
}

int32_t sampleStatus(const std::vector<int32_t> &sampleOffsets,
                     const std::vector<int32_t> &sampleLengths,
                     const std::vector<int32_t> &sampleIds, int64_t numSeqs,
                     int64_t poolRows) {
  int64_t n = std::clamp<int64_t>(numSeqs, 0, int64_t(sampleIds.size()));
  int64_t samples =
      int64_t(std::min(sampleOffsets.size(), sampleLengths.size()));
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = sampleIds[std::size_t(i)];
    if (id < 0 || id >= samples)
      return StatusSampleOutOfRange;
    int64_t offset = sampleOffsets[std::size_t(id)];
    int64_t length = sampleLengths[std::size_t(id)];
    if (offset < 0 || length < 0 || offset + length > poolRows)
      return StatusSampleOutOfRange;
  }
  return 0;
}

int32_t rowsStatus(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t numSeqs, int64_t rowsGiven) {
  if (rowsGiven < 0)
    return StatusRowsNotGiven;
  if (cuSeqlensPadded.empty())
    return 0;
  const int64_t last = int64_t(cuSeqlensPadded.size()) - 1;
  const int64_t n = std::clamp<int64_t>(numSeqs, 0, last);
  return cuSeqlensPadded[std::size_t(n)] > rowsGiven ? StatusRowsNotGiven : 0;
}

int32_t numSeqsStatus(const std::vector<int32_t> &cuSeqlensPadded,
                      int64_t numSeqs, int64_t maxSeqs, int64_t maxTokens,
                      bool tailSlot) {
  if (numSeqs < 0 || numSeqs > maxSeqs)
    return StatusNumSeqsOutOfRange;
  if (!tailSlot || numSeqs < maxSeqs || cuSeqlensPadded.empty())
    return 0;
  const std::size_t last = cuSeqlensPadded.size() - 1;
  const int32_t total =
      cuSeqlensPadded[std::min(static_cast<std::size_t>(numSeqs), last)];
  // A tail needs a dummy sequence, and every slot holds a real one.
  return total < maxTokens ? StatusNumSeqsOutOfRange : 0;
}

Result<DroppedCounts> droppedCounts(int32_t status,
                                    const std::vector<int32_t> &cuSeqlens,
                                    int64_t numSeqs) {
  if (cuSeqlens.empty())
    return Status::error(
        "droppedCounts: cu_seqlens has no entry; a cumulative-offset array "
        "has at least one");
  DroppedCounts dropped;
  if (status == 0)
    return dropped;
  const int64_t last = int64_t(cuSeqlens.size()) - 1;
  const int64_t sequences = std::clamp<int64_t>(numSeqs, 0, last);
  dropped.sequences = int32_t(std::min<int64_t>(sequences, kInt32Max));
  dropped.tokens = std::max(cuSeqlens[std::size_t(sequences)], 0);
  return dropped;
}

namespace {

/// graphStepStatus once its preconditions hold (the data keys unread).
int32_t statusOf(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                 int64_t cp, int64_t maxPackedSequences) {
  const std::vector<int32_t> &cu = input.cuSeqlens;
  const std::vector<int32_t> &cup = input.cuSeqlensPadded;
  int32_t status = numSeqsStatus(cup, input.numSeqs, maxPackedSequences,
                                 maxSeqlenPerRank * cp, /*tailSlot=*/true);
  if (input.cpRank < 0 || input.cpRank >= cp)
    status |= StatusCpRankOutOfRange;
  const std::size_t n = static_cast<std::size_t>(
      std::clamp<int64_t>(input.numSeqs, 0, maxPackedSequences));
  if (cu[0] != 0 || cup[0] != 0)
    status |= StatusNotMonotonic;
  for (std::size_t i = 1; i <= n; ++i)
    if (cu[i] < cu[i - 1] || cup[i] < cup[i - 1])
      status |= StatusNotMonotonic;
  if (cup[n] > maxSeqlenPerRank * cp)
    status |= StatusTotalExceedsCapacity;
  if (input.rowsGiven)
    status |= rowsStatus(cup, int64_t(n), *input.rowsGiven);
  if (cp > 1)
    for (std::size_t i = 0; i <= n; ++i)
      if (cup[i] % (2 * cp))
        status |= StatusNotDivisibleBy2Cp;
  for (std::size_t i = 0; i < n; ++i)
    if (int64_t(cu[i + 1]) - cu[i] > int64_t(cup[i + 1]) - cup[i])
      status |= StatusValidExceedsPadded;
  return status;
}

/// The metadata the step pads, for one CP rank: a valid microbatch's first
/// numSeqs+1 entries on its own rank; an invalid one (status != 0) is
/// replaced by an empty one, {0} and {0} on rank 0, whose dummy sequence
/// covers the whole buffer and every row is padding.
struct StepPrefix {
  std::vector<int32_t> cu, cup;
  int64_t rank = 0;
};
StepPrefix stepPrefix(const GraphStepInput &input, int32_t status) {
  if (status != 0)
    return StepPrefix{{0}, {0}, 0};
  const auto end = static_cast<std::ptrdiff_t>(input.numSeqs) + 1;
  return StepPrefix{std::vector<int32_t>(input.cuSeqlens.begin(),
                                         input.cuSeqlens.begin() + end),
                    std::vector<int32_t>(input.cuSeqlensPadded.begin(),
                                         input.cuSeqlensPadded.begin() + end),
                    input.cpRank};
}

} // namespace

int32_t graphStepStatus(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                        int64_t cp, int64_t maxPackedSequences) {
  if (Status problem = checkGraphStepPreconditions(input, maxSeqlenPerRank, cp,
                                                   maxPackedSequences);
      !problem)
    fatal("megatronGraphStep", problem.message());
  return statusOf(input, maxSeqlenPerRank, cp, maxPackedSequences);
}

GraphStepOutput megatronGraphStep(const GraphStepInput &input,
                                  int64_t maxSeqlenPerRank, int64_t cp,
                                  int64_t maxPackedSequences,
                                  std::optional<int64_t> dummyLength) {
  const int32_t status =
      graphStepStatus(input, maxSeqlenPerRank, cp, maxPackedSequences);
  const StepPrefix prefix = stepPrefix(input, status);
  GraphStepOutput output =
      graphStepOnPrefix(input, prefix.cu, prefix.cup, prefix.rank,
                        maxSeqlenPerRank, cp, maxPackedSequences, dummyLength);
  output.status = status;
  return output;
}

GraphStepMetadata graphStepMetadata(const GraphStepInput &input,
                                    int64_t maxSeqlenPerRank, int64_t cp,
                                    int64_t maxPackedSequences,
                                    std::optional<int64_t> dummyLength) {
  if (Status problem = checkGraphStepMetadataPreconditions(
          input, maxSeqlenPerRank, cp, maxPackedSequences);
      !problem)
    fatal("graphStepMetadata", problem.message());
  const int32_t status =
      statusOf(input, maxSeqlenPerRank, cp, maxPackedSequences);
  const StepPrefix prefix = stepPrefix(input, status);
  // The rows of the prefix's CP slice, which graphStepOnPrefix gathers: none
  // for an empty microbatch under CP (its slice is empty).
  const int64_t localLength = cpLocalRows(prefix.cup.back(), cp);
  TailPaddingResult tail =
      graphTail(prefix.cu, prefix.cup, localLength, maxSeqlenPerRank, cp,
                maxPackedSequences, dummyLength);
  GraphStepMetadata metadata;
  metadata.cuSeqlensPadded = std::move(tail.cuSeqlensPadded);
  metadata.cuSeqlens = std::move(tail.cuSeqlens);
  metadata.maxSeqlen = tail.maxSeqlen;
  metadata.status = status;
  return metadata;
}

} // namespace reference
} // namespace thdc
