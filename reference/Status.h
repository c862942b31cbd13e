//===- Status.h - the errors of the plain-C++ libraries --------*- C++ -*-===//
//
// The one error type of the libraries below the compiler: the reference, the
// runtime and the planner. They have no MLIR and no LLVM dependency (the
// runtime is linked into training processes) and are built without
// exceptions: errors are values. Header-only and plain C++17, so that the
// runtime, which includes nothing else of the project's but constants, can
// include it; the compiler turns these into diagnostics or LLVM errors, the
// Python module into exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_STATUS_H
#define THDC_REFERENCE_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace thdc {

/// Success, or an error message that names what failed and why.
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status error(std::string message) {
    Status status;
    status.message_ = std::move(message);
    status.failed_ = true;
    return status;
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  /// The error message; empty when ok().
  const std::string &message() const { return message_; }

private:
  // A string and a flag rather than an optional string: GCC 12 warns
  // (-Wmaybe-uninitialized) on destroying the optional inside a Result that
  // holds a value.
  std::string message_;
  bool failed_ = false;
};

/// A value, or the Status that explains why there is none.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "a Result without a value needs an error");
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status &status() const { return status_; }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace thdc

#endif // THDC_REFERENCE_STATUS_H
