//===- InputFile.h - bounded reads of the tools' input files ----*- C++ -*-===//
//
// What thdc, thd-opt and thd-run read (a pipeline, thd-run's JSON buffers),
// and the files thdc.compile is given, go through readInputFile: a regular
// file of bounded size, or standard input, a pipe, a socket or a terminal
// read up to the same bound. A device (`/dev/zero`) or a folder is an error
// naming the path, never an endless read that ends with the kernel's
// out-of-memory killer choosing a process (on a training node, maybe the
// training process).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_INPUTFILE_H
#define THDC_COMPILER_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <memory>

namespace thdc {

/// Largest pipeline text the tools and the JIT read: pipelines are a few
/// kilobytes, so 16 MiB is far above any, and far below harm.
constexpr size_t kMaxSourceBytes = size_t(16) << 20;

/// Largest JSON input thd-run reads (every buffer of a step of millions of
/// rows, as decimal text).
constexpr size_t kMaxJsonInputBytes = size_t(256) << 20;

/// Reads `path` ("-": standard input) whole: a regular file of at most
/// `maxBytes`, or a pipe, FIFO, socket or terminal read until its end or
/// until it has given more than `maxBytes` (an error). Anything else (a
/// device, a folder) is an error. Errors name the path and say what to do;
/// a file that cannot be opened carries the system's error code.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, size_t maxBytes);

} // namespace thdc

#endif // THDC_COMPILER_INPUTFILE_H
