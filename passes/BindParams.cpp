//===- BindParams.cpp - replace parameter expressions by values -----------===//

#include "passes/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDBINDPARAMS
#include "passes/Passes.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

LogicalResult mlir::thd::bindPipelineParams(ModuleOp module) {
  Builder builder(module.getContext());
  auto bind = [&](Operation *owner, Attribute attr,
                  StringRef name) -> FailureOr<Attribute> {
    if (!isa<ExprAttr>(attr))
      return attr;
    FailureOr<int64_t> value = resolveIntOrParam(owner, attr, name);
    if (failed(value))
      return failure();
    return Attribute(builder.getI64IntegerAttr(*value));
  };

  WalkResult walk = module.walk([&](Operation *op) -> WalkResult {
    for (NamedAttribute attr : op->getAttrs()) {
      FailureOr<Attribute> bound =
          bind(op, attr.getValue(), attr.getName().getValue());
      if (failed(bound))
        return WalkResult::interrupt();
      if (*bound != attr.getValue())
        op->setAttr(attr.getName(), *bound);
    }
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func)
      return WalkResult::advance();
    StringAttr capacity = builder.getStringAttr(THDDialect::kCapacityAttrName);
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (Attribute attr = func.getArgAttr(i, capacity)) {
        FailureOr<Attribute> bound = bind(op, attr, capacity.getValue());
        if (failed(bound))
          return WalkResult::interrupt();
        func.setArgAttr(i, capacity, *bound);
      }
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (Attribute attr = func.getResultAttr(i, capacity)) {
        FailureOr<Attribute> bound = bind(op, attr, capacity.getValue());
        if (failed(bound))
          return WalkResult::interrupt();
        func.setResultAttr(i, capacity, *bound);
      }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  if (!module->hasAttr(THDDialect::kParamsAttrName))
    return success();
  SmallVector<NamedAttribute> effective;
  for (const auto &param : getPipelineParams(module))
    effective.push_back(builder.getNamedAttr(
        param.getKey(), builder.getI64IntegerAttr(param.getValue())));
  module->setAttr(THDDialect::kParamsAttrName,
                  builder.getDictionaryAttr(effective));
  return success();
}

namespace {
struct BindParamsPass : mlir::thd::impl::THDBindParamsBase<BindParamsPass> {
  void runOnOperation() override {
    if (failed(bindPipelineParams(getOperation())))
      signalPassFailure();
  }
};
} // namespace
