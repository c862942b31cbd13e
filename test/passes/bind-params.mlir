// Pipeline parameters: declared defaults, --param overrides, bad overrides.
// RUN: thd-opt %s --thd-bind-params | FileCheck %s --check-prefix=DEFAULT
// RUN: thd-opt %s --thd-bind-params --param C=32768 --param cp=4 | FileCheck %s --check-prefix=OVERRIDE
// RUN: thd-opt %s | FileCheck %s --check-prefix=UNBOUND
// RUN: not thd-opt %s --param K=3 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not thd-opt %s --param C 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: not thd-opt %s --param C=two 2>&1 | FileCheck %s --check-prefix=NOTINT
// RUN: not thd-opt %s --param C=7 2>&1 | FileCheck %s --check-prefix=INVALID

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
  // DEFAULT: module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}}
  // DEFAULT-LABEL: func @step
  // DEFAULT-SAME: {thd.capacity = 16 : i64}
  // DEFAULT: thd.cp_slice {{.*}} cp 2 mode zigzag
  // DEFAULT: thd.pad_tail {{.*}} target 8 :
  // DEFAULT: thd.pad_cu_seqlens {{.*}} entries 7 :
  // DEFAULT-NOT: #thd.expr

  // OVERRIDE: module attributes {thd.params = {C = 32768 : i64, N = 6 : i64, cp = 4 : i64}}
  // OVERRIDE: {thd.capacity = 131072 : i64}
  // OVERRIDE: thd.cp_slice {{.*}} cp 4 mode zigzag
  // OVERRIDE: thd.pad_tail {{.*}} target 32768 :

  // UNBOUND: {thd.capacity = #thd.expr<"C*cp">}
  // UNBOUND: thd.pad_tail {{.*}} target "C" :

  // UNKNOWN: error: parameter 'K' set with --param is not declared by this pipeline (it declares: C, N, cp)
  // MALFORMED: error: expected NAME=VALUE in --param, got 'C'
  // NOTINT: error: invalid value for --param C: 'two' is not a number (a value is an integer or an expression of integers, e.g. 32768 or 32*1024)
  // INVALID: error: 'thd.pad_tail_metadata' op global target target*cp = 14 is not divisible by 2*cp = 4

  func.func @step(%t: tensor<?xi64> {thd.capacity = #thd.expr<"C*cp">}, %cu: tensor<?xi32>,
                  %r: tensor<1xi32>, %ms: tensor<1xi32>) -> (tensor<?xi64>, tensor<?xi32>) {
    %s = thd.cp_slice %t, %cu, %r cp "cp" mode zigzag : tensor<?xi64>, tensor<?xi32> -> tensor<?xi64>
    %p = thd.pad_tail %s target "C" : tensor<?xi64> -> tensor<?xi64>
    %m:4 = thd.pad_tail_metadata %cu, %cu, %ms cp "cp" mode zigzag target "C" policy append_dummy_sequence
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
    %c = thd.pad_cu_seqlens %m#1 entries "N+1" : tensor<?xi32> -> tensor<?xi32>
    return %p, %c : tensor<?xi64>, tensor<?xi32>
  }
}
