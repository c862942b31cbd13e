//===- Json.h - a small JSON reader and writer for manifests ---*- C++ -*-===//
//
// Enough JSON for manifest.json (objects, arrays, strings, integers, numbers,
// booleans, null) without an LLVM dependency in the runtime.
//
// The runtime keeps its own reader rather than a JSON library: it is built
// without exceptions and linked into training processes, and nlohmann-json
// reports malformed input by throwing (or, without exceptions, by aborting
// the process); a damaged manifest must instead be an error the caller sees.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_JSON_H
#define THDC_RUNTIME_JSON_H

#include "runtime/Status.h"

#include <cstdint>
#include <functional>
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

/// Writes JSON text in the order it is given, indented by two spaces per
/// level with one member or element per line (empty objects and arrays as
/// `{}` and `[]`), the layout of llvm::json::OStream with indent 2. The
/// caller nests calls correctly (a key before every object member).
class Writer {
public:
  void object(const std::function<void()> &members);
  void array(const std::function<void()> &elements);
  void value(const std::string &text);
  void value(const char *text) { value(std::string(text)); }
  void value(int64_t number);
  void value(bool boolean);
  void attribute(const std::string &key, const std::string &text);
  void attribute(const std::string &key, const char *text) {
    attribute(key, std::string(text));
  }
  void attribute(const std::string &key, int64_t number);
  void attributeObject(const std::string &key,
                       const std::function<void()> &members);
  void attributeArray(const std::string &key,
                      const std::function<void()> &elements);

  /// The text written so far.
  const std::string &text() const { return out; }

private:
  void beginValue();
  void key(const std::string &name);
  void newline();
  void open(char bracket, const std::function<void()> &contents, char close);
  std::string out;
  /// Per open object or array: whether it has no member yet.
  std::vector<bool> empty;
  bool afterKey = false;
};

/// `text` as a JSON string literal, quotes included.
std::string quote(const std::string &text);

} // namespace thdc::runtime::json

#endif // THDC_RUNTIME_JSON_H
