// The lowerings refuse IR they cannot read, with a diagnostic: an unbound
// parameter expression (which used to crash both passes) and launch
// options out of range (rows-per-thread = 2^56 used to raise SIGFPE).
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-lower-to-loops
// RUN: thd-opt %s -split-input-file -verify-diagnostics --thd-fuse --thd-lower-to-gpu
// RUN: not thd-opt %s -split-input-file "--thd-lower-to-gpu=rows-per-thread=72057594037927936" 2>&1 | FileCheck %s --check-prefix=ROWS

// ROWS: error: max-blocks must be in [0, 2147483647] and rows-per-thread in [1, 64] (or 0: chosen), got 0 and 72057594037927936

module attributes {thd.params = {cp = 2 : i64}} {
  func.func @unbound(%t: tensor<16xi64>, %cup: tensor<7xi32>, %r: tensor<1xi32>, %n: tensor<1xi32>) -> tensor<8xi64> {
    // expected-error @+1 {{'thd.cp_slice' op still holds the parameter expression "cp" in 'cp'; bind the parameters first (thd-bind-params or thd-force-static-shapes)}}
    %s = thd.cp_slice %t, %cup, %r num_seqs %n cp "cp" mode zigzag : tensor<16xi64>, tensor<7xi32> -> tensor<8xi64>
    return %s : tensor<8xi64>
  }
}

// -----

module attributes {thd.params = {C = 8 : i64}} {
  func.func @unbound_target(%t: tensor<8xi64>) -> tensor<8xi64> {
    // expected-error @+1 {{'thd.pad_tail' op still holds the parameter expression "C" in 'target'}}
    %p = thd.pad_tail %t target "C" : tensor<8xi64> -> tensor<8xi64>
    return %p : tensor<8xi64>
  }
}
