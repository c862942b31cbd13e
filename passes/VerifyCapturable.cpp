//===- VerifyCapturable.cpp - can this pipeline go into a CUDA graph? -----===//

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

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

/// A reason a pipeline cannot be captured yet: found where it is, said once.
struct Finding {
  Location loc;
  std::string what;
};

struct VerifyCapturablePass
    : mlir::thd::impl::THDVerifyCapturableBase<VerifyCapturablePass> {
  void runOnOperation() override {
    // Unbound parameters and dynamic shapes are what thd-force-static-shapes
    // removes: before it, every op has some, and one refusal that says to
    // run it first stands for all of them. Host reads are reported one by
    // one: no earlier pass removes them.
    SmallVector<Finding> beforeStaticShapes;
    bool ok = true;
    auto dynamic = [&](Location loc, Twine what, Type type, StringRef why) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << what << " has the dynamic type '" << type << "'" << why;
      beforeStaticShapes.push_back({loc, os.str()});
    };
    getOperation().walk([&](Operation *op) {
      if (auto func = dyn_cast<func::FuncOp>(op)) {
        for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
          if (!isStatic(type))
            dynamic(func.getLoc(), "argument #" + Twine(i), type, "");
        for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
          if (!isStatic(type))
            dynamic(func.getLoc(), "result #" + Twine(i), type,
                    ", a data-dependent allocation");
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
        if (isa<ExprAttr>(attr.getValue()))
          beforeStaticShapes.push_back(
              {op->getLoc(), "'" + op->getName().getStringRef().str() +
                                 "' has '" + attr.getName().str() +
                                 "', an unbound parameter expression"});
      for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
        if (!isStatic(type))
          dynamic(op->getLoc(),
                  "'" + op->getName().getStringRef() + "' result #" + Twine(i),
                  type, ", a data-dependent allocation");
    });
    if (!beforeStaticShapes.empty()) {
      const Finding &first = beforeStaticShapes.front();
      InFlightDiagnostic error =
          emitError(first.loc) << "not capturable: " << first.what;
      if (size_t more = beforeStaticShapes.size() - 1)
        error << " (and " << more << " more unbound parameter"
              << (more > 1 ? "s or dynamic types" : " or dynamic type") << ")";
      error << "; run thd-force-static-shapes first, which binds the "
               "parameters and gives every value a static shape";
      ok = false;
    }
    if (!ok)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
