//===- Attention.h - S14 TE semantics inside attention ----------*- C++ -*-===//
//
// Section S14 of docs/semantics.md: the half reads of a CP rank's buffer
// and the LSE merge. Defined in reference/Attention.cpp (the CP rank order
// in reference/CpSlice.h).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_ATTENTION_H
#define THDC_REFERENCE_ATTENTION_H

#include "reference/CpSlice.h"
#include "reference/Status.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S14. TE semantics used inside attention
//===----------------------------------------------------------------------===//

/// S14 (TE `thd_read_half_tensor`): source rows of the half read: with
/// cs = cuLocal/2, output row j < cs[n] reads row j + cs[s+half], s the
/// sequence of j in cs. Errors: fewer than 2 entries, odd or decreasing
/// entries, half not 0/1, a row past `rows`.
Result<std::vector<int32_t>> readHalfRows(const std::vector<int32_t> &cuLocal,
                                          int half, std::size_t rows);

/// S14: concatenation of every sequence's first (half 0) or second (half 1)
/// half of the local buffer x. Golden: cu [0,4,8] -> half 0 = rows
/// [0,1,4,5], half 1 = rows [2,3,6,7].
template <typename T>
Result<std::vector<T>> readHalf(const std::vector<T> &x,
                                const std::vector<int32_t> &cuLocal, int half);

/// S14: LSE merge max(a,b) + log1p(exp(min(a,b) - max(a,b))); -inf when both
/// are -inf. Golden: lseMerge(0, 0) = ln 2.
double lseMerge(double a, double b);

/// S14: output correction out + outStep * exp(lseStep - lseFinal), where a
/// step value exactly 0 contributes 0. Golden: merging two steps of LSE 0
/// weights each by exp(0 - ln 2) = 0.5.
double correctOutput(double out, double outStep, double lseStep,
                     double lseFinal);

//===----------------------------------------------------------------------===//
// Template definitions
//===----------------------------------------------------------------------===//

template <typename T>
Result<std::vector<T>> readHalf(const std::vector<T> &x,
                                const std::vector<int32_t> &cuLocal, int half) {
  Result<std::vector<int32_t>> rows = readHalfRows(cuLocal, half, x.size());
  if (!rows)
    return rows.status();
  return cpSlice(x, *rows);
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_ATTENTION_H
