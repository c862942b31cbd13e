// Values used as their own operands, directly or around a chain of steps.
// Op verifiers run before dominance is checked, so a verifier that walks
// producers must stop at a cycle; the dominance check then reports it. The
// timeout turns a verifier that loops into a failure.
// RUN: timeout 60 thd-opt %s -split-input-file -verify-diagnostics

func.func @f() -> tensor<8xi64> {
  // expected-error @+2 {{operand #0 does not dominate this use}}
  // expected-note @+1 {{operand defined here (op in the same block)}}
  %p = thd.pad_tail %p target 8 : tensor<8xi64> -> tensor<8xi64>
  return %p : tensor<8xi64>
}

// -----

func.func @f(%m: tensor<8xi1>) -> tensor<8xi64> {
  // expected-error @+1 {{operand #0 does not dominate this use}}
  %s = thd.sanitize %p, %m : tensor<8xi64>, tensor<8xi1>
  // expected-note @+1 {{operand defined here (op in the same block)}}
  %p = thd.pad_tail %s target 8 : tensor<8xi64> -> tensor<8xi64>
  return %p : tensor<8xi64>
}
