//===- THDFusedOps.td - the fused kernel op ----------------*- tablegen -*-===//
//
// thd.fused, the region that holds the steps of one kernel, and its
// terminator thd.yield.
//
// Included from THDOps.td, which defines THD_Op and the shared clause
// syntax.
//
//===----------------------------------------------------------------------===//

#ifndef THD_FUSED_OPS_TD
#define THD_FUSED_OPS_TD

def THD_FusedOp : Op<THD_Dialect, "fused", [
    RecursiveMemoryEffects, DeclareOpInterfaceMethods<THD_StepOpInterface>, SingleBlockImplicitTerminator<"::mlir::thd::YieldOp">]> {
  let summary = "steps that run as one kernel";
  let description = [{
    The thd ops of the region run as one kernel: every result is computed
    element by element through the chain of steps that defines it, with no
    intermediate buffer and no synchronisation between the steps. Values
    from above are the kernel's inputs; the yielded values are its outputs.
    `thd-fuse` forms it; `thd-lower-to-loops` and `thd-lower-to-gpu` lower
    each one to one loop nest or one GPU kernel.

    ```mlir
    %t, %m = thd.fused -> tensor<8xi64>, tensor<8xi1> {
      %mask = thd.padding_mask ...
      ...
      thd.yield %tok, %mask_out : tensor<8xi64>, tensor<8xi1>
    }
    ```
  }];
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "(`->` type($results)^)? $body attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The values the body yields, one per result.
    ::mlir::ValueRange getYieldedValues();
  }];
}

def THD_YieldOp : Op<THD_Dialect, "yield", [Pure, Terminator, HasParent<"FusedOp">, ReturnLike]> {
  let summary = "the outputs of a fused kernel";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

#endif // THD_FUSED_OPS_TD
