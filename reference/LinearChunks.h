//===- LinearChunks.h - S15 linear-attention chunk metadata -----*- C++ -*-===//
//
// Section S15 of docs/semantics.md: the chunk metadata the varlen chunked
// kernels of linear attention (flash-linear-attention's Gated DeltaNet and
// Kimi Delta Attention) derive from cu_seqlens, at a static capacity.
// Defined in reference/LinearChunks.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_LINEARCHUNKS_H
#define THDC_REFERENCE_LINEARCHUNKS_H

#include "reference/Status.h"

#include <cstdint>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S15. Linear-attention chunk metadata
//===----------------------------------------------------------------------===//

/// S15: the chunk metadata of chunk size BT over the N sequences of a cu
/// array (N+1 entries: the real sequences, the dummy over the tail and the
/// zero-length ones after it, as the step's cu_seqlens_padded has them).
struct LinearChunks {
  /// capacity * 2 entries: row r is (sequence i, chunk t within it) for
  /// r < chunkCount, sequence-major (r = chunkOffsets[i] + t); every row
  /// after is the sentinel (N-1, ceil(len_{N-1}/BT)): one chunk past the
  /// last sequence's end, a chunk of no rows, which the consumers' masks
  /// skip.
  std::vector<int32_t> chunkIndices;
  /// N+1 entries: chunkOffsets[0] = 0, chunkOffsets[i+1] = chunkOffsets[i] +
  /// ceil(len_i/BT).
  std::vector<int32_t> chunkOffsets;
  /// chunkOffsets[N]: the rows of chunkIndices that name a chunk.
  int32_t chunkCount = 0;
};

/// S15: the static row count of chunkIndices for a step of `rows` rows
/// (C*cp) and N sequences: ceil(rows/BT) + N (each sequence adds at most one
/// partial chunk to the full ones). Requires rows >= 0, N >= 1, BT >= 1.
int64_t linearChunkCapacity(int64_t rows, int64_t n, int64_t chunkSize);

/// S15: the chunk metadata of `cu` (N+1 entries) for chunk size chunkSize
/// at `capacity` rows. Errors: chunkSize not a power of two, fewer than 2
/// entries, cu not starting at 0 or decreasing, more chunks than capacity,
/// capacity or the sentinel's chunk past int32. Golden: cu [0,5,64,200,
/// 200,200], BT 64, capacity 8 -> rows (0,0) (1,0) (2,0) (2,1) (2,2), then
/// (4,0) x 3; offsets [0,1,2,5,5,5]; 5 chunks.
Result<LinearChunks> linearChunks(const std::vector<int32_t> &cu,
                                  int64_t chunkSize, int64_t capacity);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_LINEARCHUNKS_H
