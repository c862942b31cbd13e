//===- SsaRewireTest.cpp - the pipeline fuzzer's SSA rewiring -------------===//
//
// What scanValueRefs takes for definitions and uses, and that rewireSsaUse
// reaches the rewirings it exists for: a use of the op's own result and a
// use of a later value.
//
//===----------------------------------------------------------------------===//

#include "SsaRewire.h"

#include <gtest/gtest.h>

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
