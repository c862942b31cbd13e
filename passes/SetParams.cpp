//===- SetParams.cpp - set the values of pipeline parameters --------------===//

#include "dialect/ParamExpr.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDSETPARAMS
#include "passes/Passes.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

std::unique_ptr<Pass>
mlir::thd::createSetParamsPass(const llvm::StringMap<int64_t> &values) {
  THDSetParamsOptions options;
  for (const auto &value : values)
    options.params.push_back(value.getKey().str() + "=" +
                             std::to_string(value.getValue()));
  // The printed pipeline (--dump-pass-pipeline, reproducers) should not
  // depend on the map's hashing.
  llvm::sort(options.params);
  return createTHDSetParams(options);
}

namespace {
struct SetParamsPass : mlir::thd::impl::THDSetParamsBase<SetParamsPass> {
  using THDSetParamsBase::THDSetParamsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringMap<int64_t> values;
    for (const std::string &assignment : params) {
      std::string name, error;
      int64_t value = 0;
      if (!thdc::parseParamAssignment(assignment, name, value, error)) {
        module.emitError() << "thd-set-params: " << error;
        return signalPassFailure();
      }
      values[name] = value;
    }
    if (failed(applyParamOverrides(module, values)))
      signalPassFailure();
  }
};
} // namespace
