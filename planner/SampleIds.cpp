//===- SampleIds.cpp - Every plan's per-rank inputs, shared ---------------===//
//
// The two halves of microbatchInputs that Planner.cpp and DynamicCp.cpp
// share (planner/Detail.h declares them): the request's checks and the
// placement of one pack into sample_ids.
//
//===----------------------------------------------------------------------===//

#include "planner/Detail.h"
#include "planner/Planner.h"

#include "reference/CheckedArithmetic.h"

#include <algorithm>
#include <limits>

using namespace thdc;
using namespace thdc::planner;
using thdc::planner::detail::concat;

Result<int64_t> thdc::planner::detail::startInputs(MicrobatchInputs &inputs,
                                                   int64_t dp, int64_t cp,
                                                   int64_t rank,
                                                   int64_t maxPackedSequences,
                                                   int64_t microbatches) {
  if (maxPackedSequences < 2)
    return Status::error(
        concat("thd_max_packed_sequences N = ", maxPackedSequences,
               " must be >= 2: sample_ids has N-1 entries and one of the N "
               "slots is the dummy sequence's"));
  // The pipeline's N is at most int32 max (its cu arrays have N+1 int32
  // entries).
  if (maxPackedSequences > std::numeric_limits<int32_t>::max())
    return Status::error(
        concat("thd_max_packed_sequences N = ", maxPackedSequences,
               " is outside the int32 range of the pipeline's N"));
  const std::optional<int64_t> ranks = reference::checkedMul(dp, cp);
  if (!ranks)
    return Status::error(
        concat("the plan's dp*cp = ", dp, "*", cp, " overflows int64"));
  if (rank < 0 || rank >= *ranks)
    return Status::error(concat("rank ", rank, " is outside [0, dp*cp = ", dp,
                                "*", cp, " = ", *ranks, ")"));
  inputs.slots = maxPackedSequences - 1;
  const std::optional<int64_t> entries =
      reference::checkedMul(microbatches, inputs.slots);
  if (!entries || uint64_t(*entries) > inputs.sampleIds.max_size())
    return Status::error(concat("sample_ids of ", microbatches,
                                " microbatches * (N-1 = ", inputs.slots,
                                ") entries is more than a buffer can hold"));
  inputs.sampleIds.assign(std::size_t(*entries), 0);
  return *ranks;
}

Status thdc::planner::detail::appendPack(MicrobatchInputs &inputs,
                                         std::size_t m, const Pack &pack,
                                         int64_t rank) {
  if (int64_t(pack.size()) > inputs.slots)
    return Status::error(
        concat("microbatch ", m, " has ", pack.size(), " sequences on rank ",
               rank, ", more than N-1 = ", inputs.slots,
               " (one of the N slots is the dummy sequence's): plan with "
               "max_packed_sequences = N, an alignment and the dummy tail"));
  std::copy(pack.begin(), pack.end(),
            inputs.sampleIds.begin() + m * std::size_t(inputs.slots));
  inputs.numSeqs.push_back(int32_t(pack.size()));
  return Status();
}
