//===- Packing.cpp - S4 concatenating a pack ------------------------------===//
//
// Section S4 of docs/semantics.md: cumulative offsets cu_seqlens and
// cu_seqlens_padded, max_seqlen, and the row layout of a pack gathered from
// a pool of samples (cumulativeLengths, packMetadata, packLayout; the
// templates pack and concatSamples live in Packing.h). Implemented in the
// compiler by thd.cu_seqlens, thd.max_seqlen, thd.gather and thd.pack.
//
//===----------------------------------------------------------------------===//

#include "reference/Packing.h"
#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

Result<std::vector<int32_t>>
cumulativeLengths(const std::vector<int32_t> &lengths) {
  using Output = std::vector<int32_t>;
  Output cu = {0};
  int64_t sum = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0)
      return Status::error(
          concat("length lens[", i, "] = ", lengths[i], " is negative"));
    sum += lengths[i];
    if (sum > kInt32Max)
      return Status::error(concat("cumulative length after lens[", i,
                                  "] = ", lengths[i], " is ", sum,
                                  ", outside the int32 range"));
    cu.push_back(static_cast<int32_t>(sum));
  }
  return cu;
}

Result<PackMetadata> packMetadata(const std::vector<int32_t> &validLengths,
                                  const std::vector<int32_t> &paddedLengths) {
  if (validLengths.size() != paddedLengths.size())
    return Status::error(detail::sizeMismatch(
        "packMetadata", "valid lengths", validLengths.size(), "padded lengths",
        paddedLengths.size()));
  for (std::size_t i = 0; i < validLengths.size(); ++i)
    if (validLengths[i] > paddedLengths[i])
      return Status::error(concat("valid length v[", i, "] = ", validLengths[i],
                                  " exceeds padded length p[", i,
                                  "] = ", paddedLengths[i]));
  Result<std::vector<int32_t>> cu = cumulativeLengths(validLengths);
  if (!cu)
    return Status::error("valid lengths: " + cu.status().message());
  Result<std::vector<int32_t>> cup = cumulativeLengths(paddedLengths);
  if (!cup)
    return Status::error("padded lengths: " + cup.status().message());
  PackMetadata metadata;
  metadata.cuSeqlens = std::move(*cu);
  metadata.cuSeqlensPadded = std::move(*cup);
  metadata.maxSeqlen = 0;
  for (int32_t p : paddedLengths)
    metadata.maxSeqlen = std::max(metadata.maxSeqlen, p);
  return metadata;
}

Result<PackLayout> packLayout(std::size_t poolSize,
                              const std::vector<int64_t> &sampleOffsets,
                              const std::vector<int32_t> &sampleIds,
                              const std::vector<int32_t> &validLengths,
                              const std::vector<int32_t> &paddedLengths) {
  if (sampleIds.size() != validLengths.size())
    return Status::error(detail::sizeMismatch("packLayout", "sample ids",
                                              sampleIds.size(), "valid lengths",
                                              validLengths.size()));
  Result<PackMetadata> metadata = packMetadata(validLengths, paddedLengths);
  if (!metadata)
    return metadata.status();

  PackLayout layout;
  for (std::size_t i = 0; i < sampleIds.size(); ++i) {
    int64_t id = sampleIds[i];
    if (id < 0 || id >= static_cast<int64_t>(sampleOffsets.size()))
      return Status::error(concat("sample id sampleIds[", i, "] = ", id,
                                  " is out of range for ", sampleOffsets.size(),
                                  " samples"));
    int64_t offset = sampleOffsets[id];
    int64_t end = offset + validLengths[i];
    if (offset < 0 || end > static_cast<int64_t>(poolSize))
      return Status::error(concat("sequence ", i, " (sample ", id,
                                  ") reads pool rows [", offset, ", ", end,
                                  ") outside the pool of ", poolSize, " rows"));
    for (int64_t k = 0; k < paddedLengths[i]; ++k)
      layout.sourceRows.push_back(k < validLengths[i] ? offset + k : -1);
  }
  layout.metadata = std::move(*metadata);
  return layout;
}

} // namespace reference
} // namespace thdc
