//===- PackStep.h - One microbatch packed from a pool -----------*- C++ -*-===//
//
// The composite of S1-S10: one microbatch packed from a pool of samples,
// with the layout of the graph step's. Defined in reference/PackStep.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_PACKSTEP_H
#define THDC_REFERENCE_PACKSTEP_H

#include "reference/GraphStep.h"
#include "reference/Status.h"

#include <cstdint>
#include <vector>

namespace thdc {
namespace reference {

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
Result<PackStepOutput> packMicrobatchStep(const PackStepInput &input,
                                          int64_t maxSeqlenPerRank, int64_t cp,
                                          int64_t maxPackedSequences);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_PACKSTEP_H
