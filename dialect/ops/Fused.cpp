//===- Fused.cpp - the fused kernel op ------------------------------------===//
//
// The verifier and StepOpInterface methods of thd.fused, the region that
// holds the steps of one kernel: its results are what its body yields.
//
//===----------------------------------------------------------------------===//

#include "dialect/ops/Common.h"

using namespace mlir;
using namespace mlir::thd;

//===----------------------------------------------------------------------===//
// Op verifiers
//===----------------------------------------------------------------------===//

LogicalResult FusedOp::verify() {
  // Runs before the region's terminator trait is checked: the body may end
  // in anything (or be empty) here.
  Block &body = getBody().front();
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError() << "must end its body with 'thd.yield', got "
                         << (body.empty() ? std::string("an empty body")
                                          : "'" +
                                                body.back()
                                                    .getName()
                                                    .getStringRef()
                                                    .str() +
                                                "'");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values of types " << yield.getValues().getTypes()
                         << " but has results of types " << getResultTypes();
  for (Operation &op : getBody().front().without_terminator()) {
    bool isConstant = op.hasTrait<OpTrait::ConstantLike>();
    if ((!isa<THDDialect>(op.getDialect()) && !isConstant) || isa<FusedOp>(op))
      return op.emitOpError() << "cannot run inside a fused kernel: only "
                                 "thd steps and constants can";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// StepOpInterface: static result lengths and result kinds
//
// Called by thd-force-static-shapes once the operands are static and the
// parameters bound (integer attributes).
//===----------------------------------------------------------------------===//

ValueRange FusedOp::getYieldedValues() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues();
}

Lengths FusedOp::inferStaticLengths() {
  SmallVector<int64_t> lengths;
  for (Value value : getYieldedValues())
    lengths.push_back(staticLengthOf(value));
  return lengths;
}
ResultKind FusedOp::getResultKind(unsigned index) {
  Value yielded = getYieldedValues()[index];
  if (auto step = yielded.getDefiningOp<StepOpInterface>())
    return step.getResultKind(cast<OpResult>(yielded).getResultNumber());
  return ResultKind::Rows; // a kernel input passed through
}
