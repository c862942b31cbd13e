//===- Register.cpp - attach the element lowering to every step -----------===//

#include "codegen/lowering/StepLowering.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::thd;

namespace {
/// Forwards the interface to the step's functions in StepLowering.h; an op
/// without them fails to compile here.
template <typename OpT>
struct StepElementModel
    : ElementLoweringOpInterface::ExternalModel<StepElementModel<OpT>, OpT> {
  Value emitElement(Operation *op, ElementEmitter &emitter, OpResult result,
                    Value at) const {
    return lowerElement(cast<OpT>(op), emitter, result, at);
  }
  Value emitRowCount(Operation *op, ElementEmitter &emitter,
                     OpResult result) const {
    return lowerRowCount(cast<OpT>(op), emitter, result);
  }
};

/// Fused kernels and their terminators are structure, not steps: the
/// emitter looks through them to the yielded values.
template <typename OpT>
constexpr bool isStructural =
    std::is_same_v<OpT, FusedOp> || std::is_same_v<OpT, YieldOp>;

template <typename... Ops> void attachStepModels(MLIRContext *context) {
  (
      [&] {
        if constexpr (!isStructural<Ops>)
          Ops::template attachInterface<StepElementModel<Ops>>(*context);
      }(),
      ...);
}
} // namespace

Value mlir::thd::noRowCount(Operation *op, ElementEmitter &e) {
  op->emitOpError("has no per-token result to count the rows of");
  e.fail();
  return Value();
}

void mlir::thd::registerElementLoweringModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, THDDialect *) {
    attachStepModels<
#define GET_OP_LIST
#include "dialect/THDOps.cpp.inc"
        >(context);
  });
}
