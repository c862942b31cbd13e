//===- HostBuffers.cpp - Typed host buffers and their JSON form -----------===//

#include "tools/thd-run/HostBuffers.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

using namespace thdc::runtime;
namespace json = llvm::json;

llvm::StringRef thdc::runtime::toString(ElementType type) {
  switch (type) {
  case ElementType::I1:
    return "i1";
  case ElementType::I8:
    return "i8";
  case ElementType::I32:
    return "i32";
  case ElementType::I64:
    return "i64";
  case ElementType::F32:
    return "f32";
  case ElementType::F64:
    return "f64";
  }
  llvm_unreachable("unknown element type");
}

std::optional<ElementType>
thdc::runtime::parseElementType(llvm::StringRef text) {
  return llvm::StringSwitch<std::optional<ElementType>>(text)
      .Case("i1", ElementType::I1)
      .Case("i8", ElementType::I8)
      .Case("i32", ElementType::I32)
      .Case("i64", ElementType::I64)
      .Case("f32", ElementType::F32)
      .Case("f64", ElementType::F64)
      .Default(std::nullopt);
}

size_t thdc::runtime::byteWidth(ElementType type) {
  switch (type) {
  case ElementType::I1:
  case ElementType::I8:
    return 1;
  case ElementType::I32:
  case ElementType::F32:
    return 4;
  case ElementType::I64:
  case ElementType::F64:
    return 8;
  }
  llvm_unreachable("unknown element type");
}

//===----------------------------------------------------------------------===//
// HostBuffer
//===----------------------------------------------------------------------===//

HostBuffer::HostBuffer(BufferDesc desc) : bufferDesc(std::move(desc)) {
  assert(bufferDesc.elements >= 0 && "negative element count");
  std::optional<ElementType> parsed = parseElementType(bufferDesc.type);
  assert(parsed && "an element type thd-run cannot exchange");
  elementType = parsed.value_or(ElementType::I8);
  byteCount =
      static_cast<size_t>(bufferDesc.elements) * byteWidth(elementType);
  // Whole alignment units, at least one: data() is never null, and code that
  // reads the last unit with a vector load stays inside the allocation.
  size_t allocated =
      std::max<size_t>(llvm::alignTo(byteCount, kAlignment), kAlignment);
  storage.reset(static_cast<std::byte *>(
      ::operator new(allocated, std::align_val_t(kAlignment))));
  std::memset(storage.get(), 0, allocated);
}

