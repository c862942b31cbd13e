//===- ParamExprTest.cpp - parameter expressions and --param values -------===//

#include "dialect/ParamExpr.h"

#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

using namespace thdc;

namespace {
std::optional<int64_t> eval(llvm::StringRef text, std::string &error) {
  llvm::StringMap<int64_t> params{{"C", 32768}, {"cp", 4}, {"N", 128}};
  return evaluateParamExpr(
      text,
      [&](llvm::StringRef name) -> std::optional<int64_t> {
        auto it = params.find(name);
        if (it == params.end())
          return std::nullopt;
        return it->getValue();
      },
      error);
}

int64_t evalOk(llvm::StringRef text) {
  std::string error;
  std::optional<int64_t> value = eval(text, error);
  EXPECT_TRUE(value.has_value()) << text.str() << ": " << error;
  return value.value_or(-1);
}

std::string evalError(llvm::StringRef text) {
  std::string error;
  EXPECT_FALSE(eval(text, error).has_value()) << text.str();
  return error;
}
} // namespace

TEST(ParamExpr, EvaluatesWithPrecedenceAndParentheses) {
  EXPECT_EQ(evalOk("C*cp"), 131072);
  EXPECT_EQ(evalOk("N+1"), 129);
  EXPECT_EQ(evalOk("N-1"), 127);
  EXPECT_EQ(evalOk("2 + 3 * 4"), 14);
  EXPECT_EQ(evalOk("(2 + 3) * 4"), 20);
  EXPECT_EQ(evalOk("C / cp / 2"), 4096);
  EXPECT_EQ(evalOk("-C*cp"), -131072);
  EXPECT_EQ(evalOk("  7 "), 7);
}

TEST(ParamExpr, ReportsUndeclaredNames) {
  EXPECT_EQ(evalError("C*tp"),
            "in parameter expression \"C*tp\": parameter 'tp' is not declared");
}

TEST(ParamExpr, ReportsSyntaxErrors) {
  EXPECT_NE(evalError("C*").find("expected a number, a parameter name or '('"),
            std::string::npos);
  EXPECT_NE(evalError("(C").find("expected ')'"), std::string::npos);
  EXPECT_NE(evalError("C cp").find("unexpected 'c'"), std::string::npos);
  EXPECT_NE(evalError("C % 2").find("unexpected '%'"), std::string::npos);
  EXPECT_NE(evalError("").find("expected a number"), std::string::npos);
}

TEST(ParamExpr, ReportsInexactDivisionAndDivisionByZero) {
  EXPECT_NE(evalError("C/3").find("32768 is not divisible by 3"),
            std::string::npos);
  EXPECT_NE(evalError("C/(cp-4)").find("division by zero"), std::string::npos);
}

TEST(ParamExpr, ReportsOverflow) {
  EXPECT_NE(evalError("C*C*C*C*C").find("integer overflow"), std::string::npos);
  EXPECT_NE(evalError("99999999999999999999").find("out of range"),
            std::string::npos);
}

TEST(ParamExpr, MostNegativeOverflowsInsteadOfTrapping) {
  // INT64_MIN / -1 raised SIGFPE in every tool; -INT64_MIN was undefined.
  EXPECT_NE(evalError("(-9223372036854775807-1)/(0-1)").find("integer overflow"),
            std::string::npos);
  EXPECT_NE(evalError("-(-9223372036854775807-1)").find("integer overflow"),
            std::string::npos);
  EXPECT_EQ(evalOk("-9223372036854775807-1"), INT64_MIN);
}

TEST(ParamExpr, DeepNestingIsAnErrorNotAStackOverflow) {
  // 30,000 leading '-' overflowed the stack.
  std::string minus(30000, '-');
  EXPECT_NE(evalError(minus + "1").find("nested more than 200 levels deep"),
            std::string::npos);
  std::string parens = std::string(30000, '(') + "1" + std::string(30000, ')');
  EXPECT_NE(evalError(parens).find("nested more than 200 levels deep"),
            std::string::npos);
  std::string error;
  EXPECT_FALSE(isValidParamExprSyntax(minus + "1", error));
  EXPECT_EQ(evalOk(std::string(100, '(') + "C" + std::string(100, ')')), 32768);
  EXPECT_EQ(evalOk("--C"), 32768);
}

TEST(ParamExpr, SyntaxCheckDoesNotLookUpNames) {
  std::string error;
  EXPECT_TRUE(isValidParamExprSyntax("C*cp/(cp-2)", error)) << error;
  EXPECT_FALSE(isValidParamExprSyntax("C*", error));
}

TEST(ParamAssignment, ParsesNameAndValue) {
  std::string name, error;
  int64_t value = 0;
  ASSERT_TRUE(parseParamAssignment("C=32768", name, value, error)) << error;
  EXPECT_EQ(name, "C");
  EXPECT_EQ(value, 32768);
  ASSERT_TRUE(parseParamAssignment(" cp = 2*4 ", name, value, error)) << error;
  EXPECT_EQ(name, "cp");
  EXPECT_EQ(value, 8);
}

TEST(ParamAssignment, RejectsMalformedAssignments) {
  std::string name, error;
  int64_t value = 0;
  EXPECT_FALSE(parseParamAssignment("C", name, value, error));
  EXPECT_EQ(error, "expected NAME=VALUE in --param, got 'C'");
  EXPECT_FALSE(parseParamAssignment("=4", name, value, error));
  EXPECT_FALSE(parseParamAssignment("1C=4", name, value, error));
  EXPECT_EQ(error, "invalid parameter name '1C' in --param");
  // A name as the value is no number (it said "parameter 'abc' is not
  // declared", as if abc were a parameter to declare).
  EXPECT_FALSE(parseParamAssignment("C=N", name, value, error));
  EXPECT_EQ(error, "invalid value for --param C: 'N' is not a number (a value "
                   "is an integer or an expression of integers, e.g. 32768 or "
                   "32*1024)");
  EXPECT_FALSE(parseParamAssignment("C=abc", name, value, error));
  EXPECT_NE(error.find("'abc' is not a number"), std::string::npos);
  EXPECT_FALSE(parseParamAssignment("C=2*x_1", name, value, error));
  EXPECT_NE(error.find("'2*x_1' is not a number"), std::string::npos);
}

TEST(ParamAssignment, RejectsNegativeValues) {
  std::string name, error;
  int64_t value = 0;
  EXPECT_FALSE(parseParamAssignment("N=8-16", name, value, error));
  EXPECT_EQ(error, "invalid value for --param N: '8-16' is negative; "
                   "parameters are sizes and counts");
  ASSERT_TRUE(parseParamAssignment("N=0", name, value, error)) << error;
  EXPECT_EQ(value, 0);
}
