//===- ParamExprFuzzer.cpp - the parameter-expression parser --------------===//
//
// Arbitrary text as a parameter expression, evaluated over a few declared
// parameters and syntax-checked; neither may crash, hang or overflow.
//
//===----------------------------------------------------------------------===//

#include "dialect/ParamExpr.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string error;
  (void)thdc::evaluateParamExpr(
      text,
      [](llvm::StringRef name) -> std::optional<int64_t> {
        if (name == "C")
          return 32768;
        if (name == "cp")
          return 2;
        if (name == "N")
          return INT64_MAX;
        if (name == "M")
          return INT64_MIN;
        return std::nullopt;
      },
      error);
  error.clear();
  (void)thdc::isValidParamExprSyntax(text, error);
  std::string name;
  int64_t value = 0;
  (void)thdc::parseParamAssignment(text, name, value, error);
  return 0;
}
