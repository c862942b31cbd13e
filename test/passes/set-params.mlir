// thd-set-params writes parameter values into thd.params; expressions keep
// their text and evaluate with the new values. thd-opt --param NAME=VALUE
// runs the same pass first.
// RUN: thd-opt %s --thd-set-params="params=C=4*1024,N=64" | FileCheck %s --check-prefix=SET
// RUN: thd-opt %s --thd-set-params="params=C=32768,cp=4" --thd-bind-params | FileCheck %s --check-prefix=BOUND
// RUN: thd-opt %s --param C=32768 --param cp=4 --thd-bind-params | FileCheck %s --check-prefix=BOUND
// RUN: thd-opt %s --param N=64 --param C=16 --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: thd-opt %s --thd-set-params="params=cp=4" --thd-set-params="params=cp=8" | FileCheck %s --check-prefix=LAST
// RUN: not thd-opt %s --thd-set-params="params=C" 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: not thd-opt %s --thd-set-params="params=C=8-16" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not thd-opt %s --thd-set-params="params=C=7" 2>&1 | FileCheck %s --check-prefix=INVALID

// SET: module attributes {thd.params = {C = 4096 : i64, N = 64 : i64, cp = 2 : i64}}
// SET: {thd.capacity = #thd.expr<"C*cp">}
// SET: thd.pad_tail {{.*}} target "C" :
// SET: thd.pad_cu_seqlens {{.*}} entries "N+1" :

// BOUND: module attributes {thd.params = {C = 32768 : i64, N = 6 : i64, cp = 4 : i64}}
// BOUND: {thd.capacity = 131072 : i64}
// BOUND: thd.cp_slice {{.*}} cp 4 mode zigzag
// BOUND: thd.pad_tail {{.*}} target 32768 :

// PIPELINE: thd-set-params{params={C=16,N=64}}

// LAST: module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 8 : i64}}

// MALFORMED: error: thd-set-params: expected NAME=VALUE in --param, got 'C'
// NEGATIVE: error: thd-set-params: invalid value for --param C: '8-16' is negative; parameters are sizes and counts
// The values set are verified after the pass.
// INVALID: error: 'thd.pad_tail_metadata' op global target target*cp = 14 is not divisible by 2*cp = 4

module attributes {thd.params = {C = 8 : i64, N = 6 : i64, cp = 2 : i64}} {
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
