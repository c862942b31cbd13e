//===- ForceStaticShapes.cpp - every tensor static at its capacity --------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::thd {
#define GEN_PASS_DEF_THDFORCESTATICSHAPES
#include "passes/Passes.h.inc"
} // namespace mlir::thd

using namespace mlir;
using namespace mlir::thd;

namespace {
int64_t intValue(Attribute attr) { return cast<IntegerAttr>(attr).getInt(); }

int64_t lengthOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getDimSize(0);
}

/// Offsets and GPU row indices are 32-bit, and an empty buffer has no row to
/// load: every static length must be in [1, 2^31 - 1].
constexpr int64_t kMaxLength = INT32_MAX;

bool isAddressableLength(int64_t length) {
  return length >= 1 && length <= kMaxLength;
}

InFlightDiagnostic emitLengthError(Operation *op, const Twine &what,
                                   int64_t length) {
  return op->emitOpError()
         << "cannot be made static: " << what << " would have " << length
         << " rows; thdc needs 1 to " << kMaxLength
         << " (offsets and GPU indices are 32-bit, and an empty buffer has "
            "nothing to read)";
}

RankedTensorType withLength(Type type, int64_t length) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get({length}, tensor.getElementType());
}

/// The static result lengths of `op` given that its operands are static
/// already; emits an error naming the reason and fails otherwise.
FailureOr<SmallVector<int64_t>> capacitiesOf(Operation *op) {
  auto fromCapacity =
      [&](Attribute capacity) -> FailureOr<SmallVector<int64_t>> {
    if (!capacity)
      return op->emitOpError()
             << "cannot be made static: its result has "
                "cu_seqlens_padded[num_seqs] rows, a value known only on the "
                "device; bound it with a 'capacity' (for example capacity "
                "\"C*cp\")";
    return SmallVector<int64_t>{intValue(capacity)};
  };
  return TypeSwitch<Operation *, FailureOr<SmallVector<int64_t>>>(op)
      .Case([](AlignLengthsOp op) {
        return SmallVector<int64_t>{lengthOf(op.getValidLens())};
      })
      .Case([](GatherOp op) {
        return SmallVector<int64_t>{lengthOf(op.getIds())};
      })
      .Case([](CuSeqlensOp op) {
        return SmallVector<int64_t>{lengthOf(op.getLengths()) + 1};
      })
      .Case([&](PackOp op) { return fromCapacity(op.getCapacityAttr()); })
      .Case(
          [&](PaddingMaskOp op) { return fromCapacity(op.getCapacityAttr()); })
      .Case(
          [&](PositionIdsOp op) { return fromCapacity(op.getCapacityAttr()); })
      .Case([](MaxSeqlenOp) { return SmallVector<int64_t>{1}; })
      .Case([](ValidateOp) {
        return SmallVector<int64_t>{1, 1};
      })
      .Case([&](SanitizeOp op) -> FailureOr<SmallVector<int64_t>> {
        int64_t rows = lengthOf(op.getInput()),
                maskRows = lengthOf(op.getMask());
        if (rows != maskRows)
          return op.emitOpError()
                 << "cannot be made static: the input's "
                    "capacity is "
                 << rows << " rows but the mask's is " << maskRows;
        return SmallVector<int64_t>{rows};
      })
      .Case([&](CpSliceOp op) -> FailureOr<SmallVector<int64_t>> {
        int64_t rows = lengthOf(op.getInput()), cp = intValue(op.getCp());
        int64_t multiple =
            cp == 1 ? 1 : (op.getMode() == CpMode::zigzag ? 2 * cp : cp);
        if (rows % multiple != 0)
          return op.emitOpError()
                 << "cannot be made static: the input's capacity " << rows
                 << " is not divisible by " << multiple
                 << ", so the rank's share has no whole number of rows";
        return SmallVector<int64_t>{rows / cp};
      })
      .Case([](RopePositionsOp op) {
        return SmallVector<int64_t>{intValue(op.getLength())};
      })
      .Case([](SeqIdxOp op) {
        return SmallVector<int64_t>{intValue(op.getLength())};
      })
      .Case([&](PadTailOp op) -> FailureOr<SmallVector<int64_t>> {
        if (!op.getTargetAttr())
          return op.emitOpError()
                 << "cannot be made static: with 'alignment' its length "
                    "round_up(rows, alignment) depends on the data; pad to "
                    "a 'target' instead (graph mode pads to C)";
        int64_t target = intValue(op.getTargetAttr());
        int64_t rows = lengthOf(op.getInput());
        if (rows > target)
          return op.emitOpError()
                 << "cannot be made static: the input's capacity " << rows
                 << " exceeds the target " << target
                 << ", so a full input would be truncated";
        return SmallVector<int64_t>{target};
      })
      .Case([&](PadTailMetadataOp op) -> FailureOr<SmallVector<int64_t>> {
        if (!op.getMaxSeqsAttr())
          return op.emitOpError()
                 << "cannot be made static: without 'max_seqs' the number "
                    "of entries depends on the data (a dummy sequence may be "
                    "appended); set max_seqs (graph mode uses N)";
        int64_t maxSeqs = intValue(op.getMaxSeqsAttr());
        if (maxSeqs < 0 || maxSeqs >= kMaxLength)
          return emitLengthError(op, "its cu_seqlens outputs", maxSeqs)
                 << " (max_seqs + 1 entries)";
        int64_t entries = maxSeqs + 1;
        return SmallVector<int64_t>{entries, entries, 1, 1};
      })
      .Case([](FusedOp op) {
        SmallVector<int64_t> lengths;
        auto yield = cast<YieldOp>(op.getBody().front().getTerminator());
        for (Value value : yield.getValues())
          lengths.push_back(lengthOf(value));
        return lengths;
      })
      .Case([](YieldOp) { return SmallVector<int64_t>{}; })
      .Case([](PadCuSeqlensOp op) {
        return SmallVector<int64_t>{intValue(op.getEntries())};
      })
      .Default([](Operation *op) -> FailureOr<SmallVector<int64_t>> {
        return op->emitOpError()
               << "cannot be made static: thdc does not know how to bound "
                  "the shape of this op's results";
      });
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
    FailureOr<SmallVector<int64_t>> lengths = capacitiesOf(op);
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
