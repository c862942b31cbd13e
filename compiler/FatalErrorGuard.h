//===- FatalErrorGuard.h - LLVM fatal errors as failures -------*- C++ -*-===//
//
// LLVM reports some errors (a back end asked for something it cannot do, a
// stream that could not be written) through report_fatal_error, which ends
// the process. Code that embeds the compiler in a training process runs it
// under this guard instead: a fatal error on the guarded thread becomes a
// failed call with LLVM's message. What the guarded call had built is leaked
// (the jump skips its destructors), so run it with multithreading off and
// keep its state local.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_FATALERRORGUARD_H
#define THDC_COMPILER_FATALERRORGUARD_H

#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace thdc {

/// Runs `body` and returns what it returns; an LLVM fatal error or
/// allocation failure raised on this thread inside it returns false
/// instead, with the message in `fatalMessage` (left empty otherwise).
bool runWithFatalErrorsAsFailures(llvm::function_ref<bool()> body,
                                  std::string &fatalMessage);

} // namespace thdc

#endif // THDC_COMPILER_FATALERRORGUARD_H
