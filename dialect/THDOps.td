//===- THDOps.td - thd dialect operations ------------------*- tablegen -*-===//
//
// One op per data-preparation step of the THD semantics (S1..S10). Every op
// is pure and works on builtin tensors, dynamic or static; counts that are
// known only on the device travel as `tensor<1xi32>` values.
//
//===----------------------------------------------------------------------===//

#ifndef THD_OPS_TD
#define THD_OPS_TD

include "dialect/THDBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "dialect/THDInterfaces.td"

// Every step answers the interface's questions in the file of its family in
// dialect/ops/, beside its verifier; its element lowering is in
// codegen/lowering/.
class THD_Op<string mnemonic, list<Trait> traits = []>
    : Op<THD_Dialect, mnemonic,
         !listconcat(traits, [Pure, DeclareOpInterfaceMethods<THD_StepOpInterface>])> {
  let hasVerifier = 1;
}

// Shared clause syntax: `num_seqs %n` limits the meaningful entries of the
// cu arrays to the first n+1; without it every entry is meaningful.

// The ops, one file per family, in the order of the steps.

include "dialect/THDPackOps.td"
include "dialect/THDAttentionOps.td"
include "dialect/THDPaddingOps.td"
include "dialect/THDValidationOps.td"
include "dialect/THDFusedOps.td"

#endif // THD_OPS_TD
