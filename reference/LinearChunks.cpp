//===- LinearChunks.cpp - S15 linear-attention chunk metadata -------------===//
//
// Section S15 of docs/semantics.md: flash-linear-attention's chunk indices
// and chunk offsets (its fla/ops/utils/index.py, prepare_chunk_indices and
// prepare_chunk_offsets, 0.6.0) of a cu array, at a static row count with a
// sentinel past the real chunks.
//
//===----------------------------------------------------------------------===//

#include "reference/LinearChunks.h"
#include "reference/Internal.h"

#include <limits>

namespace thdc {
namespace reference {

using namespace internal;

int64_t linearChunkCapacity(int64_t rows, int64_t n, int64_t chunkSize) {
  if (rows < 0 || n < 1 || chunkSize < 1)
    fatal("linearChunkCapacity", "rows >= 0, N >= 1 and BT >= 1 required");
  return (rows + chunkSize - 1) / chunkSize + n;
}

Result<LinearChunks> linearChunks(const std::vector<int32_t> &cu,
                                  int64_t chunkSize, int64_t capacity) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (chunkSize < 1 || (chunkSize & (chunkSize - 1)))
    return Status::error(concat("linearChunks: the chunk size BT = ", chunkSize,
                                " is not a power of two"));
  if (cu.size() < 2)
    return Status::error(concat("linearChunks: cu has ", cu.size(),
                                " entries; it needs N+1 >= 2"));
  if (Status problem = checkCuArray("cu", cu); !problem)
    return Status::error("linearChunks: " + problem.message());
  if (capacity < 0 || capacity > kInt32Max / 2)
    return Status::error(concat("linearChunks: the capacity ", capacity,
                                " rows is outside [0, int32 max / 2]"));
  const std::size_t n = cu.size() - 1;
  LinearChunks out;
  out.chunkOffsets.assign(n + 1, 0);
  int64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t length = int64_t(cu[i + 1]) - cu[i];
    total += (length + chunkSize - 1) / chunkSize;
    if (total > capacity)
      return Status::error(
          concat("linearChunks: the sequences of cu = ", list(cu), " have ",
                 total, "+ chunks of ", chunkSize, " rows, more than the ",
                 capacity, " rows of the chunk capacity"));
    out.chunkOffsets[i + 1] = int32_t(total);
  }
  out.chunkCount = int32_t(total);
  const int32_t last = int32_t(n - 1);
  const int32_t past =
      int32_t(out.chunkOffsets[n] - out.chunkOffsets[n - 1]);
  out.chunkIndices.reserve(std::size_t(capacity) * 2);
  for (std::size_t i = 0; i < n; ++i)
    for (int32_t t = 0; t < out.chunkOffsets[i + 1] - out.chunkOffsets[i];
         ++t) {
      out.chunkIndices.push_back(int32_t(i));
      out.chunkIndices.push_back(t);
    }
  while (out.chunkIndices.size() < std::size_t(capacity) * 2) {
    out.chunkIndices.push_back(last);
    out.chunkIndices.push_back(past);
  }
  return out;
}

} // namespace reference
} // namespace thdc
