//===- CpSlice.h - S7 context-parallel slicing ------------------*- C++ -*-===//
//
// Section S7 of docs/semantics.md, and the CP rank order of S14: the rows
// each CP rank keeps, their inverse, and the template that gathers them.
// Defined in reference/CpSlice.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_CPSLICE_H
#define THDC_REFERENCE_CPSLICE_H

#include "reference/Common.h"
#include "reference/Status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S7. Context-parallel slicing
//===----------------------------------------------------------------------===//

/// S7: how the token axis is split over CP ranks.
enum class CpMode {
  /// TE dual-chunk ("zigzag"): each sequence is cut into 2*cp chunks and rank
  /// r keeps chunks r and 2*cp-1-r.
  Zigzag,
  /// [dev-later] rank r keeps rows [r*T/cp, (r+1)*T/cp).
  Contiguous,
};

/// S7: the rows a CP rank keeps of a T-row buffer, T/cp: the size of
/// cpPartitionIndices' result wherever it succeeds (for callers that need
/// the count and not the rows).
inline int64_t cpLocalRows(int64_t totalTokens, int64_t cp) {
  return totalTokens / cp;
}

/// S7 (TE `thd_get_partitioned_indices`): the T/cp (cpLocalRows) global
/// rows kept by CP rank `rank`, in local order. cp == 1 is a no-op:
/// identity [0, T), no error even for T == 0. Zigzag (cp > 1): for local row t, s = the sequence found
/// by TE's binary search over cs = cup/cp (rows past cs[n] join the last
/// entry), L = cs[s+1]-cs[s], k = t-cs[s], index = k + cs[s]*cp + (L/2) *
/// (k < L/2 ? rank : 2*cp-2-rank). Zigzag errors (TE checks): fewer than 2
/// entries, T <= 0, T % (2*cp) != 0, an entry of cup not divisible by 2*cp.
/// Contiguous requires T % cp == 0. Always: cp >= 1, 0 <= rank < cp, T >= 0.
/// Golden: cup [0,8,16], T=16, cp=2 -> r0 [0,1,6,7,8,9,14,15].
Result<std::vector<int32_t>>
cpPartitionIndices(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t totalTokens, int64_t cp, int64_t rank,
                   CpMode mode = CpMode::Zigzag);

/// S7: gathers values[indices[i]] (the CP slice x[idx]). Error: an index
/// outside [0, values.size()).
template <typename T>
Result<std::vector<T>> cpSlice(const std::vector<T> &values,
                               const std::vector<int32_t> &indices);

/// S7, the inverse of cpSlice over all ranks: `values` holds the local rows
/// of the `cp` ranks gathered rank after rank, `rowsPerRank` (R) each; the
/// result is the row of `values` that each of the cp*R rows of the packed
/// buffer comes from. With T = min(cup.back(), cp*R) and Tl = T/cp, row
/// g < T of sequence s (the last s < len(cup)-1 with cup[s] <= g) at offset
/// k = g-cup[s]: zigzag, h = max((cup[s+1]-cup[s]) / (2*cp), 1), chunk
/// c = k/h on rank r = c < cp ? c : 2*cp-1-c (clamped into [0, cp)), index
/// r*R + cup[s]/cp + k%h (+ h when c >= cp); contiguous, with
/// q = max(Tl, 1), rank r = min(g/q, cp-1), index r*R + g - r*q. Every such
/// index is clamped into [0, cp*R). Rows g >= T take the ranks' padded
/// tails in rank order: g = T + r*(R-Tl) + j reads r*R + Tl + j. On
/// offsets that cpPartitionIndices accepts with T <= cp*R the result is a
/// permutation and undoes the slices padded to R rows (on others it still
/// indexes inside the gathered rows). cp == 1 is the identity [0, R).
/// Errors: cp < 1, R < 1, cp*R above int32 max, cup empty, not starting at 0
/// or decreasing. Golden: cup [0,4,8,12], cp 2, R 6 ->
/// [0,6,7,1,2,8,9,3,4,10,11,5].
Result<std::vector<int32_t>>
cpUnsliceIndices(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
                 int64_t rowsPerRank, CpMode mode = CpMode::Zigzag);

/// S14 (TE `thd_sequence_order_to_cp_rank_order`): the concatenation over
/// ranks r = 0..cp-1 of cpPartitionIndices(cup, cup[-1], cp, r, Zigzag), i.e.
/// the global rows in CP-rank order. Same errors as cpPartitionIndices.
Result<std::vector<int32_t>>
sequenceOrderToCpRankOrder(const std::vector<int32_t> &cuSeqlensPadded,
                           int64_t cp);

//===----------------------------------------------------------------------===//
// Template definitions
//===----------------------------------------------------------------------===//

template <typename T>
Result<std::vector<T>> cpSlice(const std::vector<T> &values,
                               const std::vector<int32_t> &indices) {
  std::vector<T> result;
  result.reserve(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || static_cast<std::size_t>(indices[i]) >= values.size())
      return Status::error(
          detail::indexOutOfRange(i, indices[i], values.size()));
    result.push_back(values[static_cast<std::size_t>(indices[i])]);
  }
  return result;
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_CPSLICE_H
