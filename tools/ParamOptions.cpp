//===- ParamOptions.cpp - the `--param NAME=VALUE` option -----------------===//

#include "tools/ParamOptions.h"
#include "dialect/ParamExpr.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"

namespace {
struct ParamOption {
  llvm::cl::list<std::string> values{
      "param",
      llvm::cl::desc("Override a pipeline parameter declared in thd.params "
                     "(repeatable), e.g. --param C=32768"),
      llvm::cl::value_desc("NAME=VALUE")};
};
llvm::ManagedStatic<ParamOption> paramOption;
} // namespace

void thdc::registerParamOption(llvm::cl::OptionCategory &category) {
  paramOption->values.addCategory(category);
}

llvm::Expected<llvm::StringMap<int64_t>> thdc::parsedParamOverrides() {
  llvm::StringMap<int64_t> overrides;
  for (const std::string &assignment : paramOption->values) {
    std::string name, error;
    int64_t value;
    if (!parseParamAssignment(assignment, name, value, error))
      return llvm::createStringError(error);
    overrides[name] = value;
  }
  return overrides;
}
