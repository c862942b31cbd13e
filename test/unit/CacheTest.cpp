//===- CacheTest.cpp - the cache folder and the cache key -----------------===//

#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <optional>
#include <random>
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

// FIPS 180-4's examples and NIST's long message: one, two and many blocks,
// and a tail that needs a second padding block.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// On a processor with the SHA extensions sha256Hex runs on them; both paths
// agree on every length around the block and padding boundaries.
TEST(Sha256, ProcessorInstructionsAgreeWithThePortableCode) {
  std::mt19937 random(7);
  std::string bytes(4200, '\0');
  for (char &byte : bytes)
    byte = static_cast<char>(random());
  for (size_t length = 0; length <= bytes.size(); length += length < 260 ? 1 : 97)
    ASSERT_EQ(sha256Hex(std::string_view(bytes).substr(0, length)),
              detail::sha256HexPortable(std::string_view(bytes).substr(0, length)))
        << "length " << length;
  EXPECT_EQ(detail::sha256HexPortable("abc"), sha256Hex("abc"));
  RecordProperty("processor_instructions",
                 detail::sha256UsesProcessorInstructions() ? "yes" : "no");
}

TEST(CacheKey, Is128BitsOfTheMaterialsSha256) {
  EXPECT_EQ(cacheKey("abc"), "ba7816bf8f01cfea414140de5dae2223");
  EXPECT_EQ(cacheKey("abc"), sha256Hex("abc").substr(0, 32));
  EXPECT_NE(cacheKey("abc"), cacheKey("abd"));
}

TEST(CachedCubin, ReadsBackWhatWasStoredAndNothingDamaged) {
  std::string cubin("\x7f" "ELF\0\x01\x02 a kernel", 17);
  std::string stored = encodeCachedCubin(cubin);
  EXPECT_EQ(stored.substr(0, 13), "thdc-cubin 1 ");
  EXPECT_EQ(stored.substr(13, 64), sha256Hex(cubin));
  std::optional<std::string> read = decodeCachedCubin(stored);
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, cubin);
  // One flipped bit anywhere (header or cubin) is refused, as is a cut
  // entry, a bare cubin (the layout before the hash) and an empty one.
  for (size_t byte = 0; byte < stored.size(); ++byte)
    for (int bit = 0; bit < 8; bit += 7) {
      std::string flipped = stored;
      flipped[byte] = char(flipped[byte] ^ (1 << bit));
      EXPECT_FALSE(decodeCachedCubin(flipped)) << "byte " << byte;
    }
  EXPECT_FALSE(decodeCachedCubin(stored.substr(0, stored.size() - 1)));
  EXPECT_FALSE(decodeCachedCubin(stored.substr(0, 78)));
  EXPECT_FALSE(decodeCachedCubin(cubin));
  EXPECT_FALSE(decodeCachedCubin(""));
  EXPECT_FALSE(decodeCachedCubin(encodeCachedCubin("")));
}
