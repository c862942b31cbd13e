//===- GraphCapture.h - S11, S12 CUDA-graph inputs and slots ----*- C++ -*-===//
//
// Sections S11 and S12 of docs/semantics.md: the capture seed of the static
// cu inputs, the microbatch bound and the graph slots. Defined in
// reference/GraphCapture.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_GRAPHCAPTURE_H
#define THDC_REFERENCE_GRAPHCAPTURE_H

#include "reference/Status.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace thdc {
namespace reference {

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
Result<int64_t>
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
Result<int64_t> graphSlotsNeeded(const std::vector<int64_t> &order);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_GRAPHCAPTURE_H
