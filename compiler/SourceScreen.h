//===- SourceScreen.h - inputs upstream MLIR crashes on ---------*- C++ -*-===//
//
// MLIR 22's parser ends the process on a few inputs, with no hook that could
// turn the crash into a diagnostic:
//   - a dense array of `index` (`array<index: 1, 0, 1>`, also `array<index>`)
//     dereferences a null element-type bit width: a segmentation fault;
//   - a result number far past any operation's results (`%a#2147483647`)
//     makes the parser allocate one placeholder per number up to it: out of
//     memory, or gigabytes filled before the error;
//   - brackets nested thousands deep (`[[[...`, `tuple<tuple<...`,
//     `{a = {a = ...`, `((((...` in an affine map, regions in regions),
//     and affine expressions of thousands of operators (`- - - d0`, whose
//     every `-` is a nested negation) overflow the stack of its recursive
//     descent: 20 KB of text is a segmentation fault of the process that
//     parses it.
// A pipeline never needs any of them, so the compiler screens its input for them
// before parsing: each is an error at its location instead of a crash in
// the training process that compiles the text. The screen is lexical, as
// MLIR's lexer is (comments and string literals are skipped, spaces and
// comments between tokens too, type aliases are followed), and costs two
// passes over the text. Every tool screens its input (thd-opt too, before
// MlirOptMain parses it), and so does the JIT. Reproducers:
// test/codegen/upstream-crashes.mlir.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_SOURCESCREEN_H
#define THDC_COMPILER_SOURCESCREEN_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/SourceMgr.h"

namespace thdc {

/// Largest result number (`%name#N`) a pipeline may use: above the results
/// of any operation thdc compiles (a kernel has at most 64 buffers), and
/// low enough that the parser's table for each undefined name stays at 4
/// KiB, so no text of reasonable size can make it allocate gigabytes.
constexpr uint64_t kMaxResultNumber = 255;

/// Deepest nesting of brackets (`(`, `[`, `{`, `<`) a pipeline may use, and
/// the longest run of `-` (each a nested negation in an affine expression):
/// pipelines nest a dozen deep at most, and the parser's recursion to this
/// depth stays far inside any thread's stack.
constexpr unsigned kMaxNestingDepth = 128;

/// Most operators (`+`, `-`, `*`, `mod`, `floordiv`, `ceildiv`) one affine
/// map or set may hold: the parser recurses once per operator.
constexpr unsigned kMaxAffineOperators = 1024;

/// Emits an error at each input of `sourceMgr`'s main buffer that upstream
/// MLIR would crash on; fails when there was one.
mlir::LogicalResult screenUpstreamCrashes(mlir::MLIRContext &context,
                                          const llvm::SourceMgr &sourceMgr);

} // namespace thdc

#endif // THDC_COMPILER_SOURCESCREEN_H
