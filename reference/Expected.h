//===- Expected.h - Error handling of the reference -------------*- C++ -*-===//
//
// The result type of every fallible step (Expected) and the messages the
// header templates report (detail::, defined in reference/Common.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_EXPECTED_H
#define THDC_REFERENCE_EXPECTED_H

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// Error handling
//===----------------------------------------------------------------------===//

/// Either a value of type T or an error message naming the offending values.
/// The reference never throws; every fallible step returns an Expected.
template <typename T> class Expected {
public:
  /// Wraps a successful result.
  Expected(T value) : storage(std::move(value)) {}

  /// Creates a failed result carrying `message`.
  static Expected failure(std::string message) {
    Expected result;
    result.message = std::move(message);
    return result;
  }

  /// True when a value is held.
  explicit operator bool() const { return storage.has_value(); }

  /// The held value; must only be called on success.
  T &operator*() {
    assert(storage && "dereferencing a failed Expected");
    return *storage;
  }
  /// The held value; must only be called on success.
  const T &operator*() const {
    assert(storage && "dereferencing a failed Expected");
    return *storage;
  }
  /// Member access to the held value; must only be called on success.
  T *operator->() { return &**this; }
  /// Member access to the held value; must only be called on success.
  const T *operator->() const { return &**this; }

  /// The error message (empty on success).
  const std::string &error() const { return message; }

private:
  Expected() = default;
  std::optional<T> storage;
  std::string message;
};

/// Shorthand for `Expected<T>::failure(message)`.
template <typename T> Expected<T> makeError(std::string message) {
  return Expected<T>::failure(std::move(message));
}

namespace detail {
/// Blocks template argument deduction through a parameter (C++20's
/// std::type_identity), so that `sanitize(tokens, mask, 0)` deduces T from
/// the vector only.
template <typename T> struct Identity { using type = T; };
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

#endif // THDC_REFERENCE_EXPECTED_H
