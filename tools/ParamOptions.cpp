//===- ParamOptions.cpp - the `--param NAME=VALUE` option -----------------===//

#include "tools/ParamOptions.h"
#include "dialect/ParamExpr.h"
#include "dialect/THDDialect.h"

#include "mlir/IR/MLIRContext.h"
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
    // Every parameter is a size, a count or a rank (the ops check each use
    // against its own minimum); none is negative.
    if (value < 0)
      return llvm::createStringError(
          "invalid value for --param " + name + ": '" +
          llvm::StringRef(assignment).split('=').second.trim().str() +
          "' is negative; parameters are sizes and counts");
    overrides[name] = value;
  }
  return overrides;
}

void thdc::addParamOverrides(mlir::DialectRegistry &registry,
                             llvm::StringMap<int64_t> overrides) {
  // Extensions are plain functions: the values wait in a static.
  static llvm::StringMap<int64_t> applied;
  applied = std::move(overrides);
  registry.addExtension(+[](mlir::MLIRContext *, mlir::thd::THDDialect *thd) {
    thd->setParamOverrides(applied);
  });
}
