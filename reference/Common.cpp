//===- Common.cpp - helpers shared by the reference -----------------------===//
//
// Error messages (detail::), roundUp and maxSeqlenFromCu (S4, S13 of
// docs/semantics.md), and the internal helpers of reference/Internal.h.
//
//===----------------------------------------------------------------------===//

#include "reference/Common.h"
#include "reference/Internal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace thdc {
namespace reference {

using namespace internal;

void internal::fatal(const char *where, const std::string &message) {
  std::fprintf(stderr, "thdc::reference::%s: %s\n", where, message.c_str());
  std::fflush(stderr);
  std::abort();
}

Status internal::checkCuArray(const char *name,
                              const std::vector<int32_t> &cu) {
  if (cu.empty())
    return Status::error(concat(name, " must have at least one entry"));
  if (cu[0] != 0)
    return Status::error(concat(name, "[0] = ", cu[0], " must be 0 (", name,
                                " = ", list(cu), ")"));
  for (std::size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      return Status::error(concat(name, " decreases: ", name, "[", i,
                                  "] = ", cu[i], " < ", name, "[", i - 1,
                                  "] = ", cu[i - 1]));
  return Status();
}

//===----------------------------------------------------------------------===//
// detail
//===----------------------------------------------------------------------===//

std::string detail::sizeMismatch(const char *what, const char *firstName,
                                 std::size_t firstSize, const char *secondName,
                                 std::size_t secondSize) {
  return concat(what, ": ", firstName, " has ", firstSize, " entries but ",
                secondName, " has ", secondSize, "; they must match");
}

std::string detail::truncationRefused(std::size_t length,
                                      int64_t targetLength) {
  return concat("length ", length, " exceeds the target length ", targetLength,
                "; refusing to silently truncate");
}

std::string detail::indexOutOfRange(std::size_t position, int64_t index,
                                    std::size_t size) {
  return concat("index indices[", position, "] = ", index,
                " is out of range for a buffer of ", size, " rows");
}

//===----------------------------------------------------------------------===//
// Common helpers
//===----------------------------------------------------------------------===//

int64_t roundUp(int64_t value, int64_t multiple) {
  assert(multiple > 0 && "roundUp needs a positive multiple");
  int64_t quotient = value / multiple;
  if (value % multiple > 0)
    ++quotient;
  return quotient * multiple;
}

int32_t maxSeqlenFromCu(const std::vector<int32_t> &cuSeqlens) {
  int64_t result = 0;
  for (std::size_t i = 1; i < cuSeqlens.size(); ++i)
    result =
        std::max<int64_t>(result, int64_t(cuSeqlens[i]) - cuSeqlens[i - 1]);
  return static_cast<int32_t>(std::min(result, kInt32Max));
}

} // namespace reference
} // namespace thdc
