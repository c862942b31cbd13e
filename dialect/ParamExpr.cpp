//===- ParamExpr.cpp - integer expressions over pipeline parameters -------===//

#include "dialect/ParamExpr.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace thdc;

namespace {
/// Recursive-descent evaluator:
///   expr := term (('+' | '-') term)*
///   term := factor (('*' | '/') factor)*
///   factor := INT | NAME | '(' expr ')' | '-' factor
class Evaluator {
public:
  Evaluator(llvm::StringRef text, std::optional<ParamLookup> lookup,
            std::string &error)
      : text(text), lookup(lookup), error(error) {}

  std::optional<int64_t> run() {
    std::optional<int64_t> value = parseExpr();
    if (!value)
      return std::nullopt;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected '" + text.substr(pos, 1).str() + "'");
    return value;
  }

private:
  std::optional<int64_t> fail(const std::string &message) {
    if (error.empty())
      error = "in parameter expression \"" + text.str() + "\": " + message;
    return std::nullopt;
  }

  void skipSpace() {
    while (pos < text.size() && llvm::isSpace(text[pos]))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  /// A left-associative chain `operand (op operand)*` over the operators
  /// `first` and `second`, each step combined by `apply(op, lhs, rhs)`
  /// (nullopt after a failure).
  template <typename ParseOperand, typename Apply>
  std::optional<int64_t> parseChain(char first, char second,
                                    ParseOperand parseOperand, Apply apply) {
    std::optional<int64_t> lhs = parseOperand();
    while (lhs) {
      char op = consume(first) ? first : consume(second) ? second : 0;
      if (!op)
        break;
      std::optional<int64_t> rhs = parseOperand();
      if (!rhs)
        return std::nullopt;
      lhs = apply(op, *lhs, *rhs);
    }
    return lhs;
  }

  std::optional<int64_t> parseExpr() {
    return parseChain(
        '+', '-', [&] { return parseTerm(); },
        [&](char op, int64_t lhs, int64_t rhs) -> std::optional<int64_t> {
          int64_t result;
          bool overflow = op == '+' ? llvm::AddOverflow(lhs, rhs, result)
                                    : llvm::SubOverflow(lhs, rhs, result);
          if (overflow)
            return fail("integer overflow");
          return result;
        });
  }

  std::optional<int64_t> parseTerm() {
    return parseChain(
        '*', '/', [&] { return parseFactor(); },
        [&](char op, int64_t lhs, int64_t rhs) -> std::optional<int64_t> {
          int64_t result;
          if (op == '*') {
            if (llvm::MulOverflow(lhs, rhs, result))
              return fail("integer overflow");
            return result;
          }
          if (!lookup)
            return lhs; // syntax check only: placeholder values
          if (rhs == 0)
            return fail("division by zero");
          // INT64_MIN / -1 does not fit (and traps on x86).
          if (lhs == std::numeric_limits<int64_t>::min() && rhs == -1)
            return fail("integer overflow");
          if (lhs % rhs != 0)
            return fail(std::to_string(lhs) + " is not divisible by " +
                        std::to_string(rhs));
          return lhs / rhs;
        });
  }

  /// Parentheses and unary minus nest at most this deep, so that the
  /// recursion stays far from the stack's end.
  static constexpr int kMaxNesting = 200;

  std::optional<int64_t> parseFactor() {
    skipSpace();
    if (pos >= text.size())
      return fail("expected a number, a parameter name or '('");
    bool open = consume('(');
    bool minus = !open && consume('-');
    if (open || minus) {
      if (++nesting > kMaxNesting)
        return fail("nested more than " + std::to_string(kMaxNesting) +
                    " levels deep");
      std::optional<int64_t> inner = open ? parseExpr() : parseFactor();
      --nesting;
      if (!inner)
        return std::nullopt;
      if (open && !consume(')'))
        return fail("expected ')'");
      if (minus && *inner == std::numeric_limits<int64_t>::min())
        return fail("integer overflow");
      return minus ? -*inner : *inner;
    }
    char c = text[pos];
    if (llvm::isDigit(c)) {
      size_t start = pos;
      while (pos < text.size() && llvm::isDigit(text[pos]))
        ++pos;
      int64_t value;
      if (text.substr(start, pos - start).getAsInteger(10, value))
        return fail("integer literal out of range");
      return value;
    }
    if (llvm::isAlpha(c) || c == '_') {
      size_t start = pos;
      while (pos < text.size() &&
             (llvm::isAlnum(text[pos]) || text[pos] == '_'))
        ++pos;
      llvm::StringRef name = text.substr(start, pos - start);
      if (!lookup)
        return 1; // syntax check only
      std::optional<int64_t> value = (*lookup)(name);
      if (!value)
        return fail("parameter '" + name.str() + "' is not declared");
      return value;
    }
    return fail("unexpected '" + std::string(1, c) + "'");
  }

  llvm::StringRef text;
  std::optional<ParamLookup> lookup;
  std::string &error;
  size_t pos = 0;
  int nesting = 0;
};
} // namespace

std::optional<int64_t> thdc::evaluateParamExpr(llvm::StringRef text,
                                               ParamLookup lookup,
                                               std::string &error) {
  error.clear();
  return Evaluator(text, lookup, error).run();
}

bool thdc::isValidParamExprSyntax(llvm::StringRef text, std::string &error) {
  error.clear();
  return Evaluator(text, std::nullopt, error).run().has_value();
}

bool thdc::parseParamAssignment(llvm::StringRef assignment, std::string &name,
                                int64_t &value, std::string &error) {
  auto [lhs, rhs] = assignment.split('=');
  lhs = lhs.trim();
  rhs = rhs.trim();
  if (!assignment.contains('=') || lhs.empty() || rhs.empty()) {
    error = "expected NAME=VALUE in --param, got '" + assignment.str() + "'";
    return false;
  }
  if (!llvm::all_of(lhs, [](char c) { return llvm::isAlnum(c) || c == '_'; }) ||
      llvm::isDigit(lhs.front())) {
    error = "invalid parameter name '" + lhs.str() + "' in --param";
    return false;
  }
  // A value names no parameter: "C=abc" is not a number, whatever the
  // expression evaluator would say of a name it does not know.
  if (llvm::any_of(rhs, [](char c) { return llvm::isAlpha(c) || c == '_'; })) {
    error = "invalid value for --param " + lhs.str() + ": '" + rhs.str() +
            "' is not a number (a value is an integer or an expression of "
            "integers, e.g. 32768 or 32*1024)";
    return false;
  }
  std::optional<int64_t> parsed = evaluateParamExpr(
      rhs, [](llvm::StringRef) { return std::optional<int64_t>(); }, error);
  if (!parsed) {
    error = "invalid value for --param " + lhs.str() + ": " + error;
    return false;
  }
  // Every parameter is a size, a count or a rank (the ops check each use
  // against its own minimum); none is negative.
  if (*parsed < 0) {
    error = "invalid value for --param " + lhs.str() + ": '" + rhs.str() +
            "' is negative; parameters are sizes and counts";
    return false;
  }
  name = lhs.str();
  value = *parsed;
  return true;
}