void HostBuffer::AlignedDelete::operator()(std::byte *bytes) const {
  ::operator delete(bytes, std::align_val_t(kAlignment));
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// "1 value" or "N values".
std::string countOf(int64_t count, llvm::StringRef what = "") {
  std::string text = std::to_string(count);
  if (!what.empty())
    text += (" " + what).str();
  return text + (count == 1 ? " value" : " values");
}

/// The shortest decimal form that reads back as `value`.
template <typename T> std::string shortestForm(T value) {
  char text[64];
  std::to_chars_result result = std::to_chars(text, text + sizeof(text), value);
  assert(result.ec == std::errc() && "buffer too small for a float");
  return std::string(text, result.ptr);
}

/// An element as an error message shows it: numbers as written (up to the
/// parser's rounding of non-integers), strings and literals as JSON, arrays
/// and objects by their kind.
std::string describe(const json::Value &value) {
  switch (value.kind()) {
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  case json::Value::Number: {
    if (std::optional<uint64_t> unsignedValue = value.getAsUINT64())
      return std::to_string(*unsignedValue);
    double number = *value.getAsNumber();
    // Negative integers are exact here, even beyond 2^53.
    if (number < 0)
      if (std::optional<int64_t> integer = value.getAsInteger())
        return std::to_string(*integer);
    return shortestForm(number);
  }
  default: {
    std::string text;
    llvm::raw_string_ostream(text) << value;
    constexpr size_t kMaxLength = 40;
    if (text.size() > kMaxLength)
      text = text.substr(0, kMaxLength - 3) + "...";
    return text;
  }
  }
}

/// How an element reads as a number of the element type.
enum class Reading { Ok, NotANumber, NotIntegral, OutOfRange, BeyondDouble };

/// Reads `value` as an integer in [min, max]. Numbers written with a fraction
/// or exponent reach us as doubles and are accepted when integral.
Reading readInteger(const json::Value &value, int64_t min, int64_t max,
                    int64_t &result) {
  std::optional<double> number = value.getAsNumber();
  if (!number)
    return Reading::NotANumber;
  // The parser turns numbers beyond the double range into infinities.
  if (!std::isfinite(*number))
    return Reading::BeyondDouble;
  if (std::optional<uint64_t> unsignedValue = value.getAsUINT64()) {
    if (*unsignedValue > static_cast<uint64_t>(max))
      return Reading::OutOfRange;
    result = static_cast<int64_t>(*unsignedValue);
    return Reading::Ok;
  }
  double integralPart;
  if (std::modf(*number, &integralPart) != 0.0)
    return Reading::NotIntegral;
  // getAsInteger accepts the double 2^63, which int64_t cannot hold.
  if (*number >= 0x1p63)
    return Reading::OutOfRange;
  std::optional<int64_t> integer = value.getAsInteger();
  if (!integer || *integer < min || *integer > max)
    return Reading::OutOfRange;
  result = *integer;
  return Reading::Ok;
}

/// Reads `value` as a float of `type`, accepting the strings writeOutputs uses
/// for non-finite values.
Reading readFloat(const json::Value &value, ElementType type, double &result) {
  if (std::optional<llvm::StringRef> text = value.getAsString()) {
    std::optional<double> special =
        llvm::StringSwitch<std::optional<double>>(*text)
            .Case("NaN", std::numeric_limits<double>::quiet_NaN())
            .Case("Infinity", std::numeric_limits<double>::infinity())
            .Case("-Infinity", -std::numeric_limits<double>::infinity())
            .Default(std::nullopt);
    if (!special)
      return Reading::NotANumber;
    result = *special;
    return Reading::Ok;
  }
  std::optional<double> number = value.getAsNumber();
  if (!number)
    return Reading::NotANumber;
  if (!std::isfinite(*number))
    return Reading::BeyondDouble;
  if (type == ElementType::F32) {
    // Doubles below the midpoint between the largest float and 2^128 round to
    // a finite float (the shortest form of FLT_MAX, 3.4028235e+38, is above
    // FLT_MAX); the clamp keeps the conversion below well defined.
    constexpr double kFloatOverflow = 0x1.ffffffp127;
    constexpr double kFloatMax = std::numeric_limits<float>::max();
    if (std::fabs(*number) >= kFloatOverflow)
      return Reading::OutOfRange;
    result = std::clamp(*number, -kFloatMax, kFloatMax);
    return Reading::Ok;
  }
  result = *number;
  return Reading::Ok;
}

/// The range of an integer element type.
std::pair<int64_t, int64_t> integerRange(ElementType type) {
  switch (type) {
  case ElementType::I1:
    return {0, 1};
  case ElementType::I8:
    return {std::numeric_limits<int8_t>::min(),
            std::numeric_limits<int8_t>::max()};
  case ElementType::I32:
    return {std::numeric_limits<int32_t>::min(),
            std::numeric_limits<int32_t>::max()};
  case ElementType::I64:
    return {std::numeric_limits<int64_t>::min(),
            std::numeric_limits<int64_t>::max()};
  case ElementType::F32:
  case ElementType::F64:
    break;
  }
  llvm_unreachable("not an integer element type");
}

/// Reads element `index` of input `spec.name` into `buffer`.
Status readElement(const json::Value &value, size_t index, HostBuffer &buffer) {
  const BufferDesc &spec = buffer.desc();
  ElementType type = buffer.type();
  std::string element =
      ("input '" + spec.name + "'[" + std::to_string(index) + "]");
  auto fail = [&](Reading reading, const char *expected) {
    if (reading == Reading::BeyondDouble)
      return Status::error(
          element + " is a number beyond the double range; it does not fit " +
          toString(type).str());
    if (reading == Reading::OutOfRange)
      return Status::error(element + " = " + describe(value) +
                           " does not fit " + toString(type).str());
    return Status::error(element + " is " + describe(value) + "; expected " +
                         expected);
  };

  switch (type) {
  case ElementType::I1: {
    if (std::optional<bool> boolean = value.getAsBoolean()) {
      buffer.as<uint8_t>()[index] = *boolean;
      return Status();
    }
    int64_t integer;
    Reading reading = readInteger(value, 0, 1, integer);
    if (reading != Reading::Ok && reading != Reading::BeyondDouble)
      reading = Reading::NotIntegral;
    if (reading != Reading::Ok)
      return fail(reading, "0, 1, true or false");
    buffer.as<uint8_t>()[index] = static_cast<uint8_t>(integer);
    return Status();
  }
  case ElementType::I8:
  case ElementType::I32:
  case ElementType::I64: {
    auto [min, max] = integerRange(type);
    int64_t integer;
    Reading reading = readInteger(value, min, max, integer);
    if (reading != Reading::Ok)
      return fail(reading, "an integer");
    if (type == ElementType::I8)
      buffer.as<int8_t>()[index] = static_cast<int8_t>(integer);
    else if (type == ElementType::I32)
      buffer.as<int32_t>()[index] = static_cast<int32_t>(integer);
    else
      buffer.as<int64_t>()[index] = integer;
    return Status();
  }
  case ElementType::F32:
  case ElementType::F64: {
    double number;
    Reading reading = readFloat(value, type, number);
    if (reading != Reading::Ok)
      return fail(reading, "a number");
    if (type == ElementType::F32)
      buffer.as<float>()[index] = static_cast<float>(number);
    else
      buffer.as<double>()[index] = number;
    return Status();
  }
  }
  llvm_unreachable("unknown element type");
}

/// The array under input `spec`'s name, if it is one of the right length:
/// checked before the buffer is allocated, so that a huge capacity with a
/// short input is an error, not an allocation.
Result<const json::Array *> inputArray(const json::Value &value,
                                       const BufferDesc &spec) {
  const json::Array *array = value.getAsArray();
  if (!array)
    return Status::error("input '" + spec.name + "' must be an array of " +
                         countOf(spec.elements, spec.type));
  if (static_cast<int64_t>(array->size()) != spec.elements)
    return Status::error("input '" + spec.name + "' has " +
                         countOf(array->size()) + "; expected " +
                         std::to_string(spec.elements));
  return array;
}

/// Reads the elements of `array` (checked by inputArray) into `buffer`.
Status readInput(const json::Array *array, HostBuffer &buffer) {
  for (size_t index = 0; index < array->size(); ++index)
    if (Status read = readElement((*array)[index], index, buffer); !read)
      return read;
  return Status();
}

} // namespace

