//===- Passes.td - thd passes -----------------------------*- tablegen -*-===//

#ifndef THD_PASSES_TD
#define THD_PASSES_TD

include "mlir/Pass/PassBase.td"

def THDBindParams : Pass<"thd-bind-params", "::mlir::ModuleOp"> {
  let summary = "Replace parameter expressions by their values";
  let description = [{
    Evaluates every parameter expression (`#thd.expr<"C*cp">` or its short
    form `"C*cp"` in op syntax) in op attributes and in the `thd.capacity` of
    function arguments and results, using the defaults declared in
    `thd.params` overridden by `--param NAME=VALUE`, and replaces it by its
    integer value. `thd.params` is rewritten to the values used, so that the
    output records how it was specialised.

    Afterwards no `#thd.expr` attribute remains in the module.
  }];
  let dependentDialects = ["::mlir::thd::THDDialect"];
}

#endif // THD_PASSES_TD
