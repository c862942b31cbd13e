//===- step_input.h - a generated microbatch as the reference's input -*- C++
//-*-===//
//
// Shared by the benchmark's checks: the microbatch of bench/inputs.h as
// reference::megatronGraphStep takes it, for one CP rank.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_BENCH_STEP_INPUT_H
#define THDC_BENCH_STEP_INPUT_H

#include "bench/inputs.h"
#include "reference/Reference.h"

namespace thdc {
namespace bench {

/// The pipeline input of `mb` for CP rank `rank`.
inline reference::GraphStepInput toGraphStepInput(const Microbatch &mb,
                                                  int32_t rank) {
  reference::GraphStepInput input;
  input.tokens = mb.tokens;
  input.labels = mb.labels;
  input.positionIds = mb.positionIds;
  input.lossMask = mb.lossMask;
  input.cuSeqlens = mb.cuSeqlens;
  input.cuSeqlensPadded = mb.cuSeqlensPadded;
  input.numSeqs = mb.numSeqs;
  input.cpRank = rank;
  return input;
}

} // namespace bench
} // namespace thdc

#endif // THDC_BENCH_STEP_INPUT_H
