//===- ParseNumber.h - strict integers from the command line ----*- C++ -*-===//
//
// The tools that parse their own command lines (thdc-runtime-check,
// thdc-embed, the benchmarks) take counts as text. `atoi("abc")` is 0 and
// `atoi("12x")` is 12; these functions accept the whole text as a decimal
// integer in range, or say what is wrong with which option. Plain C++17, no
// dependency: the runtime-only build uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TOOLS_PARSENUMBER_H
#define THDC_TOOLS_PARSENUMBER_H

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace thdc {

/// Parses all of `text` as a decimal integer from `minimum` to `maximum`.
/// Otherwise returns std::nullopt and sets `error` to a message naming
/// `option` and `text`: not a number, trailing characters, out of range.
inline std::optional<int64_t> parseInteger(std::string_view option,
                                           std::string_view text,
                                           int64_t minimum, int64_t maximum,
                                           std::string &error) {
  auto fail = [&](const std::string &why) -> std::optional<int64_t> {
    error = "invalid value for " + std::string(option) + ": '" +
            std::string(text) + "' " + why;
    return std::nullopt;
  };
  auto range = [&] {
    return "(expected an integer from " + std::to_string(minimum) + " to " +
           std::to_string(maximum) + ")";
  };
  int64_t value = 0;
  const char *begin = text.data(), *end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range)
    return fail("is out of range " + range());
  if (ec != std::errc() || stop == begin)
    return fail("is not an integer " + range());
  if (stop != end)
    return fail("has trailing characters '" + std::string(stop, end) + "' " +
                range());
  if (value < minimum || value > maximum)
    return fail("is out of range " + range());
  return value;
}

} // namespace thdc

#endif // THDC_TOOLS_PARSENUMBER_H
