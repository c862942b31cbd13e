//===- CpSlice.cpp - S7 context-parallel slicing --------------------------===//
//
// Section S7 of docs/semantics.md: the rows a context-parallel rank keeps,
// zigzag (dual-chunk) or contiguous (cpPartitionIndices), and the same map
// over all ranks, sequence order to CP-rank order (S14,
// sequenceOrderToCpRankOrder). The gather itself is the template cpSlice
// in Reference.h. Implemented in the compiler by thd.cp_slice.
//
//===----------------------------------------------------------------------===//

#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

Expected<std::vector<int32_t>>
cpPartitionIndices(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t totalTokens, int64_t cp, int64_t rank, CpMode mode) {
  using Result = std::vector<int32_t>;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  if (cp < 1)
    return makeError<Result>(concat("cp = ", cp, " must be >= 1"));
  if (rank < 0 || rank >= cp)
    return makeError<Result>(
        concat("CP rank ", rank, " is outside [0, cp = ", cp, ")"));
  if (totalTokens < 0 || totalTokens > kInt32Max)
    return makeError<Result>(
        concat("total_tokens = ", totalTokens, " is outside [0, int32 max]"));
  Result indices;
  if (cp == 1) {
    for (int64_t t = 0; t < totalTokens; ++t)
      indices.push_back(static_cast<int32_t>(t));
    return indices;
  }
  if (mode == CpMode::Contiguous) {
    if (totalTokens % cp)
      return makeError<Result>(concat("total_tokens = ", totalTokens,
                                      " is not divisible by cp = ", cp,
                                      " (contiguous CP partitioning)"));
    const int64_t local = totalTokens / cp;
    for (int64_t t = 0; t < local; ++t)
      indices.push_back(static_cast<int32_t>(rank * local + t));
    return indices;
  }

  if (cup.size() < 2)
    return makeError<Result>(
        concat("cu_seqlens_padded needs at least 2 entries for zigzag CP "
               "partitioning, got ",
               cup.size(), " (", list(cup), ")"));
  if (totalTokens <= 0)
    return makeError<Result>(concat("total_tokens = ", totalTokens,
                                    " must be > 0 for zigzag CP partitioning "
                                    "with cp = ",
                                    cp));
  // 0 < T <= int32 max: a cp above T/2 cannot divide T in 2*cp chunks, and
  // below it 2*cp cannot overflow.
  if (cp > totalTokens / 2)
    return makeError<Result>(concat("total_tokens = ", totalTokens,
                                    " is not divisible by 2*cp (cp = ", cp,
                                    "): it is smaller"));
  const int64_t twoCp = 2 * cp;
  if (totalTokens % twoCp)
    return makeError<Result>(concat("total_tokens = ", totalTokens,
                                    " is not divisible by 2*cp = ", twoCp));
  for (std::size_t i = 0; i < cup.size(); ++i)
    if (cup[i] % twoCp)
      return makeError<Result>(concat("cu_seqlens_padded[", i, "] = ", cup[i],
                                      " is not divisible by 2*cp = ", twoCp));

  std::vector<int64_t> cs;
  for (int32_t c : cup)
    cs.push_back(c / cp);
  const int64_t b = static_cast<int64_t>(cup.size()) - 1;
  for (int64_t t = 0; t < totalTokens / cp; ++t) {
    // TE's binary search over cs[1..b]; rows past cs[b] end at s = b-1.
    int64_t lo = 1, hi = b;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (cs[mid] <= t)
        lo = mid + 1;
      else
        hi = mid;
    }
    const int64_t s = lo - 1;
    const int64_t halfLength = (cs[s + 1] - cs[s]) / 2;
    const int64_t k = t - cs[s];
    const int64_t chunk = k < halfLength ? rank : 2 * (cp - 1) - rank;
    indices.push_back(
        static_cast<int32_t>(k + cs[s] * cp + halfLength * chunk));
  }
  return indices;
}

Expected<std::vector<int32_t>>
sequenceOrderToCpRankOrder(const std::vector<int32_t> &cuSeqlensPadded,
                           int64_t cp) {
  using Result = std::vector<int32_t>;
  if (cuSeqlensPadded.empty())
    return makeError<Result>("cu_seqlens_padded must have at least one entry");
  if (cp < 1)
    return makeError<Result>(concat("cp = ", cp, " must be >= 1"));
  Result order;
  for (int64_t rank = 0; rank < cp; ++rank) {
    Expected<Result> indices = cpPartitionIndices(
        cuSeqlensPadded, cuSeqlensPadded.back(), cp, rank, CpMode::Zigzag);
    if (!indices)
      return indices;
    order.insert(order.end(), indices->begin(), indices->end());
  }
  return order;
}

} // namespace reference
} // namespace thdc
