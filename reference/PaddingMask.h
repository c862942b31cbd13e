//===- PaddingMask.h - S5 padding mask, S6 sanitising -----------*- C++ -*-===//
//
// Sections S5 and S6 of docs/semantics.md: the padding mask of a packed
// buffer and the template that sanitises its padded rows. Defined in
// reference/PaddingMask.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_PADDINGMASK_H
#define THDC_REFERENCE_PADDINGMASK_H

#include "reference/Common.h"
#include "reference/Status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S5. Padding mask
//===----------------------------------------------------------------------===//

/// S5 (`_build_thd_padding_mask`): mask of cup[-1] rows, 1 = padding. Row
/// pos belongs to sequence s = #{entries of cup[1:] <= pos} and is padding
/// iff pos >= cup[s] + max(cu[s+1] - cu[s], 0). cup[-1] == 0 -> empty mask;
/// a single entry -> all padding; zero-length sequences are skipped; v > p
/// gives no padding in that slot. Errors: size mismatch, empty arrays,
/// negative cup[-1]. Golden: cu [0,3,5,9], cup [0,4,8,12] ->
/// [0,0,0,1,0,0,1,1,0,0,0,0].
Result<std::vector<uint8_t>>
paddingMask(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded);

//===----------------------------------------------------------------------===//
// S6. Sanitising padded slots
//===----------------------------------------------------------------------===//

/// S6 (`_sanitize_thd_padding_values`): copy of `values` with every row whose
/// mask entry is 1 replaced by `fill` (0 for tokens, labels, position_ids;
/// 0.0 for loss_mask). Error: size mismatch.
template <typename T>
Result<std::vector<T>> sanitize(const std::vector<T> &values,
                                const std::vector<uint8_t> &mask,
                                const typename detail::Identity<T>::type &fill);

//===----------------------------------------------------------------------===//
// Template definitions
//===----------------------------------------------------------------------===//

template <typename T>
Result<std::vector<T>>
sanitize(const std::vector<T> &values, const std::vector<uint8_t> &mask,
         const typename detail::Identity<T>::type &fill) {
  if (values.size() != mask.size())
    return Status::error(detail::sizeMismatch(
        "sanitize", "values", values.size(), "padding mask", mask.size()));
  std::vector<T> result(values);
  for (std::size_t i = 0; i < result.size(); ++i)
    if (mask[i])
      result[i] = fill;
  return result;
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_PADDINGMASK_H
