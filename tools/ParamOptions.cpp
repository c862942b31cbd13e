//===- ParamOptions.cpp - the `--param NAME=VALUE` option -----------------===//

#include "tools/ParamOptions.h"
#include "dialect/ParamExpr.h"
#include "dialect/THDDialect.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"

#include <utility>

namespace {
/// One `--param NAME=VALUE`, checked while the command line is parsed: a
/// malformed value is reported by the tool's command-line parser, naming the
/// option, like any other bad option.
struct ParamAssignment {
  std::string name;
  int64_t value = 0;
};

class ParamAssignmentParser : public llvm::cl::basic_parser<ParamAssignment> {
public:
  using llvm::cl::basic_parser<ParamAssignment>::basic_parser;
  llvm::StringRef getValueName() const override { return "NAME=VALUE"; }
  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef text,
             ParamAssignment &assignment) {
    std::string error;
    if (!thdc::parseParamAssignment(text, assignment.name, assignment.value,
                                    error))
      return option.error(error);
    return false;
  }
};

struct ParamOption {
  llvm::cl::list<ParamAssignment, bool, ParamAssignmentParser> values{
      "param",
      llvm::cl::desc("Override a pipeline parameter declared in thd.params "
                     "(repeatable), e.g. --param C=32768"),
      llvm::cl::value_desc("NAME=VALUE")};
};
llvm::ManagedStatic<ParamOption> paramOption;
} // namespace

llvm::StringMap<int64_t> thdc::parsedParamOverrides() {
  llvm::StringMap<int64_t> overrides;
  for (const ParamAssignment &assignment : paramOption->values)
    overrides[assignment.name] = assignment.value;
  return overrides;
}

void thdc::registerParamOption() { *paramOption; }

void thdc::addParamOverrides(mlir::DialectRegistry &registry) {
  registry.addExtension(+[](mlir::MLIRContext *, mlir::thd::THDDialect *thd) {
    thd->setParamOverrides(parsedParamOverrides());
  });
}
