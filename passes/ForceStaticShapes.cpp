//===- ForceStaticShapes.cpp - every tensor static at its capacity --------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDFORCESTATICSHAPES
#include "passes/Passes.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
bool isAddressableLength(int64_t length) {
  return length >= 1 && length <= kMaxStaticLength;
}

InFlightDiagnostic emitLengthError(Operation *op, const Twine &what,
                                   int64_t length) {
  return op->emitOpError()
         << "cannot be made static: " << what << " would have " << length
         << " rows; thdc needs 1 to " << kMaxStaticLength
         << " (offsets and GPU indices are 32-bit, and an empty buffer has "
            "nothing to read)";
}

RankedTensorType withLength(Type type, int64_t length) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get({length}, tensor.getElementType());
}

LogicalResult forceStaticShapes(func::FuncOp func) {
  bool ok = true;
  Block &entry = func.front();
  SmallVector<Type> argTypes;
  for (BlockArgument arg : entry.getArguments()) {
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (!tensor || tensor.hasStaticShape()) {
      argTypes.push_back(arg.getType());
      continue;
    }
    auto capacity = func.getArgAttrOfType<IntegerAttr>(
        arg.getArgNumber(), THDDialect::kCapacityAttrName);
    if (!capacity || tensor.getRank() != 1) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    THDDialect::kNameAttrName);
      func.emitError() << "cannot make argument #" << arg.getArgNumber()
                       << (name ? " ('" + name.getValue().str() + "')" : "")
                       << " static: it has the dynamic type " << tensor
                       << " and no 'thd.capacity'; declare its largest "
                          "length, e.g. {thd.capacity = #thd.expr<\"C*cp\">}";
      ok = false;
      argTypes.push_back(arg.getType());
      continue;
    }
    if (!isAddressableLength(capacity.getInt())) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    THDDialect::kNameAttrName);
      emitLengthError(func, "argument #" + Twine(arg.getArgNumber()) +
                                (name ? " ('" + name.getValue() + "')" : ""),
                      capacity.getInt());
      ok = false;
      argTypes.push_back(arg.getType());
      continue;
    }
    arg.setType(withLength(tensor, capacity.getInt()));
    argTypes.push_back(arg.getType());
  }
  if (!ok)
    return failure();

  // The first op that cannot be bounded stops the walk: its users would only
  // repeat the error.
  WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
    if (isa<func::ReturnOp>(op))
      return WalkResult::advance();
    if (!isa<THDDialect>(op->getDialect())) {
      if (llvm::all_of(op->getResultTypes(), [](Type type) {
            auto shaped = dyn_cast<ShapedType>(type);
            return !shaped || shaped.hasStaticShape();
          }))
        return WalkResult::advance();
      op->emitOpError() << "cannot be made static: thdc does not know how to "
                           "bound the shape of this op's results";
      return WalkResult::interrupt();
    }
    if (isa<YieldOp>(op))
      return WalkResult::advance();
    auto step = dyn_cast<StepOpInterface>(op);
    if (!step) {
      op->emitOpError() << "cannot be made static: thdc does not know how to "
                           "bound the shape of this op's results";
      return WalkResult::interrupt();
    }
    FailureOr<SmallVector<int64_t>> lengths = step.inferStaticLengths();
    if (failed(lengths))
      return WalkResult::interrupt();
    for (auto [index, length] : llvm::enumerate(*lengths))
      if (!isAddressableLength(length)) {
        emitLengthError(op, "result #" + Twine(index), length);
        return WalkResult::interrupt();
      }
    for (auto [result, length] : llvm::zip(op->getResults(), *lengths))
      result.setType(withLength(result.getType(), length));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  func.setFunctionType(
      FunctionType::get(func.getContext(), argTypes, ret.getOperandTypes()));
  return success();
}

struct ForceStaticShapesPass
    : mlir::thd::impl::THDForceStaticShapesBase<ForceStaticShapesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(bindPipelineParams(module)))
      return signalPassFailure();
    bool ok = true;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && failed(forceStaticShapes(func)))
        ok = false;
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
