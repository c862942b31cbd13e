//===- VerifyCapturable.cpp - can this pipeline go into a CUDA graph? -----===//

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDVERIFYCAPTURABLE
#include "passes/Passes.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
bool isStatic(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return !shaped || shaped.hasStaticShape();
}

struct VerifyCapturablePass
    : mlir::thd::impl::THDVerifyCapturableBase<VerifyCapturablePass> {
  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](Operation *op) {
      if (auto func = dyn_cast<func::FuncOp>(op)) {
        for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
          if (!isStatic(type)) {
            func.emitError()
                << "not capturable: argument #" << i << " has the dynamic type "
                << type << " (run thd-force-static-shapes first)";
            ok = false;
          }
        for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
          if (!isStatic(type)) {
            func.emitError()
                << "not capturable: result #" << i << " has the dynamic type "
                << type << ", a data-dependent allocation";
            ok = false;
          }
        return;
      }
      if (isa<ModuleOp>(op))
        return;
      if (!isa<THDDialect>(op->getDialect()) &&
          !isa<func::ReturnOp, arith::ConstantOp>(op)) {
        op->emitOpError() << "not capturable: the host would need its "
                             "result; only thd ops run inside the graph";
        ok = false;
        return;
      }
      for (NamedAttribute attr : op->getAttrs())
        if (isa<ExprAttr>(attr.getValue())) {
          op->emitOpError() << "not capturable: '" << attr.getName().getValue()
                            << "' is an unbound parameter expression";
          ok = false;
        }
      for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
        if (!isStatic(type)) {
          op->emitOpError()
              << "not capturable: result #" << i << " has the dynamic type "
              << type << ", a data-dependent allocation";
          ok = false;
        }
    });
    if (!ok)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
