//===- Json.cpp - a small JSON reader for bundle manifests ----------------===//

#include "runtime/Json.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

using namespace thdc::runtime;
using namespace thdc::runtime::json;

const Value *Value::get(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

namespace {
class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  Result<Value> run() {
    Value value;
    if (!parseValue(value, 0))
      return failure();
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the value"), failure();
    return value;
  }

private:
  Result<Value> failure() { return Status::error(error); }

  bool fail(const std::string &message) {
    if (!error.empty())
      return false;
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i) {
      column = text[i] == '\n' ? 1 : column + 1;
      line += text[i] == '\n';
    }
    error = fmt::format("JSON error at line {}, column {}: {}", line, column,
                        message);
    return false;
  }

  void skipSpace() {
    while (pos < text.size() &&
           std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }

  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (text.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }

  bool parseString(std::string &out) {
    if (text[pos] != '"')
      return fail("expected a string");
    ++pos;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        break;
      char escaped = text[pos++];
      switch (escaped) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (pos + 4 > text.size())
          return fail("truncated \\u escape");
        unsigned code = std::strtoul(text.substr(pos, 4).c_str(), nullptr, 16);
        pos += 4;
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else if (code < 0x800) {
          out += static_cast<char>(0xC0 | (code >> 6));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          out += static_cast<char>(0xE0 | (code >> 12));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default:
        out += escaped;
        break;
      }
    }
    if (pos >= text.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }

  bool parseNumber(Value &value) {
    size_t start = pos;
    if (text[pos] == '-')
      ++pos;
    bool integral = true;
    while (pos < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[pos])) ||
            text[pos] == '.' || text[pos] == 'e' || text[pos] == 'E' ||
            text[pos] == '+' || text[pos] == '-')) {
      integral &= std::isdigit(static_cast<unsigned char>(text[pos])) != 0;
      ++pos;
    }
    std::string token = text.substr(start, pos - start);
    char *end = nullptr;
    if (integral) {
      value.kind = Value::Kind::Integer;
      value.integer = std::strtoll(token.c_str(), &end, 10);
      value.number = static_cast<double>(value.integer);
    } else {
      value.kind = Value::Kind::Number;
      value.number = std::strtod(token.c_str(), &end);
    }
    if (token.empty() || token == "-" || (end && *end != '\0'))
      return fail(fmt::format("malformed number '{}'", token));
    return true;
  }

  /// The elements of an object or an array after its opening bracket, each
  /// read by `parseElement`, separated by ',' up to `close`.
  template <typename ParseElement>
  bool parseList(char close, ParseElement parseElement) {
    skipSpace();
    if (pos < text.size() && text[pos] == close)
      return ++pos, true;
    while (true) {
      if (!parseElement())
        return false;
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == close)
        return ++pos, true;
      return fail(fmt::format("expected ',' or '{}'", close));
    }
  }

  bool parseValue(Value &value, int depth) {
    if (depth > 64)
      return fail("nesting too deep");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    if (c == '{') {
      ++pos;
      value.kind = Value::Kind::Object;
      return parseList('}', [&] {
        skipSpace();
        std::string key;
        if (pos >= text.size() || !parseString(key))
          return fail("expected a member name");
        skipSpace();
        if (pos >= text.size() || text[pos] != ':')
          return fail("expected ':'");
        // A member given twice is refused: which one a reader takes would
        // differ between readers (RFC 8259 leaves it open).
        if (value.object.count(key))
          return fail("the member \"" + key + "\" is given twice");
        ++pos;
        return parseValue(value.object[key], depth + 1);
      });
    }
    if (c == '[') {
      ++pos;
      value.kind = Value::Kind::Array;
      return parseList(']', [&] {
        value.array.emplace_back();
        return parseValue(value.array.back(), depth + 1);
      });
    }
    if (c == '"') {
      value.kind = Value::Kind::String;
      return parseString(value.string);
    }
    if (literal("true")) {
      value.kind = Value::Kind::Bool;
      value.boolean = true;
      return true;
    }
    if (literal("false")) {
      value.kind = Value::Kind::Bool;
      return true;
    }
    if (literal("null"))
      return true;
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c)))
      return parseNumber(value);
    return fail(fmt::format("unexpected '{}'", c));
  }

  const std::string &text;
  size_t pos = 0;
  std::string error;
};
} // namespace

Result<Value> json::parse(const std::string &text) {
  return Parser(text).run();
}

std::string thdc::runtime::json::quote(const std::string &text) {
  static const char hex[] = "0123456789abcdef";
  std::string quoted = "\"";
  for (char c : text) {
    unsigned char byte = static_cast<unsigned char>(c);
    switch (c) {
    case '"':
      quoted += "\\\"";
      break;
    case '\\':
      quoted += "\\\\";
      break;
    case '\b':
      quoted += "\\b";
      break;
    case '\f':
      quoted += "\\f";
      break;
    case '\n':
      quoted += "\\n";
      break;
    case '\r':
      quoted += "\\r";
      break;
    case '\t':
      quoted += "\\t";
      break;
    default:
      if (byte < 0x20 || byte == 0x7f) {
        quoted += "\\u00";
        quoted += hex[byte >> 4];
        quoted += hex[byte & 15];
      } else {
        quoted += c;
      }
    }
  }
  return quoted + "\"";
}

void Writer::newline() {
  out += '\n';
  out.append(2 * empty.size(), ' ');
}

void Writer::beginValue() {
  if (afterKey) {
    afterKey = false;
    return;
  }
  if (empty.empty())
    return;
  if (!empty.back())
    out += ',';
  empty.back() = false;
  newline();
}

void Writer::key(const std::string &name) {
  beginValue();
  out += quote(name) + ": ";
  afterKey = true;
}

void Writer::open(char bracket, const std::function<void()> &contents,
                  char close) {
  beginValue();
  out += bracket;
  empty.push_back(true);
  contents();
  bool wasEmpty = empty.back();
  empty.pop_back();
  if (!wasEmpty)
    newline();
  out += close;
}

void Writer::object(const std::function<void()> &members) {
  open('{', members, '}');
}

void Writer::array(const std::function<void()> &elements) {
  open('[', elements, ']');
}

void Writer::value(const std::string &text) {
  beginValue();
  out += quote(text);
}

void Writer::value(int64_t number) {
  beginValue();
  out += std::to_string(number);
}

void Writer::value(bool boolean) {
  beginValue();
  out += boolean ? "true" : "false";
}

void Writer::attribute(const std::string &name, const std::string &text) {
  key(name);
  value(text);
}

void Writer::attribute(const std::string &name, int64_t number) {
  key(name);
  value(number);
}

void Writer::attributeObject(const std::string &name,
                             const std::function<void()> &members) {
  key(name);
  object(members);
}

void Writer::attributeArray(const std::string &name,
                            const std::function<void()> &elements) {
  key(name);
  array(elements);
}
