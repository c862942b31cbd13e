// Inputs that upstream MLIR's parser crashes on are refused with a
// diagnostic before parsing (codegen/SourceScreen.h), by every tool that
// compiles a pipeline; the JIT's Python test does the same in-process.
// RUN: split-file %s %t
// RUN: not thdc %t/dense-index.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=INDEX
// RUN: not thdc %t/dense-alias.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=ALIAS
// RUN: not thdc %t/result-number.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=NUMBER
// RUN: not thd-run %t/result-number.mlir --input %t/empty.json --backend reference 2>&1 | FileCheck %s --check-prefix=NUMBER
// Not screened: the same spellings in comments and strings, and result
// numbers within range.
// RUN: not thdc %t/harmless.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=HARMLESS

// INDEX: dense-index.mlir:2:32: error: a dense array of 'index' is not supported
// ALIAS: dense-alias.mlir:2:32: error: a dense array of an aliased type is not supported
// NUMBER: result-number.mlir:2:18: error: result number in '%a#2147483647' is out of range: thdc accepts result numbers up to 65535
// HARMLESS-NOT: not supported
// HARMLESS-NOT: out of range
// HARMLESS: error:

//--- dense-index.mlir
!a = index
func.func @f() attributes {a = array<index: 1, 0, 1>} { return }
//--- dense-alias.mlir
!a = index
func.func @f() attributes {a = array<!a: 1, 0, 1>} { return }
//--- result-number.mlir
func.func @f(%a: tensor<8xi64>) -> tensor<8xi64> {
  return %a, %b, %a#2147483647 : tensor<8xi64>
}
//--- empty.json
{}
//--- harmless.mlir
// array<index: 1> and %a#2147483647 in a comment
func.func @f(%a: tensor<8xi64>) -> tensor<8xi64> attributes {s = "array<index: 1> %a#2147483647"} {
  return %a#1 : tensor<8xi64>
}
