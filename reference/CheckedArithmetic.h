//===- CheckedArithmetic.h - Overflow-checked int64 arithmetic -*- C++ -*-===//
//
// Sizes and capacities reach the reference and the planner straight from
// users (C, cp, dp, N, a target length, an alignment): products such as
// C*cp or (microbatches)*(N-1) must be checked before they size a buffer or
// enter a comparison, or an absurd configuration wraps into a small, valid
// looking one. These helpers return nullopt on overflow; callers turn that
// into their own error (a Result, a Status, or a precondition message).
// Header only, no dependency, shared by reference/ and planner/.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_CHECKEDARITHMETIC_H
#define THDC_REFERENCE_CHECKEDARITHMETIC_H

#include <cstdint>
#include <optional>

namespace thdc {
namespace reference {

/// a * b, or nullopt when the product does not fit int64.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    return std::nullopt;
  return product;
}

/// a + b, or nullopt when the sum does not fit int64.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    return std::nullopt;
  return sum;
}

/// ceil(value / multiple) * multiple (roundUp in Common.h), or nullopt
/// when it does not fit int64. Requires multiple > 0.
inline std::optional<int64_t> checkedRoundUp(int64_t value, int64_t multiple) {
  int64_t quotient = value / multiple;
  if (value % multiple > 0)
    ++quotient;
  return checkedMul(quotient, multiple);
}

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_CHECKEDARITHMETIC_H
