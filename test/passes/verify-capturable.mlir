// thd-verify-capturable names every reason a pipeline cannot be captured:
// a host read where it is, and the unbound parameters and dynamic shapes
// that thd-force-static-shapes removes once, at the first, with their count
// (before that pass every op has some: one refusal, not one per op).
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-verify-capturable

// expected-error @+1 {{not capturable: argument #0 has the dynamic type 'tensor<?xi64>'; run thd-force-static-shapes first, which binds the parameters and gives every value a static shape}}
func.func @dynamic_argument(%t: tensor<?xi64>) -> tensor<8xi64> {
  %p = thd.pad_tail %t target 8 : tensor<?xi64> -> tensor<8xi64>
  return %p : tensor<8xi64>
}

// -----

func.func @dynamic_result(%t: tensor<8xi64>) -> tensor<?xi64> {
  // expected-error @+1 {{not capturable: 'thd.pad_tail' result #0 has the dynamic type 'tensor<?xi64>', a data-dependent allocation (and 1 more unbound parameter or dynamic type); run thd-force-static-shapes first}}
  %p = thd.pad_tail %t alignment 4 : tensor<8xi64> -> tensor<?xi64>
  return %p : tensor<?xi64>
}

// -----

module attributes {thd.params = {C = 8 : i64}} {
  func.func @unbound(%t: tensor<8xi64>) -> tensor<8xi64> {
    // expected-error @+1 {{not capturable: 'thd.pad_tail' has 'target', an unbound parameter expression; run thd-force-static-shapes first}}
    %p = thd.pad_tail %t target "C" : tensor<8xi64> -> tensor<8xi64>
    return %p : tensor<8xi64>
  }
}

// -----

func.func @host_read(%t: tensor<8xi64>, %n: tensor<1xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{not capturable: the host would need its result; only thd ops run inside the graph}}
  %v = tensor.extract %n[%c0] : tensor<1xi32>
  return %v : i32
}
