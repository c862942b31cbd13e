// Inputs that upstream MLIR's parser crashes on are refused with a
// diagnostic before parsing (compiler/SourceScreen.h), by the tools that
// compile a pipeline and by the JIT (test/unit/BundleTrustTest.cpp,
// test/python/test_loader_robustness.py).
// RUN: split-file %s %t
// RUN: not thdc %t/dense-index.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=INDEX
// RUN: not thdc %t/dense-alias.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=ALIAS
// RUN: not thdc %t/result-number.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=NUMBER
// RUN: not thd-run %t/result-number.mlir --input %t/empty.json --backend reference 2>&1 | FileCheck %s --check-prefix=NUMBER
// Not screened: the same spellings in comments and strings, result numbers
// within range, and dense arrays of an alias of an integer type.
// RUN: not thdc %t/harmless.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=HARMLESS

// MLIR's lexer allows spaces and comments between the tokens; so does the
// screen.
// INDEX: dense-index.mlir:2:32: error: a dense array of 'index' is not supported (MLIR's parser cannot read one); use an integer type such as i64
// INDEX: dense-index.mlir:3:32: error: a dense array of 'index' is not supported
// A keyword ends at '-' (found by the pipeline fuzzer):
// INDEX: dense-index.mlir:5:32: error: a dense array of 'index' is not supported
// ALIAS: dense-alias.mlir:3:32: error: a dense array of 'index' (through the alias '!b') is not supported
// NUMBER: result-number.mlir:2:18: error: result number '#2147483647' of '%a' is out of range: thdc accepts result numbers up to 255
// NUMBER: result-number.mlir:3:10: error: result number '#256' of '%a' is out of range
// HARMLESS-NOT: not supported
// HARMLESS-NOT: out of range
// HARMLESS: harmless.mlir:5:10: error: reference to invalid result number

//--- dense-index.mlir
!a = index
func.func @f() attributes {a = array<index: 1, 0, 1>} { return }
func.func @g() attributes {a = array // a comment
  < index: 1>} { return }
func.func @h() attributes {a = array<index- array<i1: true>} { return }
//--- dense-alias.mlir
!a = index
!b = !a
func.func @f() attributes {a = array<!b: 1, 0, 1>} { return }
//--- result-number.mlir
func.func @f(%a: tensor<8xi64>) -> tensor<8xi64> {
  return %a, %b, %a#2147483647 : tensor<8xi64>
  return %a // a comment
    #256 : tensor<8xi64>
}
//--- empty.json
{}
//--- harmless.mlir
// array<index: 1> and %a#2147483647 in a comment
!i = i64
func.func @f(%a: tensor<8xi64>) -> tensor<8xi64> attributes {s = "array<index: 1> %a#2147483647", t = array<!i: 1, 2>} {
  // arrays: array<index: 1>
  return %a#1 : tensor<8xi64>
}
