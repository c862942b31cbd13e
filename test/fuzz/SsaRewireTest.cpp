//===- SsaRewireTest.cpp - the pipeline fuzzer's SSA rewiring -------------===//
//
// What scanValueRefs takes for definitions and uses, and that rewireSsaUse
// reaches the rewirings it exists for: a use of the op's own result and a
// use of a later value.
//
//===----------------------------------------------------------------------===//

#include "Nesting.h"
#include "SsaRewire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

using thdc::fuzz::rewireSsaUse;
using thdc::fuzz::scanValueRefs;

namespace {

constexpr const char *kPipeline =
    "func.func @f(%x: tensor<?xi64>, %mask: tensor<?xi1>) -> tensor<?xi64> {\n"
    "  %s = thd.sanitize %x, %mask : tensor<?xi64>, tensor<?xi1>\n"
    "  %p = thd.pad_tail %s target \"C\" : tensor<?xi64> -> tensor<?xi64>\n"
    "  // %p = 0 in a comment is neither\n"
    "  %a, %b:2 = test.op %p#0 : i64\n"
    "  return %p : tensor<?xi64>\n"
    "}\n";

TEST(SsaRewire, ScansDefinitionsAndUses) {
  std::string text = kPipeline;
  std::set<std::string> defs, uses;
  for (const auto &ref : scanValueRefs(text))
    (ref.definition ? defs : uses).insert(std::string(ref.name(text)));
  EXPECT_EQ(defs,
            (std::set<std::string>{"%x", "%mask", "%s", "%p", "%a", "%b"}));
  EXPECT_EQ(uses, (std::set<std::string>{"%x", "%mask", "%s", "%p"}));
}

TEST(SsaRewire, ReachesSelfUseAndLaterValues) {
  bool selfPad = false, sanitizeOfPad = false;
  for (unsigned seed = 0; seed < 2000 && !(selfPad && sanitizeOfPad); ++seed) {
    std::mt19937 rng(seed);
    std::string text = kPipeline;
    ASSERT_TRUE(rewireSsaUse(text, text.size() + 16, rng));
    selfPad |= text.find("%p = thd.pad_tail %p ") != std::string::npos;
    sanitizeOfPad |= text.find("%s = thd.sanitize %p,") != std::string::npos;
  }
  EXPECT_TRUE(selfPad);
  EXPECT_TRUE(sanitizeOfPad);
}

TEST(SsaRewire, KeepsWithinMaxSizeAndNeedsTwoNames) {
  std::mt19937 rng(1);
  std::string text = "%a = x %a\n";
  EXPECT_FALSE(rewireSsaUse(text, 100, rng)) << text;
  text = "%a = x\n%bbbbbbbb = y %a\n";
  EXPECT_FALSE(rewireSsaUse(text, text.size(), rng)) << text;
  EXPECT_EQ(text, "%a = x\n%bbbbbbbb = y %a\n");
  EXPECT_FALSE(rewireSsaUse(text = "no values", 100, rng));
}

} // namespace

TEST(Nesting, InsertsHundredsOfLevelsWithinTheRoomLeft) {
  const std::string original = kPipeline;
  std::mt19937 rng(3);
  size_t most = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string text = original;
    ASSERT_TRUE(thdc::fuzz::nestDeeply(text, 1 << 16, rng));
    ASSERT_LE(text.size(), size_t(1) << 16);
    // At least 100 levels of the shortest spelling (one byte).
    size_t added = text.size() - original.size();
    EXPECT_GE(added, 100u) << trial;
    most = std::max(most, added);
  }
  // Deep enough, at times, for the depth that overflowed the parser.
  EXPECT_GE(most, 10000u);
  // No room: nothing changes.
  std::string text = original;
  EXPECT_FALSE(thdc::fuzz::nestDeeply(text, text.size(), rng));
  EXPECT_EQ(text, original);
}
