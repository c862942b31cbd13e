//===- SourceScreen.h - inputs upstream MLIR crashes on ---------*- C++ -*-===//
//
// MLIR 22's parser ends the process on a few inputs, with no hook that could
// turn the crash into a diagnostic:
//   - a dense array of `index` (`array<index: 1, 0, 1>`, also `array<index>`)
//     dereferences a null element-type bit width: a segmentation fault;
//   - a result number far past any operation's results (`%a#2147483647`)
//     makes the parser allocate one placeholder per number up to it: out of
//     memory, or gigabytes filled before the error.
// A pipeline never needs either, so the compiler screens its input for them
// before parsing: each is an error at its location instead of a crash in
// the training process that compiles the text. The screen is lexical, as
// MLIR's lexer is (comments and string literals are skipped, spaces and
// comments between tokens too, type aliases are followed), and costs two
// passes over the text. thd-opt, a developer's tool built on MlirOptMain,
// parses without it. Reproducers: test/codegen/upstream-crashes.mlir.
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

/// Emits an error at each input of `sourceMgr`'s main buffer that upstream
/// MLIR would crash on; fails when there was one.
mlir::LogicalResult screenUpstreamCrashes(mlir::MLIRContext &context,
                                          const llvm::SourceMgr &sourceMgr);

} // namespace thdc

#endif // THDC_COMPILER_SOURCESCREEN_H
