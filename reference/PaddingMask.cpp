//===- PaddingMask.cpp - S5 padding mask ----------------------------------===//
//
// Section S5 of docs/semantics.md: the padding mask of a packed buffer from
// cu_seqlens and cu_seqlens_padded (paddingMask). Section S6 (sanitize) is
// the template `sanitize` in PaddingMask.h. Implemented in the compiler by
// thd.padding_mask and thd.sanitize.
//
//===----------------------------------------------------------------------===//

#include "reference/PaddingMask.h"
#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

Result<std::vector<uint8_t>>
paddingMask(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded) {
  using Output = std::vector<uint8_t>;
  const std::vector<int32_t> &cu = cuSeqlens;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  if (cu.size() != cup.size())
    return Status::error(detail::sizeMismatch("paddingMask", "cu_seqlens",
                                              cu.size(), "cu_seqlens_padded",
                                              cup.size()));
  if (cu.empty())
    return Status::error("paddingMask: cu_seqlens and cu_seqlens_padded "
                         "must have at least one entry");
  const int64_t total = cup.back();
  if (total < 0)
    return Status::error(concat("paddingMask: cu_seqlens_padded[",
                                cup.size() - 1, "] = ", total,
                                " is negative; the mask length must be "
                                ">= 0"));
  if (total == 0)
    return Output();
  const std::size_t n = cu.size() - 1;
  if (n == 0)
    return Output(static_cast<std::size_t>(total), 1);

  // s = #{entries of cup[1:] <= pos}; a binary search gives the same count on
  // the (normal) non-decreasing arrays. Since cup[n] = total > pos, s < n.
  const bool sorted = std::is_sorted(cup.begin() + 1, cup.end());
  Output mask(static_cast<std::size_t>(total));
  for (int64_t pos = 0; pos < total; ++pos) {
    std::size_t s;
    if (sorted)
      s = std::upper_bound(cup.begin() + 1, cup.end(), pos) - (cup.begin() + 1);
    else
      s = std::count_if(cup.begin() + 1, cup.end(),
                        [pos](int32_t c) { return c <= pos; });
    int64_t validLength = std::max<int64_t>(int64_t(cu[s + 1]) - cu[s], 0);
    mask[pos] = pos >= cup[s] + validLength;
  }
  return mask;
}

} // namespace reference
} // namespace thdc
