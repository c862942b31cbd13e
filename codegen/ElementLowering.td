//===- ElementLowering.td - a step, one element at a time --*- tablegen -*-===//
//
// How the fused lowering computes one element of a step's result. Attached
// to every step of the dialect as an external model (codegen/lowering/
// Register.cpp), whose methods forward to one function per op in the step's
// family file under codegen/lowering/: an op without them does not compile.
//
//===----------------------------------------------------------------------===//

#ifndef THD_CODEGEN_ELEMENT_LOWERING_TD
#define THD_CODEGEN_ELEMENT_LOWERING_TD

include "mlir/IR/OpBase.td"

def THD_ElementLoweringOpInterface : OpInterface<"ElementLoweringOpInterface"> {
  let cppNamespace = "::mlir::thd";
  let description = [{
    Emits one element of a step's result through `ElementEmitter`
    (codegen/ElementEmitter.h), pulling the elements of its operands from
    the emitter in turn, so that a chain of steps becomes one expression per
    output element with no intermediate buffer.
  }];
  let methods = [
    InterfaceMethod<[{
        Element `at` of `result`: an entry index for an offset or length
        array, a row for a per-token buffer, null for a scalar (emitted once,
        before the element loops).
      }],
      "::mlir::Value", "emitElement",
      (ins "::mlir::thd::ElementEmitter &":$emitter,
           "::mlir::OpResult":$result, "::mlir::Value":$at)>,
    InterfaceMethod<[{
        The number of meaningful rows of the per-token `result` (an index
        value; rows past it are the step's fill). Steps without per-token
        results report an error through the emitter.
      }],
      "::mlir::Value", "emitRowCount",
      (ins "::mlir::thd::ElementEmitter &":$emitter,
           "::mlir::OpResult":$result)>,
  ];
}

#endif // THD_CODEGEN_ELEMENT_LOWERING_TD
