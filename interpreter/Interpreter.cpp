//===- Interpreter.cpp - reference interpreter of thd pipelines -----------===//
//
// The driver: runs a pipeline function block by block, dispatching every op
// to its evaluate overload (Evaluate.h) through the dialect's generated op
// list, so an op added to THDOps.td without an overload does not compile.
// Fused ops are evaluated through their bodies.
//
//===----------------------------------------------------------------------===//

#include "interpreter/Interpreter.h"
#include "interpreter/Evaluate.h"

#include "dialect/THDDialect.h"
#include "dialect/THDOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

using namespace mlir;
using namespace mlir::thd;

namespace thdc::interpreter {

namespace {
LogicalResult evaluateBlock(Block &block, Environment &env);
} // namespace

LogicalResult evaluate(FusedOp op, Environment &env) {
  Block &body = op.getBody().front();
  if (failed(evaluateBlock(body, env)))
    return failure();
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [result, yielded] : llvm::zip(op.getResults(), yield.getValues()))
    env.bind(result, env[yielded]);
  return success();
}

/// The terminator of a fused op's body: its operands become the fused op's
/// results (see the FusedOp overload).
LogicalResult evaluate(YieldOp, Environment &) { return success(); }

namespace {

//===----------------------------------------------------------------------===//
// Dispatch over the dialect's op list
//===----------------------------------------------------------------------===//

/// Evaluates `op` with the overload of its class among `Ops`; std::nullopt
/// when it is none of them. Every class of `Ops` needs an overload.
template <typename... Ops> struct Dispatch {
  static std::optional<LogicalResult> evaluateAny(Operation *op,
                                                  Environment &env) {
    std::optional<LogicalResult> result;
    (void)((isa<Ops>(op) ? (result = evaluate(cast<Ops>(op), env), true)
                         : false) ||
           ...);
    return result;
  }
};

using THDDispatch = Dispatch<
#define GET_OP_LIST
#include "dialect/THDOps.cpp.inc"
    >;

LogicalResult evaluateBlock(Block &block, Environment &env) {
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    std::optional<LogicalResult> result = THDDispatch::evaluateAny(&op, env);
    if (!result)
      return op.emitOpError()
             << "cannot be evaluated: the interpreter evaluates thd ops only";
    if (failed(*result))
      return failure();
  }
  return success();
}

} // namespace

FailureOr<std::vector<Buffer>> run(func::FuncOp function,
                                   ArrayRef<Buffer> inputs) {
  if (function.isExternal())
    return function.emitOpError() << "has no body to interpret";
  Block &entry = function.front();
  if (inputs.size() != entry.getNumArguments())
    return function.emitOpError()
           << "takes " << entry.getNumArguments() << " arguments but "
           << inputs.size() << " buffers were given";
  Environment env;
  for (auto [argument, input] : llvm::zip(entry.getArguments(), inputs)) {
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!type || type.getRank() != 1 || !type.hasStaticShape())
      return function.emitOpError()
             << "argument #" << argument.getArgNumber() << " has the type "
             << argument.getType()
             << "; the interpreter needs static 1-D tensors (run "
                "thd-force-static-shapes first)";
    if (input.getElementType() != type.getElementType() ||
        input.size() != type.getDimSize(0))
      return function.emitOpError()
             << "argument #" << argument.getArgNumber() << " is " << type
             << " but its buffer holds " << input.size() << " elements of "
             << input.getElementType();
    Buffer copy = input;
    copy.setRows(copy.size());
    env.bind(argument, std::move(copy));
  }
  if (failed(evaluateBlock(entry, env)))
    return failure();
  auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!ret)
    return function.emitOpError() << "does not end with func.return";
  std::vector<Buffer> results;
  for (Value value : ret.getOperands())
    results.push_back(env[value]);
  return results;
}

} // namespace thdc::interpreter
