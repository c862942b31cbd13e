//===- Fuse.cpp - the steps of a pipeline become one kernel ---------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDFUSE
#include "passes/Passes.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
bool isStep(Operation *op) {
  return isa<THDDialect>(op->getDialect()) && !isa<FusedOp, YieldOp>(op);
}

LogicalResult fuse(func::FuncOp func) {
  Block &body = func.front();
  SmallVector<Operation *> steps;
  for (Operation &op : body)
    if (isStep(&op))
      steps.push_back(&op);
  if (steps.empty())
    return success();

  llvm::SmallPtrSet<Operation *, 32> inKernel(steps.begin(), steps.end());
  // Every other op between the steps must not need a step's result: the
  // kernel would have to stop for it.
  for (Operation *op = steps.front(); op != steps.back();
       op = op->getNextNode()) {
    if (inKernel.contains(op) || isa<arith::ConstantOp>(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && inKernel.contains(def))
        return op->emitOpError()
               << "stands between the steps of '" << func.getName()
               << "' and uses the result of '" << def->getName()
               << "': the steps cannot be fused into one kernel";
  }

  // Results of the kernel: step values used outside it.
  SmallVector<Value> outputs;
  for (Operation *op : steps)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !inKernel.contains(user);
          }))
        outputs.push_back(result);

  OpBuilder b(steps.back()->getNextNode());
  auto fused =
      FusedOp::create(b, func.getLoc(), ValueRange(outputs).getTypes());
  Block *kernel = b.createBlock(&fused.getBody());
  b.setInsertionPointToStart(kernel);
  auto yield = YieldOp::create(b, func.getLoc(), outputs);
  for (Operation *op : steps)
    op->moveBefore(yield);
  // Constants are rematerialised inside so that the kernel reads no value
  // computed by the host; copies left without a use go away.
  llvm::SetVector<Operation *> outsideConstants;
  kernel->walk([&](Operation *op) {
    for (OpOperand &operand : op->getOpOperands())
      if (auto constant = operand.get().getDefiningOp<arith::ConstantOp>())
        if (!fused->isAncestor(constant)) {
          OpBuilder inside(kernel, kernel->begin());
          operand.set(inside.clone(*constant)->getResult(0));
          outsideConstants.insert(constant);
        }
  });
  for (Operation *constant : outsideConstants)
    if (constant->use_empty())
      constant->erase();
  for (auto [output, result] : llvm::zip(outputs, fused.getResults()))
    output.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !fused->isAncestor(use.getOwner());
    });
  return success();
}

struct FusePass : mlir::thd::impl::THDFuseBase<FusePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(fuse(func)))
        return signalPassFailure();
  }
};
} // namespace
