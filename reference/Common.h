//===- Common.h - Helpers shared by the sections ----------------*- C++ -*-===//
//
// roundUp and maxSeqlenFromCu, which several sections use. Defined in
// reference/Common.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_COMMON_H
#define THDC_REFERENCE_COMMON_H

#include <cstdint>
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

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_COMMON_H
