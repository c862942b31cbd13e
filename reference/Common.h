//===- Common.h - Helpers shared by the sections ----------------*- C++ -*-===//
//
// roundUp and maxSeqlenFromCu, which several sections use, and the messages
// the header templates report (detail::). Defined in reference/Common.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_COMMON_H
#define THDC_REFERENCE_COMMON_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// Common helpers
//===----------------------------------------------------------------------===//

/// Returns ceil(value / multiple) * multiple (round_up in
/// docs/semantics.md). Requires multiple > 0 and a result that fits int64
/// (checkedRoundUp, reference/CheckedArithmetic.h, reports one that does
/// not); rounds towards +infinity for negative values too.
int64_t roundUp(int64_t value, int64_t multiple);

/// Returns the largest difference between consecutive entries of a cu array,
/// i.e. the longest sequence (S4 max_seqlen, S13); 0 when there are fewer
/// than two entries.
int32_t maxSeqlenFromCu(const std::vector<int32_t> &cuSeqlens);

namespace detail {
/// Blocks template argument deduction through a parameter (C++20's
/// std::type_identity), so that `sanitize(tokens, mask, 0)` deduces T from
/// the vector only.
template <typename T> struct Identity {
  using type = T;
};
/// Message for two arrays whose sizes must agree.
std::string sizeMismatch(const char *what, const char *firstName,
                         std::size_t firstSize, const char *secondName,
                         std::size_t secondSize);
/// Message for a target length shorter than the input ("refusing to
/// silently truncate").
std::string truncationRefused(std::size_t length, int64_t targetLength);
/// Message for a gather index outside [0, size).
std::string indexOutOfRange(std::size_t position, int64_t index,
                            std::size_t size);
} // namespace detail

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_COMMON_H