/// The deepest nesting of arrays and objects in JSON text (outside strings),
/// measured before parsing: llvm::json's parser recurses once per level.
static size_t jsonNestingDepth(llvm::StringRef text) {
  size_t depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// A JSON string's contents (between its quotes) decoded: the escapes
/// \" \\ \/ \b \f \n \r \t and \uXXXX (surrogate pairs joined) to UTF-8.
/// Malformed escapes are kept as they are (the parser refuses such text).
static std::string decodeJsonString(llvm::StringRef raw) {
  std::string out;
  auto hex4 = [&](size_t at, unsigned &code) {
    if (at + 4 > raw.size())
      return false;
    return !raw.substr(at, 4).getAsInteger(16, code);
  };
  auto utf8 = [&](unsigned code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xc0 | (code >> 6));
      out += char(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += char(0xe0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3f));
      out += char(0x80 | (code & 0x3f));
    } else {
      out += char(0xf0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3f));
      out += char(0x80 | ((code >> 6) & 0x3f));
      out += char(0x80 | (code & 0x3f));
    }
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 == raw.size()) {
      out += raw[i];
      continue;
    }
    char e = raw[++i];
    unsigned code = 0, low = 0;
    switch (e) {
    case 'b': out += '\b'; break;
    case 'f': out += '\f'; break;
    case 'n': out += '\n'; break;
    case 'r': out += '\r'; break;
    case 't': out += '\t'; break;
    case 'u':
      if (!hex4(i + 1, code)) {
        out += "\\u";
        break;
      }
      i += 4;
      if (code >= 0xd800 && code < 0xdc00 && i + 2 < raw.size() &&
          raw[i + 1] == '\\' && raw[i + 2] == 'u' && hex4(i + 3, low) &&
          low >= 0xdc00 && low < 0xe000) {
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        i += 6;
      }
      utf8(code);
      break;
    default: out += e; break; // \" \\ \/
    }
  }
  return out;
}

