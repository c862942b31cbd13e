//===- ParamOptions.cpp - the `--param NAME=VALUE` option -----------------===//

#include "tools/ParamOptions.h"
#include "dialect/ParamExpr.h"
#include "dialect/THDDialect.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace {
struct ParamOption {
  llvm::cl::list<std::string> values{
      "param",
      llvm::cl::desc("Override a pipeline parameter declared in thd.params "
                     "(repeatable), e.g. --param C=32768"),
      llvm::cl::value_desc("NAME=VALUE")};
};
llvm::ManagedStatic<ParamOption> paramOption;

llvm::StringMap<int64_t> parseOverrides();
} // namespace

llvm::StringMap<int64_t> thdc::parsedParamOverrides() {
  return parseOverrides();
}

namespace {
llvm::StringMap<int64_t> parseOverrides() {
  llvm::StringMap<int64_t> overrides;
  for (const std::string &assignment : paramOption->values) {
    std::string name, error;
    int64_t value;
    if (!thdc::parseParamAssignment(assignment, name, value, error)) {
      llvm::errs() << "error: " << error << "\n";
      std::exit(1);
    }
    overrides[name] = value;
  }
  return overrides;
}
} // namespace

void thdc::registerParamOption(llvm::cl::OptionCategory &category) {
  paramOption->values.addCategory(category);
}

void thdc::addParamOverrides(mlir::DialectRegistry &registry) {
  registry.addExtension(+[](mlir::MLIRContext *, mlir::thd::THDDialect *thd) {
    thd->setParamOverrides(parseOverrides());
  });
}
