//===- Passes.td - thd passes -----------------------------*- tablegen -*-===//

#ifndef THD_PASSES_TD
#define THD_PASSES_TD

include "mlir/Pass/PassBase.td"

def THDSetParams : Pass<"thd-set-params", "::mlir::ModuleOp"> {
  let summary = "Set the values of declared pipeline parameters";
  let description = [{
    Writes the values of its `params` option into the module's `thd.params`
    (and into any `thd.params` declared inside it), replacing the declared
    defaults; expressions over the parameters keep their text and now
    evaluate to the new values. It is how parameters are overridden in
    `thd-opt`:

    ```shell
    thd-opt step.mlir --thd-set-params="params=C=32768,N=64" --thd-bind-params
    ```

    `thd-opt --param NAME=VALUE` (repeatable) runs this pass before the
    requested pipeline. The input is verified after parsing with its
    declared defaults, then again after this pass with the values set, so a
    value that makes the pipeline invalid is reported then. The other
    drivers (`thdc`, `thd-run`, the JIT) write their `--param` values into
    `thd.params` in the same way between parsing and verification.

    A name that the module does not declare is an error that lists the
    declared ones; so is a value that is not a non-negative integer (an
    expression over literals such as `4*1024` is accepted). Afterwards
    `thd.params` holds the values given and every parameter expression
    evaluates with them.
  }];
  let options = [
    ListOption<"params", "params", "std::string",
               "Parameter values as NAME=VALUE, comma-separated">,
  ];
  let dependentDialects = ["::mlir::thd::THDDialect"];
}

def THDBindParams : Pass<"thd-bind-params", "::mlir::ModuleOp"> {
  let summary = "Replace parameter expressions by their values";
  let description = [{
    Evaluates every parameter expression (`#thd.expr<"C*cp">` or its short
    form `"C*cp"` in op syntax) in op attributes and in the `thd.capacity` of
    function arguments and results, using the values in `thd.params` (the
    declared defaults, or those set by `thd-set-params` or a driver's
    `--param NAME=VALUE`), and replaces it by its integer value.
    `thd.params` is rewritten to the values used, so that the output records
    how it was specialised.

    Afterwards no `#thd.expr` attribute remains in the module.
  }];
  let dependentDialects = ["::mlir::thd::THDDialect"];
}

def THDForceStaticShapes : Pass<"thd-force-static-shapes", "::mlir::ModuleOp"> {
  let summary = "Give every tensor a static shape at its capacity";
  let description = [{
    Binds the pipeline parameters (as `thd-bind-params`), then gives every
    1-D tensor of every function a static shape at its capacity: arguments
    from their `thd.capacity`, op results from the op's semantics (a CP
    slice has `capacity / cp` rows, `pad_tail` its target,
    `pad_tail_metadata` with `max_seqs N` has `N + 1` entries, ops whose
    length is a device value from their `capacity`). Real lengths remain
    device values computed by the compiled code (see dialect/Rationale.md).

    Whatever cannot be bounded is reported as an error that names the op and
    the reason, e.g. a `pad_tail` by `alignment` (its length depends on the
    data) or a `padding_mask` without `capacity`. Afterwards every tensor of
    the module is static, or the pass has failed.
  }];
  let dependentDialects = ["::mlir::thd::THDDialect"];
}

def THDFuse : Pass<"thd-fuse", "::mlir::ModuleOp"> {
  let summary = "Group the steps of each pipeline into one fused kernel";
  let description = [{
    Moves the thd steps of every function into one `thd.fused` op, so that
    the per-token steps (mask, sanitise, CP gather, tail padding, positions)
    and the metadata steps (validation, dummy sequence, cu_seqlens padding,
    max_seqlen) become a single kernel. Constants used by the steps are
    copied in. A function whose steps are interleaved with other ops that
    depend on them cannot be fused; the pass names the op in the way.

    Afterwards each function holds at most one `thd.fused` op, and no thd
    step outside it.
  }];
  let dependentDialects = ["::mlir::thd::THDDialect"];
}

def THDVerifyCapturable : Pass<"thd-verify-capturable", "::mlir::ModuleOp"> {
  let summary = "Check that a pipeline can be captured in a CUDA graph";
  let description = [{
    Fails when a function still has a dynamic shape (a data-dependent
    allocation) or an unbound parameter expression, or an op outside the thd
    dialect whose result the host would have to read (anything but
    `func.return` and `arith.constant`). Each host read is an error of its
    own; the dynamic shapes and unbound parameters, which
    `thd-force-static-shapes` removes and which every op has before it, are
    one error at the first, with their count, that says to run that pass
    first. Changes nothing.
  }];
}

#endif // THD_PASSES_TD
