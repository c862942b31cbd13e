//===- Attention.cpp - S14 attention-side semantics -----------------------===//
//
// Section S14 of docs/semantics.md: the half read of a CP-local buffer
// (readHalfRows; the template readHalf lives in Attention.h) and the
// log-sum-exp merge of partial attention results (lseMerge,
// correctOutput).
//
//===----------------------------------------------------------------------===//

#include "reference/Attention.h"
#include "reference/Internal.h"

#include <algorithm>
#include <cmath>

namespace thdc {
namespace reference {

using namespace internal;

Result<std::vector<int32_t>> readHalfRows(const std::vector<int32_t> &cuLocal,
                                          int half, std::size_t rows) {
  using Output = std::vector<int32_t>;
  if (half != 0 && half != 1)
    return Status::error(concat("half = ", half, " must be 0 or 1"));
  if (cuLocal.size() < 2)
    return Status::error(
        concat("readHalf needs a local cu array with at least 2 entries, got ",
               list(cuLocal)));
  for (std::size_t i = 0; i < cuLocal.size(); ++i) {
    if (cuLocal[i] % 2)
      return Status::error(
          concat("local cu_seqlens[", i, "] = ", cuLocal[i], " is not even"));
    if (i && cuLocal[i] < cuLocal[i - 1])
      return Status::error(concat("local cu_seqlens decreases at entry ", i,
                                  ": ", list(cuLocal)));
  }
  const std::size_t n = cuLocal.size() - 1;
  std::vector<int64_t> halves;
  for (int32_t c : cuLocal)
    halves.push_back(c / 2);
  Output source;
  std::size_t s = 0;
  for (int64_t j = 0; j < halves[n]; ++j) {
    while (s + 1 < n && halves[s + 1] <= j)
      ++s;
    int64_t row = j + halves[s + half];
    if (row < 0 || row >= static_cast<int64_t>(rows))
      return Status::error(concat("readHalf row ", row,
                                  " is outside the local buffer of ", rows,
                                  " rows"));
    source.push_back(static_cast<int32_t>(row));
  }
  return source;
}

double lseMerge(double a, double b) {
  const double high = std::max(a, b);
  const double low = std::min(a, b);
  if (std::isinf(high) && high < 0)
    return high;
  return high + std::log1p(std::exp(low - high));
}

double correctOutput(double out, double outStep, double lseStep,
                     double lseFinal) {
  if (outStep == 0.0)
    return out;
  return out + outStep * std::exp(lseStep - lseFinal);
}

} // namespace reference
} // namespace thdc
