//===- GraphCapture.cpp - S11, S12 graph inputs and slots -----------------===//
//
// Sections S11 and S12 of docs/semantics.md: the capture seed of the static
// cu inputs of a CUDA graph (graphCaptureCuSeed), the upper bound on
// microbatches, the capture count and the slot liveness probe
// (maxMicrobatchesUpperBound, graphCaptureCount, graphSlotsNeeded).
//
//===----------------------------------------------------------------------===//

#include "reference/GraphCapture.h"
#include "reference/Internal.h"

#include <algorithm>
#include <map>

namespace thdc {
namespace reference {

using namespace internal;

//===----------------------------------------------------------------------===//
// S11. CUDA-graph static inputs
//===----------------------------------------------------------------------===//

std::vector<int32_t> graphCaptureCuSeed(int64_t maxSeqlenPerRank, int64_t cp,
                                        int64_t maxPackedSequences) {
  const std::optional<int64_t> total = checkedMul(maxSeqlenPerRank, cp);
  if (maxSeqlenPerRank < 1 || cp < 1 || maxPackedSequences < 1 || !total ||
      *total > kInt32Max || maxPackedSequences > kInt32Max)
    fatal("graphCaptureCuSeed",
          concat("needs C >= 1, cp >= 1, 1 <= N <= int32 max and C*cp in "
                 "int32 (C = ",
                 maxSeqlenPerRank, ", cp = ", cp, ", N = ", maxPackedSequences,
                 ")"));
  std::vector<int32_t> seed(static_cast<std::size_t>(maxPackedSequences + 1),
                            static_cast<int32_t>(*total));
  seed[0] = 0;
  return seed;
}

//===----------------------------------------------------------------------===//
// S12. Microbatch count and graph slots
//===----------------------------------------------------------------------===//

Result<int64_t> maxMicrobatchesUpperBound(int64_t globalBatchSize, int64_t dp,
                                          int64_t cp, int64_t maxPerRank,
                                          int64_t maxSeqLen,
                                          std::optional<int64_t> vppGroup,
                                          std::optional<int64_t> maxNumSeqs) {
  if (globalBatchSize < 1 || dp < 1 || cp < 1 || maxPerRank < 1 ||
      maxSeqLen < 1 || (vppGroup && *vppGroup < 1))
    return Status::error(
        concat("maxMicrobatchesUpperBound needs positive inputs (GBS = ",
               globalBatchSize, ", dp = ", dp, ", cp = ", cp,
               ", C = ", maxPerRank, ", Lmax = ", maxSeqLen,
               ", vppGroup = ", optionalToString(vppGroup), ")"));
  const std::optional<int64_t> budget = checkedMul(maxPerRank, cp);
  if (!budget)
    return Status::error(concat("the pack budget C * cp = ", maxPerRank, " * ",
                                cp, " overflows int64"));
  const std::optional<int64_t> multiple = checkedMul(dp, vppGroup.value_or(1));
  if (!multiple)
    return Status::error(concat("the pack multiple dp * vppGroup = ", dp, " * ",
                                *vppGroup, " overflows int64"));
  int64_t perPack = std::max<int64_t>(1, *budget / maxSeqLen);
  if (maxNumSeqs)
    perPack = std::min(perPack, std::max<int64_t>(1, *maxNumSeqs));
  const int64_t packs = (globalBatchSize - 1) / perPack + 1;
  const std::optional<int64_t> rounded = checkedRoundUp(packs, *multiple);
  if (!rounded)
    return Status::error(concat(packs,
                                " packs rounded up to a multiple of "
                                "dp * vppGroup = ",
                                *multiple, " overflows int64"));
  return std::max<int64_t>(1, *rounded / dp);
}

int64_t graphCaptureCount(int64_t runtimeNumMicrobatches, int64_t upperBound,
                          bool useRuntimeCount) {
  if (useRuntimeCount)
    return runtimeNumMicrobatches;
  return std::max(runtimeNumMicrobatches, upperBound);
}

Result<int64_t> graphSlotsNeeded(const std::vector<int64_t> &order) {
  std::map<int64_t, int64_t> outstanding;
  int64_t need = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] == 0 || order[i] == std::numeric_limits<int64_t>::min())
      return Status::error(concat("order[", i, "] = ", order[i],
                                  " is not a (1-based) chunk id"));
    int64_t &live = outstanding[order[i] > 0 ? order[i] : -order[i]];
    live += order[i] > 0 ? 1 : -1;
    need = std::max(need, live);
  }
  return need;
}

} // namespace reference
} // namespace thdc
