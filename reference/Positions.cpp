//===- Positions.cpp - S8 position ids, RoPE rows, seq_idx ----------------===//
//
// Section S8 of docs/semantics.md: model-input position ids (positionIds),
// the RoPE table row of every CP-local row (ropePositions, ropeTableRows)
// and the Mamba sequence index (seqIdx). Implemented in the compiler by
// thd.position_ids, thd.rope_positions and thd.seq_idx.
//
//===----------------------------------------------------------------------===//

#include "reference/Positions.h"
#include "reference/Internal.h"
#include "reference/PaddingMask.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

Result<std::vector<int64_t>>
positionIds(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded) {
  using Output = std::vector<int64_t>;
  if (Status problem = checkCuArray("cu_seqlens_padded", cuSeqlensPadded);
      !problem)
    return Status::error("positionIds: " + problem.message());
  Result<std::vector<uint8_t>> mask = paddingMask(cuSeqlens, cuSeqlensPadded);
  if (!mask)
    return mask.status();
  Output positions;
  for (std::size_t i = 0; i + 1 < cuSeqlensPadded.size(); ++i)
    for (int64_t k = 0; k < cuSeqlensPadded[i + 1] - cuSeqlensPadded[i]; ++k)
      positions.push_back(k);
  return sanitize(positions, *mask, 0);
}

namespace {
/// Per local row: RoPE position (before the absolute shift) and sequence.
struct RopeRows {
  std::vector<int64_t> positions;
  std::vector<int64_t> sequences;
};

Result<RopeRows> computeRopeRows(const std::vector<int32_t> &cuPadded,
                                 int64_t cp, int64_t rank,
                                 int64_t localLength) {
  if (cuPadded.size() < 2)
    return Status::error(
        concat("RoPE positions need a cu array with at least 2 entries, got ",
               list(cuPadded)));
  if (cp < 1 || rank < 0 || rank >= cp)
    return Status::error(
        concat("CP rank ", rank, " is outside [0, cp = ", cp, ")"));
  if (localLength < 0)
    return Status::error(concat("local length ", localLength, " is negative"));
  for (std::size_t i = 1; i < cuPadded.size(); ++i)
    if (cuPadded[i] < cuPadded[i - 1])
      return Status::error(
          concat("cu_seqlens_padded decreases: cu_seqlens_padded[", i,
                 "] = ", cuPadded[i], " < cu_seqlens_padded[", i - 1,
                 "] = ", cuPadded[i - 1]));

  const std::size_t n = cuPadded.size() - 1;
  std::vector<int64_t> localLengths, localCu = {0};
  for (std::size_t i = 0; i < n; ++i) {
    int64_t global = int64_t(cuPadded[i + 1]) - cuPadded[i];
    localLengths.push_back(cp > 1 ? global / cp : global);
    localCu.push_back(localCu.back() + localLengths.back());
  }
  RopeRows rows;
  for (int64_t t = 0; t < localLength; ++t) {
    int64_t s = (std::upper_bound(localCu.begin(), localCu.end(), t) -
                 localCu.begin()) -
                1;
    s = std::clamp<int64_t>(s, 0, static_cast<int64_t>(n) - 1);
    const int64_t k = t - localCu[s];
    const int64_t length = localLengths[s];
    const int64_t half = length / 2;
    int64_t position;
    if (cp == 1)
      position = k;
    else if (k < half)
      position = rank * half + k;
    else
      position = length * cp - (rank + 1) * half + (k - half);
    rows.positions.push_back(position);
    rows.sequences.push_back(s);
  }
  return rows;
}
} // namespace

Result<std::vector<int64_t>>
ropePositions(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength) {
  Result<RopeRows> rows =
      computeRopeRows(cuSeqlensPadded, cp, rank, localLength);
  if (!rows)
    return rows.status();
  return std::move(rows->positions);
}

Result<std::vector<int64_t>>
ropeTableRows(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength, int64_t maxSeqlen,
              int64_t freqRows) {
  using Output = std::vector<int64_t>;
  if (freqRows < 1)
    return Status::error(
        concat("the RoPE table has ", freqRows, " rows; it needs at least 1"));
  Result<RopeRows> rows =
      computeRopeRows(cuSeqlensPadded, cp, rank, localLength);
  if (!rows)
    return rows.status();
  const bool absoluteTable = freqRows > maxSeqlen;
  Output table;
  for (std::size_t t = 0; t < rows->positions.size(); ++t) {
    int64_t position = rows->positions[t];
    if (absoluteTable)
      position += cuSeqlensPadded[rows->sequences[t]];
    table.push_back(std::clamp<int64_t>(position, 0, freqRows - 1));
  }
  return table;
}

Result<std::vector<int32_t>> seqIdx(const std::vector<int32_t> &cuSeqlens,
                                    int64_t totalTokens) {
  using Output = std::vector<int32_t>;
  if (cuSeqlens.empty())
    return Status::error("seqIdx: cu_seqlens must have at least one entry");
  // Rows are counted in int64 from int32 offsets: a total inside int32 keeps
  // every difference (and the result's size) in range.
  if (totalTokens < 0 || totalTokens > kInt32Max)
    return Status::error(concat("seqIdx: total_tokens = ", totalTokens,
                                " is outside [0, int32 max]"));
  std::vector<int64_t> bounds(cuSeqlens.begin(), cuSeqlens.end());
  bounds.push_back(totalTokens);
  Output index;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
    for (int64_t k = 0; k < bounds[i + 1] - bounds[i]; ++k)
      index.push_back(static_cast<int32_t>(i));
  if (static_cast<int64_t>(index.size()) != totalTokens)
    return Status::error(concat("seqIdx: cu_seqlens = ", list(cuSeqlens),
                                " with total_tokens = ", totalTokens,
                                " covers ", index.size(), " rows instead of ",
                                totalTokens));
  return index;
}

} // namespace reference
} // namespace thdc
