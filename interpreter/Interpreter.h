//===- Interpreter.h - reference interpreter of thd pipelines ---*- C++ -*-===//
//
// Runs a thd pipeline function op by op on host buffers, evaluating every
// thd op through the plain C++ reference (reference/Reference.h). It is the
// executable form of the ops' ODS descriptions, the semantics the lowering
// must match: `thd-run --backend reference` and the differential tests run a
// pipeline here and through the compiled host code and compare the results.
//
// The function must have static shapes (after thd-bind-params and
// thd-force-static-shapes); fused ops are evaluated through their bodies.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_INTERPRETER_INTERPRETER_H
#define THDC_INTERPRETER_INTERPRETER_H

#include "interpreter/Buffer.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"

#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace thdc::interpreter {

/// Runs `function` on `inputs`, one buffer per argument with the argument's
/// static element type and length, and returns one buffer per result. On
/// failure, diagnostics at the offending op's location (an op the reference
/// cannot evaluate for its attributes or operands, a buffer of the wrong
/// size, a shape that is not static) have been emitted.
mlir::FailureOr<std::vector<Buffer>> run(mlir::func::FuncOp function,
                                         llvm::ArrayRef<Buffer> inputs);

} // namespace thdc::interpreter

#endif // THDC_INTERPRETER_INTERPRETER_H
