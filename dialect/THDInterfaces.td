//===- THDInterfaces.td - what every thd step answers ------*- tablegen -*-===//
//
// The questions the passes ask of a step, answered by the step itself next to
// its verifier (dialect/ops/, one file per family). Every op of the dialect
// that is a step declares the interface through `THD_Op`, so a new step that
// does not answer them does not link.
//
//===----------------------------------------------------------------------===//

#ifndef THD_INTERFACES_TD
#define THD_INTERFACES_TD

include "mlir/IR/OpBase.td"

def THD_StepOpInterface : OpInterface<"StepOpInterface"> {
  let cppNamespace = "::mlir::thd";
  let description = [{
    A data-preparation step of a thd pipeline.

    - `inferStaticLengths`: the length of each result once every operand has
      a static length and every parameter is bound; used by
      `thd-force-static-shapes`. A step whose result length depends on the
      data fails here with an error that says which attribute bounds it.
    - `getResultKind`: how the lowering computes a result: once per kernel
      (a scalar), per entry of an offset or length array, or per token row.
  }];
  let methods = [
    InterfaceMethod<[{
        The static length of each result, given static operands and bound
        parameters. Emits an error on the op naming what is missing, and
        fails, when a length depends on device data.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<int64_t>>", "inferStaticLengths">,
    InterfaceMethod<[{
        What result `index` is: a scalar, an offset/length array, or rows.
      }],
      "::mlir::thd::ResultKind", "getResultKind", (ins "unsigned":$index)>,
  ];
}

#endif // THD_INTERFACES_TD
