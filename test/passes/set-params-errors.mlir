// thd-set-params (and thd-opt --param) on names the pipeline does not declare.
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-set-params="params=K=3"
// RUN: thd-opt %s -split-input-file -verify-diagnostics --param K=3

// expected-error @+1 {{parameter 'K' set with --param is not declared by this pipeline (it declares: C, N, cp)}}
module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
  func.func @f(%v: tensor<?xi32> {thd.capacity = #thd.expr<"C*cp">}) -> tensor<?xi32> {
    return %v : tensor<?xi32>
  }
}

// -----

// expected-error @+1 {{parameter 'K' set with --param is not declared by this pipeline (it declares none)}}
module {
  func.func @f(%v: tensor<4xi32>) -> tensor<4xi32> {
    return %v : tensor<4xi32>
  }
}

// -----

// A declaration on a function counts too.
module {
  // expected-error @+1 {{parameter 'K' set with --param is not declared by this pipeline (it declares: M)}}
  func.func @f(%v: tensor<?xi32> {thd.capacity = #thd.expr<"M">}) -> tensor<?xi32> attributes {thd.params = {M = 16 : i64}} {
    return %v : tensor<?xi32>
  }
}
