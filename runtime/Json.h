//===- Json.h - a small JSON reader for bundle manifests -------*- C++ -*-===//
//
// Enough JSON for manifest.json (objects, arrays, strings, integers, numbers,
// booleans, null) without an LLVM dependency in the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_JSON_H
#define THDC_RUNTIME_JSON_H

#include "runtime/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace thdc::runtime::json {

/// A parsed JSON value.
struct Value {
  enum class Kind { Null, Bool, Integer, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  /// The member `key` of an object, or nullptr.
  const Value *get(const std::string &key) const;
};

/// Parses `text`; errors give the line and column.
Result<Value> parse(const std::string &text);

} // namespace thdc::runtime::json

#endif // THDC_RUNTIME_JSON_H