/// The first member name the top-level object of JSON text gives twice
/// (decoded, so that "tokens" and "tok\u0065ns" are one name), if any:
/// llvm::json's parser keeps one of them silently, and which one a reader
/// takes is not defined.
static std::optional<std::string> repeatedTopLevelKey(llvm::StringRef text) {
  llvm::StringSet<> keys;
  size_t depth = 0, start = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
        size_t next = text.find_first_not_of(" \t\r\n", i + 1);
        if (depth == 1 && next != llvm::StringRef::npos && text[next] == ':') {
          std::string key = decodeJsonString(text.slice(start, i));
          if (!keys.insert(key).second)
            return key;
        }
      }
    } else if (c == '"') {
      inString = true;
      start = i + 1;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

Result<std::vector<HostBuffer>>
thdc::runtime::readInputs(llvm::StringRef jsonText,
                          llvm::ArrayRef<BufferDesc> specs) {
  constexpr size_t kMaxNesting = 64;
  if (size_t depth = jsonNestingDepth(jsonText); depth > kMaxNesting)
    return Status::error(
        "invalid JSON input: nested " + std::to_string(depth) +
        " levels deep; inputs are one object of flat arrays (at most " +
        std::to_string(kMaxNesting) + " levels are read)");
  llvm::Expected<json::Value> root = json::parse(jsonText);
  if (!root)
    return Status::error("invalid JSON input: " +
                         llvm::toString(root.takeError()));
  if (std::optional<std::string> repeated = repeatedTopLevelKey(jsonText))
    return Status::error("the input '" + *repeated +
                         "' is given twice; give each argument once");
  const json::Object *object = root->getAsObject();
  if (!object)
    return Status::error(
        "JSON input must be an object mapping argument names to arrays");

  llvm::StringSet<> names;
  for (const BufferDesc &spec : specs)
    if (!names.insert(spec.name).second)
      return Status::error("the pipeline declares argument '" + spec.name +
                           "' twice");
  for (const BufferDesc &spec : specs)
    if (!parseElementType(spec.type))
      return Status::error("argument '" + spec.name +
                           "' has the element type '" + spec.type +
                           "', which thd-run cannot exchange");

  // The object's iteration order is unspecified; report the smallest unknown
  // key so that the message does not change from run to run.
  std::optional<llvm::StringRef> unknown;
  for (const auto &entry : *object) {
    llvm::StringRef key = entry.first;
    if (!names.contains(key) && (!unknown || key < *unknown))
      unknown = key;
  }
  if (unknown) {
    std::string expected;
    for (const BufferDesc &spec : specs)
      expected += (expected.empty() ? "" : ", ") + spec.name;
    return Status::error("unknown input '" + unknown->str() +
                         "'; the pipeline takes: " +
                         (expected.empty() ? "no inputs" : expected));
  }

  std::vector<HostBuffer> buffers;
  buffers.reserve(specs.size());
  for (const BufferDesc &spec : specs) {
    const json::Value *value = object->get(spec.name);
    if (!value)
      return Status::error("missing input '" + spec.name + "' (expected " +
                           countOf(spec.elements) + " of type " + spec.type +
                           ")");
    Result<const json::Array *> array = inputArray(*value, spec);
    if (!array)
      return array.status();
    buffers.emplace_back(spec);
    if (Status read = readInput(*array, buffers.back()); !read)
      return read;
  }
  return std::move(buffers); // HostBuffer moves, never copies
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// Writes a float so that it reads back as the same value of its type: the
/// shortest form that survives parsing as a double, with ".0" added to integral
/// values so that JSON readers see a float, and strings for NaN and infinities.
template <typename T> void writeFloat(llvm::raw_ostream &os, T value) {
  if (std::isnan(value)) {
    os << "\"NaN\"";
    return;
  }
  if (std::isinf(value)) {
    os << (value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  std::string text = shortestForm(value);
  if constexpr (std::is_same_v<T, float>) {
    // Readers parse a number as a double and then round it to float; for a
    // few floats (e.g. 7.038531e-26) the two roundings of the shortest form
    // land on a neighbour, so write the float's exact double value instead.
    double parsed;
    std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (static_cast<float>(parsed) != value)
      text = shortestForm(static_cast<double>(value));
  }
  os << text;
  if (text.find_first_of(".e") == std::string::npos)
    os << ".0";
}

void writeElement(llvm::raw_ostream &os, const HostBuffer &buffer,
                  size_t index) {
  switch (buffer.type()) {
  case ElementType::I1:
    os << (buffer.as<uint8_t>()[index] != 0 ? 1 : 0);
    return;
  case ElementType::I8:
    os << static_cast<int>(buffer.as<int8_t>()[index]);
    return;
  case ElementType::I32:
    os << buffer.as<int32_t>()[index];
    return;
  case ElementType::I64:
    os << buffer.as<int64_t>()[index];
    return;
  case ElementType::F32:
    writeFloat(os, buffer.as<float>()[index]);
    return;
  case ElementType::F64:
    writeFloat(os, buffer.as<double>()[index]);
    return;
  }
  llvm_unreachable("unknown element type");
}

} // namespace

std::string thdc::runtime::writeOutputs(llvm::ArrayRef<HostBuffer> buffers,
                                        bool pretty) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '{';
  for (size_t position = 0; position < buffers.size(); ++position) {
    const HostBuffer &buffer = buffers[position];
    if (position > 0)
      os << ',';
    if (pretty)
      os << "\n  ";
    os << json::Value(buffer.desc().name) << (pretty ? ": [" : ":[");
    for (int64_t index = 0; index < buffer.desc().elements; ++index) {
      if (index > 0)
        os << (pretty ? ", " : ",");
      writeElement(os, buffer, index);
    }
    os << ']';
  }
  if (pretty && !buffers.empty())
    os << '\n';
  os << '}';
  return text;
}
