//===- GraphStep.h - One microbatch of the graph data step ------*- C++ -*-===//
//
// The composite of S5-S10: one microbatch of the CUDA-graph data step, its
// validation and status bits. Defined in reference/GraphStep.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_GRAPHSTEP_H
#define THDC_REFERENCE_GRAPHSTEP_H

#include "reference/Status.h"
#include "reference/StatusBits.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace thdc {
namespace reference {

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
Result<DroppedCounts> droppedCounts(int32_t status,
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
/// for this input and configuration, as an error naming the values, or
/// success when they all hold: C >= 1, cp >= 1, N >= 1, C even when cp > 1,
/// C*cp within int32 (checked without overflow: C = 2^61 + 4 with cp = 8 is
/// refused, not wrapped to 32), N within int32, data sizes C*cp and cu sizes
/// N+1. Callers that take C, cp, N or the buffers from users check here
/// first: the two functions abort with this message.
Status checkGraphStepPreconditions(const GraphStepInput &input,
                                   int64_t maxSeqlenPerRank, int64_t cp,
                                   int64_t maxPackedSequences);

/// checkGraphStepPreconditions without the data keys' sizes, which
/// graphStepMetadata does not read: C, cp, N as there, cu sizes N+1.
Status checkGraphStepMetadataPreconditions(const GraphStepInput &input,
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
/// Preconditions (checked, abort with a message; checkGraphStepPreconditions
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

/// The metadata megatronGraphStep gives for one CP rank, without the data.
struct GraphStepMetadata {
  /// Global padded offsets with the dummy, N+1 entries.
  std::vector<int32_t> cuSeqlensPadded;
  /// Global valid offsets with the dummy (compact), N+1 entries.
  std::vector<int32_t> cuSeqlens;
  /// Static max_seqlen = C*cp.
  int32_t maxSeqlen = 0;
  /// 0 when valid, else an OR of StatusBit values.
  int32_t status = 0;
};

/// megatronGraphStep's cuSeqlensPadded, cuSeqlens, maxSeqlen and status for
/// `input`, whose data keys are not read (they may be empty): the same
/// validation and S10 tail metadata, with the CP slice's row count in place
/// of its rows, in work linear in N whatever C*cp (a host that plans
/// attention from the offsets alone). Preconditions (checked, abort; see
/// checkGraphStepMetadataPreconditions): those of megatronGraphStep but the
/// data sizes.
GraphStepMetadata
graphStepMetadata(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                  int64_t cp, int64_t maxPackedSequences,
                  std::optional<int64_t> dummyLength = std::nullopt);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_GRAPHSTEP_H
