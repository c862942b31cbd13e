//===- PlannerTestSupport.h - what the planners' tests share ----*- C++ -*-===//

#ifndef THDC_TEST_UNIT_PLANNERTESTSUPPORT_H
#define THDC_TEST_UNIT_PLANNERTESTSUPPORT_H

#include "planner/Planner.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

/// Asserts that `expr` failed with a message containing `substring`.
#define EXPECT_ERROR(expr, substring)                                          \
  do {                                                                         \
    auto result_ = (expr);                                                     \
    ASSERT_FALSE(result_) << "expected an error containing: " << (substring);  \
    EXPECT_NE(result_.status().message().find(substring), std::string::npos)   \
        << "error was: " << result_.status().message();                        \
  } while (0)

namespace thdc::testing {

/// A config with budget C, sizes cp and dp, and the S2 inputs.
inline planner::PlannerConfig
makeConfig(int64_t maxSeqlenPerRank, int64_t cp, int64_t dp,
           std::optional<int64_t> maxPackedSequences,
           bool alignmentSet = false, bool dummyTail = false,
           std::optional<int64_t> vppGroup = std::nullopt) {
  planner::PlannerConfig config;
  config.maxSeqlenPerRank = maxSeqlenPerRank;
  config.cp = cp;
  config.dp = dp;
  config.maxPackedSequences = maxPackedSequences;
  config.alignmentSet = alignmentSet;
  config.dummyTail = dummyTail;
  config.vppGroup = vppGroup;
  return config;
}

} // namespace thdc::testing

#endif // THDC_TEST_UNIT_PLANNERTESTSUPPORT_H
