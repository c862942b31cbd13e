//===- CpSlice.cpp - S7 context-parallel slicing --------------------------===//
//
// Section S7 of docs/semantics.md: the rows a context-parallel rank keeps,
// zigzag (dual-chunk) or contiguous (cpPartitionIndices), and the same map
// over all ranks, sequence order to CP-rank order (S14,
// sequenceOrderToCpRankOrder), and back: the rows of the ranks' padded
// slices gathered rank after rank, in sequence order (cpUnsliceIndices).
// The gather itself is the template cpSlice in CpSlice.h. Implemented in
// the compiler by thd.cp_slice and thd.cp_unslice.
//
//===----------------------------------------------------------------------===//

#include "reference/CpSlice.h"
#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

Result<std::vector<int32_t>>
cpPartitionIndices(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t totalTokens, int64_t cp, int64_t rank, CpMode mode) {
  using Output = std::vector<int32_t>;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  if (cp < 1)
    return Status::error(concat("cp = ", cp, " must be >= 1"));
  if (rank < 0 || rank >= cp)
    return Status::error(
        concat("CP rank ", rank, " is outside [0, cp = ", cp, ")"));
  if (totalTokens < 0 || totalTokens > kInt32Max)
    return Status::error(
        concat("total_tokens = ", totalTokens, " is outside [0, int32 max]"));
  Output indices;
  if (cp == 1) {
    for (int64_t t = 0; t < cpLocalRows(totalTokens, cp); ++t)
      indices.push_back(static_cast<int32_t>(t));
    return indices;
  }
  if (mode == CpMode::Contiguous) {
    if (totalTokens % cp)
      return Status::error(concat("total_tokens = ", totalTokens,
                                  " is not divisible by cp = ", cp,
                                  " (contiguous CP partitioning)"));
    const int64_t local = cpLocalRows(totalTokens, cp);
    for (int64_t t = 0; t < local; ++t)
      indices.push_back(static_cast<int32_t>(rank * local + t));
    return indices;
  }

  if (cup.size() < 2)
    return Status::error(
        concat("cu_seqlens_padded needs at least 2 entries for zigzag CP "
               "partitioning, got ",
               cup.size(), " (", list(cup), ")"));
  if (totalTokens <= 0)
    return Status::error(concat("total_tokens = ", totalTokens,
                                " must be > 0 for zigzag CP partitioning "
                                "with cp = ",
                                cp));
  // 0 < T <= int32 max: a cp above T/2 cannot divide T in 2*cp chunks, and
  // below it 2*cp cannot overflow.
  if (cp > totalTokens / 2)
    return Status::error(concat("total_tokens = ", totalTokens,
                                " is not divisible by 2*cp (cp = ", cp,
                                "): it is smaller"));
  const int64_t twoCp = 2 * cp;
  if (totalTokens % twoCp)
    return Status::error(concat("total_tokens = ", totalTokens,
                                " is not divisible by 2*cp = ", twoCp));
  for (std::size_t i = 0; i < cup.size(); ++i)
    if (cup[i] % twoCp)
      return Status::error(concat("cu_seqlens_padded[", i, "] = ", cup[i],
                                  " is not divisible by 2*cp = ", twoCp));

  std::vector<int64_t> cs;
  for (int32_t c : cup)
    cs.push_back(c / cp);
  const int64_t b = static_cast<int64_t>(cup.size()) - 1;
  for (int64_t t = 0; t < cpLocalRows(totalTokens, cp); ++t) {
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

Result<std::vector<int32_t>>
cpUnsliceIndices(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
                 int64_t rowsPerRank, CpMode mode) {
  using Output = std::vector<int32_t>;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  if (cp < 1)
    return Status::error(concat("cp = ", cp, " must be >= 1"));
  if (rowsPerRank < 1)
    return Status::error(
        concat("rows_per_rank = ", rowsPerRank, " must be >= 1"));
  if (rowsPerRank > kInt32Max / cp)
    return Status::error(concat("cp * rows_per_rank = ", cp, " * ", rowsPerRank,
                                " is above int32 max"));
  if (Status problem = checkCuArray("cu_seqlens_padded", cup); !problem)
    return problem;
  const int64_t rows = cp * rowsPerRank;
  Output indices;
  indices.reserve(static_cast<std::size_t>(rows));
  if (cp == 1) {
    for (int64_t g = 0; g < rows; ++g)
      indices.push_back(static_cast<int32_t>(g));
    return indices;
  }
  const int64_t total = std::clamp<int64_t>(cup.back(), 0, rows);
  const int64_t localTotal = total / cp;
  const int64_t tailWidth = std::max<int64_t>(rowsPerRank - localTotal, 1);
  const auto sequenceEnd = cup.end() - 1; // s ranges over [0, len-2]
  for (int64_t g = 0; g < rows; ++g) {
    if (g >= total) {
      // The ranks' tails past Tl, rank after rank.
      const int64_t past = g - total, rank = past / tailWidth;
      indices.push_back(static_cast<int32_t>(rank * rowsPerRank + localTotal +
                                             past % tailWidth));
      continue;
    }
    int64_t rank, local;
    if (mode == CpMode::Contiguous) {
      const int64_t share = std::max<int64_t>(localTotal, 1);
      rank = std::min(g / share, cp - 1);
      local = g - rank * share;
    } else {
      // g < total <= cup.back(), so cup has a sequence covering g.
      const int64_t s =
          std::upper_bound(cup.begin(), sequenceEnd, g) - cup.begin() - 1;
      const int64_t start = cup[s], length = cup[s + 1] - start;
      const int64_t half = std::max<int64_t>(length / (2 * cp), 1);
      const int64_t k = g - start, chunk = k / half;
      const bool firstHalf = chunk < cp;
      rank = std::clamp<int64_t>(firstHalf ? chunk : 2 * cp - 1 - chunk, 0,
                                 cp - 1);
      local = start / cp + k % half + (firstHalf ? 0 : half);
    }
    indices.push_back(static_cast<int32_t>(
        std::clamp<int64_t>(rank * rowsPerRank + local, 0, rows - 1)));
  }
  return indices;
}

Result<std::vector<int32_t>>
sequenceOrderToCpRankOrder(const std::vector<int32_t> &cuSeqlensPadded,
                           int64_t cp) {
  using Output = std::vector<int32_t>;
  if (cuSeqlensPadded.empty())
    return Status::error("cu_seqlens_padded must have at least one entry");
  if (cp < 1)
    return Status::error(concat("cp = ", cp, " must be >= 1"));
  Output order;
  for (int64_t rank = 0; rank < cp; ++rank) {
    Result<Output> indices = cpPartitionIndices(
        cuSeqlensPadded, cuSeqlensPadded.back(), cp, rank, CpMode::Zigzag);
    if (!indices)
      return indices;
    order.insert(order.end(), indices->begin(), indices->end());
  }
  return order;
}

} // namespace reference
} // namespace thdc
