//===- PackStep.cpp - S1-S10 one microbatch packed from a pool ------------===//
//
// The composite that examples/pack_microbatch.mlir implements: from a pool
// of samples and the ids the planner chose, one CP rank's prepared
// microbatch in graph mode (S1 alignment, S4 packing, S5 mask, S6
// sanitising, S8 position ids, S7 zigzag slice, S10 tail padding), with the
// validation of thd.validate as status bits. The steps are those of this
// library, composed exactly as the pipeline composes its ops; the compiled
// pipeline is tested against it (test/unit/PackDifferentialTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "reference/PackStep.h"
#include "reference/Alignment.h"
#include "reference/Internal.h"
#include "reference/Packing.h"
#include "reference/Positions.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

namespace {

/// The configuration and buffer sizes the pipeline cannot have, as an
/// error; success when they are those of a pipeline with these parameters.
Status checkPackStepShapes(const PackStepInput &input, int64_t c, int64_t cp,
                           int64_t n) {
  if (Status problem = checkStepConfiguration(c, cp, n); !problem)
    return problem;
  if (input.labelPool.size() != input.tokenPool.size() ||
      input.lossMaskPool.size() != input.tokenPool.size())
    return Status::error(concat(
        "token_pool/label_pool/loss_mask_pool have ", input.tokenPool.size(),
        "/", input.labelPool.size(), "/", input.lossMaskPool.size(),
        " rows; all must have the pool's P rows"));
  if (input.sampleOffsets.size() != input.sampleLengths.size() ||
      input.sampleLengths.empty())
    return Status::error(
        concat("sample_offsets/sample_lengths have ",
               input.sampleOffsets.size(), "/", input.sampleLengths.size(),
               " entries; both must have the pool's S >= 1 entries"));
  if (int64_t(input.sampleIds.size()) != n - 1)
    return Status::error(concat("sample_ids has ", input.sampleIds.size(),
                                " entries; it must have N-1 = ", n - 1));
  return Status();
}

} // namespace

Result<PackStepOutput> packMicrobatchStep(const PackStepInput &input,
                                          int64_t maxSeqlenPerRank, int64_t cp,
                                          int64_t maxPackedSequences) {
  const int64_t C = maxSeqlenPerRank, N = maxPackedSequences;
  if (Status problem = checkPackStepShapes(input, C, cp, N); !problem)
    return Status::error("packMicrobatchStep: " + problem.message());
  Result<int64_t> granularity = padGranularity(cp, 1, false);
  if (!granularity)
    return Status::error("S1: " + granularity.status().message());

  // thd.gather: the lengths of the first num_seqs chosen samples (at most
  // the N-1 ids there are), each id clamped into the pool's samples.
  const std::size_t gathered =
      std::size_t(std::clamp<int64_t>(input.numSeqs, 0, N - 1));
  std::vector<int32_t> ids(input.sampleIds.begin(),
                           input.sampleIds.begin() + gathered);
  std::vector<int32_t> valid;
  for (int32_t &id : ids) {
    id = std::clamp<int32_t>(id, 0, int32_t(input.sampleLengths.size()) - 1);
    valid.push_back(input.sampleLengths[std::size_t(id)]);
  }
  // thd.align_lengths, thd.cu_seqlens.
  Result<std::vector<int32_t>> padded = alignLengths(valid, *granularity);
  if (!padded)
    return Status::error("S1: " + padded.status().message());
  Result<std::vector<int32_t>> cu = cumulativeLengths(valid);
  Result<std::vector<int32_t>> cup = cumulativeLengths(*padded);
  if (!cu || !cup)
    return Status::error(
        "S4: " + (!cu ? cu.status().message() : cup.status().message()));

  // thd.validate: the graph step's checks on the cu arrays (padded to N+1
  // entries by repeats) with the raw num_seqs and cp_rank, and the chosen
  // samples against the pool. A nonzero status leaves no sequence, and
  // rank 0, for the steps below: the outputs of an empty microbatch.
  GraphStepInput statusInput;
  statusInput.tokens.assign(std::size_t(C * cp), 0);
  statusInput.labels = statusInput.positionIds = statusInput.tokens;
  statusInput.lossMask.assign(std::size_t(C * cp), 0.0f);
  statusInput.cuSeqlens = *cu;
  statusInput.cuSeqlens.resize(std::size_t(N + 1), cu->back());
  statusInput.cuSeqlensPadded = *cup;
  statusInput.cuSeqlensPadded.resize(std::size_t(N + 1), cup->back());
  statusInput.numSeqs = input.numSeqs;
  statusInput.cpRank = input.cpRank;
  // The pipeline chooses at most N-1 samples (its validate says max_seqs
  // "N-1" without tail_slot): N sequences are out of range even without a
  // tail, which graphStepStatus alone would accept.
  const int32_t status =
      graphStepStatus(statusInput, C, cp, N) |
      numSeqsStatus(statusInput.cuSeqlensPadded, input.numSeqs, N - 1, C * cp,
                    /*tailSlot=*/false) |
      sampleStatus(input.sampleOffsets, input.sampleLengths, input.sampleIds,
                   input.numSeqs, int64_t(input.tokenPool.size()));
  int64_t rank = input.cpRank;
  if (status != 0) {
    ids.clear();
    valid.clear();
    padded->clear();
    *cu = {0};
    *cup = {0};
    rank = 0;
  }

  // thd.pack (S4, pad 0) and thd.position_ids (S8); the rest (S5 mask, S6
  // sanitise, S7 zigzag slice, S10 tail) is the graph step's composition on
  // the packed buffer.
  const std::vector<int64_t> offsets(input.sampleOffsets.begin(),
                                     input.sampleOffsets.end());
  Result<PackedBuffer<int64_t>> tokens =
      pack(input.tokenPool, offsets, ids, valid, *padded, 0);
  Result<PackedBuffer<int64_t>> labels =
      pack(input.labelPool, offsets, ids, valid, *padded, 0);
  Result<PackedBuffer<float>> lossMask =
      pack(input.lossMaskPool, offsets, ids, valid, *padded, 0.0f);
  if (!tokens || !labels || !lossMask)
    return Status::error("S4: " + (!tokens   ? tokens.status().message()
                                   : !labels ? labels.status().message()
                                             : lossMask.status().message()));
  Result<std::vector<int64_t>> positions = positionIds(*cu, *cup);
  if (!positions)
    return Status::error("S8: " + positions.status().message());
  GraphStepInput packed;
  packed.tokens = std::move(tokens->values);
  packed.labels = std::move(labels->values);
  packed.positionIds = std::move(*positions);
  packed.lossMask = std::move(lossMask->values);
  PackStepOutput output =
      graphStepOnPrefix(packed, *cu, *cup, rank, C, cp, N);
  output.status = status;
  return output;
}

} // namespace reference
} // namespace thdc
