//===- Detail.h - What the planner's sources share --------------*- C++ -*-===//
//
// Private to planner/ (not installed): the message builder and the two
// halves of every plan's per-rank inputs, so that Planner.cpp and
// DynamicCp.cpp check a request and fill sample_ids by one rule. It names
// MicrobatchInputs without including Planner.h, whose source includes it.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PLANNER_DETAIL_H
#define THDC_PLANNER_DETAIL_H

#include "reference/Status.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace thdc {
namespace planner {

struct MicrobatchInputs; // planner/Planner.h

namespace detail {

/// Streams all arguments into one string (error messages).
template <typename... Args> std::string concat(const Args &...args) {
  std::ostringstream stream;
  (stream << ... << args);
  return stream.str();
}

/// Checks a request for the inputs of DP x CP rank `rank` of dp*cp ranks
/// with N = maxPackedSequences (N in [2, int32 max], rank in [0, dp*cp))
/// and sizes inputs.sampleIds to microbatches * (N-1) zeros, checked before
/// it is sized (wrapped, N = 2^61 + 1 with 8 microbatches would size it 0).
/// Returns dp*cp.
Result<int64_t> startInputs(MicrobatchInputs &inputs, int64_t dp, int64_t cp,
                            int64_t rank, int64_t maxPackedSequences,
                            int64_t microbatches);

/// Puts `pack`, microbatch m's sequences for `rank`, into its N-1 entries of
/// inputs.sampleIds and its size into numSeqs; an error when it has more
/// than N-1 sequences (one of the N slots is the dummy sequence's).
Status appendPack(MicrobatchInputs &inputs, std::size_t m,
                  const std::vector<int32_t> &pack, int64_t rank);

} // namespace detail
} // namespace planner
} // namespace thdc

#endif // THDC_PLANNER_DETAIL_H
