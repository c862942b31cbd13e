//===- JitTestSupport.h - what the JIT's tests share ------------*- C++ -*-===//

#ifndef THDC_TEST_UNIT_JITTESTSUPPORT_H
#define THDC_TEST_UNIT_JITTESTSUPPORT_H

#include "compiler/Jit.h"

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

} // namespace thdc::testing

#endif // THDC_TEST_UNIT_JITTESTSUPPORT_H
