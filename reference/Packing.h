//===- Packing.h - S4 concatenating a pack ----------------------*- C++ -*-===//
//
// Section S4 of docs/semantics.md: the metadata and layout of a pack and the
// templates that build it. Defined in reference/Packing.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_PACKING_H
#define THDC_REFERENCE_PACKING_H

#include "reference/Common.h"
#include "reference/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S4. Concatenating a pack into one buffer
//===----------------------------------------------------------------------===//

/// S4: [0, l0, l0+l1, ...] (n+1 entries). Errors: a negative length, a sum
/// outside int32.
Result<std::vector<int32_t>>
cumulativeLengths(const std::vector<int32_t> &lengths);

/// S4: metadata of a packed microbatch.
struct PackMetadata {
  /// cu_seqlens = [0] ++ cumsum(v) (valid, compact coordinates).
  std::vector<int32_t> cuSeqlens;
  /// cu_seqlens_padded = [0] ++ cumsum(p) (physical offsets).
  std::vector<int32_t> cuSeqlensPadded;
  /// max(p) over the padded lengths (0 for an empty pack).
  int32_t maxSeqlen = 0;
};

/// S4: cu_seqlens, cu_seqlens_padded and max_seqlen of a pack with valid
/// lengths v and padded lengths p. Errors: size mismatch, negative lengths,
/// v[i] > p[i], int32 overflow. An empty pack gives [0], [0], 0 (the PR
/// crashes there instead; see the edge-case matrix of docs/semantics.md).
Result<PackMetadata> packMetadata(const std::vector<int32_t> &validLengths,
                                  const std::vector<int32_t> &paddedLengths);

/// S4: how a pack is gathered from a pool of samples.
struct PackLayout {
  /// Metadata of the pack (cu, cup, max_seqlen).
  PackMetadata metadata;
  /// For every output row (sum(p) rows): the pool row it copies, or -1 for a
  /// padding row (k >= v[i] within sequence i).
  std::vector<int64_t> sourceRows;
};

/// S4: layout of the pack built from a flat pool of `poolSize` rows, where
/// sample s starts at sampleOffsets[s]: sequence i (sample sampleIds[i])
/// occupies output rows [cup[i], cup[i+1]), row cup[i]+k copies pool row
/// sampleOffsets[sampleIds[i]] + k for k < v[i] and is padding for
/// v[i] <= k < p[i]. Errors: size mismatch, v > p, negative values, sample id
/// out of range, a read past the end of the pool.
Result<PackLayout> packLayout(std::size_t poolSize,
                              const std::vector<int64_t> &sampleOffsets,
                              const std::vector<int32_t> &sampleIds,
                              const std::vector<int32_t> &validLengths,
                              const std::vector<int32_t> &paddedLengths);

/// S4: one packed token-like buffer plus its metadata.
template <typename T> struct PackedBuffer {
  /// The buffer of sum(p) rows.
  std::vector<T> values;
  /// cu_seqlens, cu_seqlens_padded, max_seqlen.
  PackMetadata metadata;
};

/// S4: packs the chosen samples of `pool` into one buffer (see packLayout),
/// writing `padValue` into padding rows. Golden: pool A,B,C with v=[3,2,4],
/// p=[4,4,4] -> [11,12,13,P,21,22,P,P,31,32,33,34], cu [0,3,5,9],
/// cup [0,4,8,12], max_seqlen 4.
template <typename T>
Result<PackedBuffer<T>>
pack(const std::vector<T> &pool, const std::vector<int64_t> &sampleOffsets,
     const std::vector<int32_t> &sampleIds,
     const std::vector<int32_t> &validLengths,
     const std::vector<int32_t> &paddedLengths,
     const typename detail::Identity<T>::type &padValue);

/// S4 (plain form, `_pack_sequences`): concatenates already padded samples
/// (sample i has exactly p[i] rows) in pack order, keeping their contents.
/// Errors: a sample whose size differs from p[i], plus packMetadata's.
template <typename T>
Result<PackedBuffer<T>>
concatSamples(const std::vector<std::vector<T>> &samples,
              const std::vector<int32_t> &validLengths,
              const std::vector<int32_t> &paddedLengths);

//===----------------------------------------------------------------------===//
// Template definitions
//===----------------------------------------------------------------------===//

template <typename T>
Result<PackedBuffer<T>>
pack(const std::vector<T> &pool, const std::vector<int64_t> &sampleOffsets,
     const std::vector<int32_t> &sampleIds,
     const std::vector<int32_t> &validLengths,
     const std::vector<int32_t> &paddedLengths,
     const typename detail::Identity<T>::type &padValue) {
  Result<PackLayout> layout = packLayout(pool.size(), sampleOffsets, sampleIds,
                                         validLengths, paddedLengths);
  if (!layout)
    return layout.status();
  PackedBuffer<T> result;
  result.values.reserve(layout->sourceRows.size());
  for (int64_t row : layout->sourceRows)
    result.values.push_back(row < 0 ? padValue
                                    : pool[static_cast<std::size_t>(row)]);
  result.metadata = std::move(layout->metadata);
  return result;
}

template <typename T>
Result<PackedBuffer<T>>
concatSamples(const std::vector<std::vector<T>> &samples,
              const std::vector<int32_t> &validLengths,
              const std::vector<int32_t> &paddedLengths) {
  if (samples.size() != paddedLengths.size())
    return Status::error(detail::sizeMismatch("concatSamples", "samples",
                                              samples.size(), "padded lengths",
                                              paddedLengths.size()));
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (paddedLengths[i] < 0 ||
        samples[i].size() != static_cast<std::size_t>(paddedLengths[i]))
      return Status::error(
          "sample " + std::to_string(i) + " has " +
          std::to_string(samples[i].size()) + " rows but its padded length p[" +
          std::to_string(i) + "] = " + std::to_string(paddedLengths[i]));
  Result<PackMetadata> metadata = packMetadata(validLengths, paddedLengths);
  if (!metadata)
    return metadata.status();
  PackedBuffer<T> result;
  for (const std::vector<T> &sample : samples)
    result.values.insert(result.values.end(), sample.begin(), sample.end());
  result.metadata = std::move(*metadata);
  return result;
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_PACKING_H
