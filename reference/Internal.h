//===- Internal.h - Helpers shared by the reference sources -----*- C++ -*-===//
//
// Message formatting, int32 range checks, the abort path and the dynamic-CP
// rank ids shared by the reference/*.cpp files. Not part of the public API:
// users include "reference/Reference.h". The semantics themselves are
// described in docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_INTERNAL_H
#define THDC_REFERENCE_INTERNAL_H

#include "reference/CheckedArithmetic.h"
#include "reference/Status.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace thdc {
namespace reference {

// The graph step's types (reference/GraphStep.h), for graphStepOnPrefix.
struct GraphStepInput;
struct GraphStepOutput;

namespace internal {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

/// Streams every argument into one string.
template <typename... Args> std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// Formats an array as "[a, b, c]" (long arrays are elided in the middle).
template <typename T> std::string list(const std::vector<T> &values) {
  constexpr std::size_t kShown = 16;
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values.size() > kShown && i == kShown / 2) {
      os << ", ...";
      i = values.size() - kShown / 2;
    }
    if (i)
      os << ", ";
    os << +values[i];
  }
  os << ']';
  return os.str();
}

/// "None" or the value, as the configuration is printed in messages.
inline std::string optionalToString(std::optional<int64_t> value) {
  return value ? std::to_string(*value) : std::string("None");
}

/// True when `value` is representable as int32 (the dtype of cu arrays).
inline bool fitsInt32(int64_t value) {
  return value >= kInt32Min && value <= kInt32Max;
}

/// One microbatch of dynamic CP: the ids of each DP x CP rank.
using RankIds = std::vector<std::vector<int32_t>>;

/// True when a rank's `ids` hold `id` (dynamic CP: the ranks that share a
/// sequence).
inline bool holds(const std::vector<int32_t> &ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

/// Aborts on a broken precondition or an internal inconsistency (the
/// reference has no exceptions; these are programming errors, not data).
[[noreturn]] void fatal(const char *where, const std::string &message);

/// The value of `result`, or fatal() with its error: for steps whose inputs
/// were already validated, so an error is an internal inconsistency.
template <typename T> T unwrap(Result<T> result, const char *where) {
  if (!result)
    fatal(where, "internal error: " + result.status().message());
  return std::move(*result);
}

/// Checks that a cu array starts at 0 and never decreases; an error naming
/// the offending entry otherwise.
Status checkCuArray(const char *name, const std::vector<int32_t> &cu);

/// The configuration checks shared by the graph step and the pack step: an
/// error naming the first that fails of C, cp, N >= 1, C even when cp > 1,
/// C*cp within int32 (computed without overflow) and N within int32.
Status checkStepConfiguration(int64_t c, int64_t cp, int64_t n);

/// S5 -> S6 -> S7 -> S10 of one graph-mode step (megatronGraphStep) on the
/// meaningful prefix cu/cup of valid metadata, for CP rank `rank`: the
/// padding mask, each data key sanitised, sliced and padded to the local
/// target, the dummy sequence, both cu arrays padded to n+1 entries. The
/// data keys need at least cup.back() rows. Aborts (unwrap) where a step
/// refuses, which valid metadata never makes it do.
/// dummyLength: SplitDummySequences of that length over the tail.
GraphStepOutput
graphStepOnPrefix(const GraphStepInput &input, const std::vector<int32_t> &cu,
                  const std::vector<int32_t> &cup, int64_t rank, int64_t c,
                  int64_t cp, int64_t n,
                  std::optional<int64_t> dummyLength = std::nullopt);

} // namespace internal
} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_INTERNAL_H
