//===- CacheTest.cpp - the cache folder and the cache key -----------------===//

#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <optional>
#include <string>

using namespace thdc::runtime;

namespace {
/// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, std::optional<std::string> value) : name(name) {
    if (const char *old = std::getenv(name))
      saved = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (saved)
      setenv(name, saved->c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> saved;
};
} // namespace

TEST(CacheDirectory, FollowsTheVariablesInOrder) {
  ScopedEnv thdc("THDC_CACHE_DIR", "/c/thdc"), xdg("XDG_CACHE_HOME", "/c/xdg"),
      home("HOME", "/c/home");
  EXPECT_EQ(cacheDirectory("/asked"), "/asked");
  EXPECT_EQ(cacheDirectory("-"), "-");
  EXPECT_EQ(cacheDirectory(""), "/c/thdc");
  {
    ScopedEnv noThdc("THDC_CACHE_DIR", std::nullopt);
    EXPECT_EQ(cacheDirectory(""), "/c/xdg/thdc");
    ScopedEnv emptyXdg("XDG_CACHE_HOME", "");
    EXPECT_EQ(cacheDirectory(""), "/c/home/.cache/thdc");
  }
}

TEST(CacheDirectory, NoHomeMeansNoDiskCache) {
  ScopedEnv thdc("THDC_CACHE_DIR", std::nullopt),
      xdg("XDG_CACHE_HOME", std::nullopt), home("HOME", std::nullopt);
  EXPECT_EQ(cacheDirectory(""), "-");
  // Neither the JIT nor the cubin cache may then write anywhere.
  EXPECT_FALSE(prepareCacheDirectory(cacheDirectory("")));
}

TEST(CacheKey, Is128BitsOfTheMaterialsSha256) {
  EXPECT_EQ(cacheKey("abc"), "ba7816bf8f01cfea414140de5dae2223");
  EXPECT_EQ(cacheKey("abc"), sha256Hex("abc").substr(0, 32));
  EXPECT_NE(cacheKey("abc"), cacheKey("abd"));
}
