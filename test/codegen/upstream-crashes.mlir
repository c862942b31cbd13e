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
// thd-opt screens its input as thdc does.
// RUN: not thd-opt %t/dense-index.mlir 2>&1 | FileCheck %s --check-prefix=INDEX
//
// Brackets nested 10,000 deep (20 KB of text) overflowed the parser's stack:
// a segmentation fault. Each kind of bracket, in every tool.
// RUN: %python %t/nest.py '[' ']' 10000 > %t/deep-array.mlir
// RUN: %python %t/nest.py 'tuple<' '>' 10000 > %t/deep-tuple.mlir
// RUN: %python %t/nest.py '{a = ' '}' 10000 > %t/deep-dict.mlir
// RUN: %python %t/nest.py 'affine_map<(d0) -> (' ')>' 1 '(' ')' 10000 > %t/deep-affine.mlir
// RUN: %python %t/nest.py '' '' 1 'scf.execute_region { ' ' }' 10000 > %t/deep-region.mlir
// RUN: not thdc %t/deep-array.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thdc %t/deep-tuple.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thdc %t/deep-dict.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thdc %t/deep-affine.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thdc %t/deep-region.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thd-opt %t/deep-array.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thd-opt %t/deep-region.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thd-run %t/deep-tuple.mlir --input %t/empty.json --backend reference 2>&1 | FileCheck %s --check-prefix=DEEP
// Spellings that fooled a plain bracket count: `>` that compares rather
// than closes (`d0 > = 0` inside an integer set), every `-` of a negation,
// long chains of affine operators.
// RUN: %python %t/bypass.py compare > %t/bypass-compare.mlir
// RUN: %python %t/bypass.py negate > %t/bypass-negate.mlir
// RUN: %python %t/bypass.py chain > %t/bypass-chain.mlir
// RUN: not thdc %t/bypass-compare.mlir --emit=ptx 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thd-opt %t/bypass-compare.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not thd-opt %t/bypass-negate.mlir 2>&1 | FileCheck %s --check-prefix=NEGATE
// RUN: not thd-opt %t/bypass-chain.mlir 2>&1 | FileCheck %s --check-prefix=CHAIN
// Nesting within the bound is accepted, and `->` closes nothing.
// RUN: %python %t/nest.py '[' ']' 120 > %t/deep-enough.mlir
// RUN: thd-opt %t/deep-enough.mlir | FileCheck %s --check-prefix=ENOUGH
// RUN: %python %t/nest.py 'affine_map<(d0) -> (' ')>' 1 '(' ')' 120 > %t/affine-enough.mlir
// RUN: thd-opt %t/affine-enough.mlir | FileCheck %s --check-prefix=ENOUGH
//
// Inputs that are not files are refused, never read without end.
// RUN: not thdc /dev/zero --emit=ptx 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not thd-opt /dev/zero 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not thd-run %thdc_src/examples/megatron_graph_step.mlir --input /dev/zero 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not thd-opt < /dev/zero 2>&1 | FileCheck %s --check-prefix=ZERO-STDIN
// RUN: not thdc %t --emit=ptx 2>&1 | FileCheck %s --check-prefix=FOLDER
// An endless pipe is read up to the bound (16 MiB of pipeline text).
// RUN: %python %t/spaces.py | not thd-opt - 2>&1 | FileCheck %s --check-prefix=BOUND

// MLIR's lexer allows spaces and comments between the tokens; so does the
// screen.
// INDEX: dense-index.mlir:2:32: error: a dense array of 'index' is not supported (MLIR's parser cannot read one); use an integer type such as i64
// INDEX: dense-index.mlir:3:32: error: a dense array of 'index' is not supported
// A keyword ends at '-' (found by the pipeline fuzzer):
// INDEX: dense-index.mlir:5:32: error: a dense array of 'index' is not supported
// ALIAS: dense-alias.mlir:3:32: error: a dense array of 'index' (through the alias '!b') is not supported
// NUMBER: result-number.mlir:2:18: error: result number '#2147483647' of '%a' is out of range: thdc accepts result numbers up to 255
// NUMBER: result-number.mlir:3:10: error: result number '#256' of '%a' is out of range
// DEEP: error: brackets nested more than 128 deep: thdc accepts pipelines nested up to 128 (MLIR's parser would run out of stack)
// DEEP-NOT: error
// NEGATE: error: more than 128 '-' in a row: MLIR's parser recurses once per '-'
// CHAIN: error: an affine expression of more than 1024 operators: thdc accepts up to 1024 (MLIR's parser recurses once per operator)
// ENOUGH: func.func @f()
// ZERO: error: '/dev/zero' is not a regular file (a character device); give a file, or pipe the text into standard input
// ZERO-STDIN: error: '<stdin>' is not a regular file (a character device)
// FOLDER: error: '{{.*}}' is not a regular file (a folder)
// BOUND: error: '<stdin>' is larger than 16 MiB, the most thdc reads as this input
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
//--- nest.py
# nest.py OPEN CLOSE COUNT [INNER_OPEN INNER_CLOSE INNER_COUNT]: a function
# whose attribute (or, with OPEN empty, whose body) nests brackets COUNT deep.
import sys
a = sys.argv[1:]
inner = "0"
if len(a) == 6:
    inner = a[3] * int(a[5]) + "d0" + a[4] * int(a[5])
nested = a[0] * int(a[2]) + inner + a[1] * int(a[2])
if a[0]:
    print("func.func @f() attributes {a = " + nested + "} { return }")
else:
    print("func.func @f() { " + a[3] * int(a[5]) + a[4] * int(a[5]) + " return }")
//--- spaces.py
# 17 MiB of spaces on standard output, until the reader stops reading.
import os
try:
    for _ in range(17 * 16):
        os.write(1, b" " * 65536)
except BrokenPipeError:
    pass
os._exit(0)
//--- bypass.py
# bypass.py compare|negate|chain: text that nests the parser without
# nesting brackets a plain count sees.
import sys
kind = sys.argv[1]
if kind == "compare":
    level = "[affine_set<(d0) : (d0 > = 0, d0 > = 0, d0 > = 0)>, "
    print("func.func @f() attributes {a = " + level * 20000 + "0" + "]" * 20000 + "} { return }")
elif kind == "negate":
    print("func.func @f() attributes {a = affine_map<(d0) -> (" + "-" * 200000 + "d0)>} { return }")
else:
    print("func.func @f() attributes {a = affine_map<(d0) -> (d0" + " + d0" * 200000 + ")>} { return }")
