//===- JitTestSupport.h - what the JIT's tests share ------------*- C++ -*-===//

#ifndef THDC_TEST_UNIT_JITTESTSUPPORT_H
#define THDC_TEST_UNIT_JITTESTSUPPORT_H

#include "compiler/FatalErrorGuard.h"
#include "compiler/Jit.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace thdc::testing {

/// A new empty folder under /tmp named after `purpose`; empty on failure.
inline std::string freshFolder(const std::string &purpose) {
  std::string pattern = "/tmp/thdc-" + purpose + "-XXXXXX";
  const char *dir = mkdtemp(pattern.data());
  return dir ? dir : "";
}

/// JIT options compiling for the host CPU into `cacheDir` ("-": none).
inline JitOptions hostOptions(const std::string &cacheDir) {
  JitOptions options;
  options.backend = runtime::Backend::Host;
  options.cacheDir = cacheDir;
  return options;
}

/// Checks the guard of compiler/FatalErrorGuard.h on a body that calls
/// `raise` (an LLVM fatal error or allocation failure): the call fails with
/// `expected` as its message, and the process goes on, as does a later
/// guarded call, whose message is empty.
inline void expectGuardedFailure(void (*raise)(), const std::string &expected) {
  std::string message;
  bool ok = runWithFatalErrorsAsFailures(
      [raise] {
        raise();
        return true;
      },
      message);
  EXPECT_FALSE(ok);
  EXPECT_EQ(message, expected);
  EXPECT_TRUE(runWithFatalErrorsAsFailures([] { return true; }, message));
  EXPECT_TRUE(message.empty());
}

} // namespace thdc::testing

#endif // THDC_TEST_UNIT_JITTESTSUPPORT_H
