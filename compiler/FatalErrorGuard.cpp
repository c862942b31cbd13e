//===- FatalErrorGuard.cpp - LLVM fatal errors as failures ----------------===//

#include "compiler/FatalErrorGuard.h"

#include "llvm/Support/ErrorHandling.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <mutex>

namespace {
thread_local std::jmp_buf *activeJump = nullptr;
thread_local std::string *activeMessage = nullptr;

void onFatalError(void *, const char *reason, bool) {
  if (activeJump) {
    *activeMessage = reason;
    std::longjmp(*activeJump, 1);
  }
  // Not inside a guard: LLVM's own behaviour follows (it exits).
  std::fprintf(stderr, "LLVM ERROR: %s\n", reason);
}

/// LLVM's allocation failures (a container asked to grow past what can be
/// allocated, e.g. for a parsed result number like `%a#2147483647`) call
/// this instead of aborting. The handler must not return.
void onBadAlloc(void *, const char *reason, bool) {
  if (activeJump) {
    *activeMessage = std::string("out of memory: ") + reason;
    std::longjmp(*activeJump, 1);
  }
  std::fprintf(stderr, "LLVM ERROR: out of memory: %s\n", reason);
  std::abort();
}
} // namespace

bool thdc::runWithFatalErrorsAsFailures(llvm::function_ref<bool()> body,
                                        std::string &fatalMessage) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    llvm::install_fatal_error_handler(onFatalError);
    llvm::install_bad_alloc_error_handler(onBadAlloc);
  });
  fatalMessage.clear();
  std::jmp_buf jump;
  std::jmp_buf *outerJump = activeJump;
  std::string *outerMessage = activeMessage;
  if (setjmp(jump) != 0) {
    activeJump = outerJump;
    activeMessage = outerMessage;
    return false;
  }
  activeJump = &jump;
  activeMessage = &fatalMessage;
  bool ok = body();
  activeJump = outerJump;
  activeMessage = outerMessage;
  return ok;
}
