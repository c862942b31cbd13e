//===- DynamicCpTest.cpp - Unit tests of the dynamic-CP planner -----------===//
//
// The S3b golden vectors of docs/semantics.md as planner tests, the plan's
// accessors and per-rank inputs, plan validation, the planner's errors, and
// a randomized comparison with the reference scheduler and of the plan's
// invariants on a fixed seed.
//
//===----------------------------------------------------------------------===//

#include "planner/DynamicCp.h"
#include "test/unit/PlannerTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::planner;

namespace {

using I32 = std::vector<int32_t>;
using Rows = std::vector<I32>;
using Groups = MicrobatchGroups;

/// Asserts that the Status `expr` failed with a message containing
/// `substring`.
#define EXPECT_VIOLATION(expr, substring)                                      \
  do {                                                                         \
    Status status_ = (expr);                                                   \
    ASSERT_FALSE(status_) << "expected a violation: " << (substring);          \
    EXPECT_NE(status_.message().find(substring), std::string::npos)            \
        << "violation was: " << status_.message();                             \
  } while (0)

/// The settings of a dynamic-CP plan: C, cp, dp, N (with an alignment and
/// the dummy tail: K = N - 1) and the microbatch group.
PlannerConfig dcpConfig(int64_t C, int64_t cp, int64_t dp = 1,
                        std::optional<int64_t> N = std::nullopt,
                        std::optional<int64_t> vppGroup = std::nullopt) {
  return thdc::testing::makeConfig(C, cp, dp, N, /*alignmentSet=*/true,
                                   /*dummyTail=*/true, vppGroup);
}

/// Plans, asserts success and a valid plan, and returns the plan.
DynamicCpPlan planOrFail(const I32 &lengths, const PlannerConfig &config,
                         int64_t minCpSize = 1) {
  Result<DynamicCpPlan> plan = dynamicCpPlan(lengths, config, minCpSize);
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return DynamicCpPlan();
  Status valid = checkDynamicCpPlan(*plan, lengths, config, minCpSize);
  EXPECT_TRUE(valid) << valid.message();
  return *plan;
}

// The S3b running example: C = 1024 over four ranks.
const I32 kExample = {3000, 1000, 500, 200, 100};

} // namespace

//===----------------------------------------------------------------------===//
// Golden plans (the reference framework's scheduler on the same input)
//===----------------------------------------------------------------------===//

TEST(DynamicCpGolden, RunningExample) {
  const DynamicCpPlan plan = planOrFail(kExample, dcpConfig(1024, 4));
  EXPECT_EQ(plan.groups, (Groups{{{0, 1}, {0, 1}, {0, 1}, {0, 1}},
                                 {{2}, {2}, {3, 4}, {3, 4}}}));
  EXPECT_EQ(plan.cpSizes, (Rows{{4, 4, 4, 4}, {2, 2, 2, 2}}));
  EXPECT_EQ(plan.lengths, kExample);
  EXPECT_EQ(plan.C, 1024);
  EXPECT_EQ(plan.ranks(), 4);
  EXPECT_EQ(plan.numMicrobatches(), 2);
  EXPECT_EQ(plan.maxRealSeqs, std::nullopt);
  EXPECT_EQ(plan.sizes(), (I32{2, 4}));
  EXPECT_EQ(plan.localRank(0, 3), 3);
  EXPECT_EQ(plan.localRank(1, 3), 1);
  EXPECT_EQ(plan.subGroup(1, 3), (std::pair<int64_t, int64_t>{2, 4}));
  EXPECT_EQ(plan.subGroup(1, 1), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(plan.subGroup(0, 2), (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(plan.tokens(0, 1), 4000);
  EXPECT_EQ(plan.tokens(1, 0), 500);
  EXPECT_EQ(plan.tokens(1, 3), 300);
}

TEST(DynamicCpGolden, DpTimesCpRanksAreOneGroupOfRanks) {
  // dp 2 x cp 2 is the same four ranks as cp 4: the same plan.
  const DynamicCpPlan byCp = planOrFail(kExample, dcpConfig(1024, 4));
  const DynamicCpPlan byDp = planOrFail(kExample, dcpConfig(1024, 2, 2));
  EXPECT_EQ(byDp.groups, byCp.groups);
  EXPECT_EQ(byDp.cpSizes, byCp.cpSizes);
  EXPECT_EQ(byDp.dp, 2);
  EXPECT_EQ(byDp.cp, 2);
}

TEST(DynamicCpGolden, FillingAndMinimumSizes) {
  // The empty rank 3 is filled by doubling the smallest sub-group.
  DynamicCpPlan plan = planOrFail({1500, 100}, dcpConfig(1024, 4));
  EXPECT_EQ(plan.groups, (Groups{{{0}, {0}, {1}, {1}}}));
  EXPECT_EQ(plan.cpSizes, (Rows{{2, 2, 2, 2}}));
  // Doubling the first sub-group moves the others up.
  plan = planOrFail({100, 100, 100}, dcpConfig(100, 4));
  EXPECT_EQ(plan.groups, (Groups{{{0}, {0}, {1}, {2}}}));
  EXPECT_EQ(plan.cpSizes, (Rows{{2, 2, 1, 1}}));
  EXPECT_EQ(plan.sizes(), (I32{1, 2}));
  // min_cp_size 2 puts short sequences on two ranks.
  plan = planOrFail({10, 10}, dcpConfig(1024, 4), 2);
  EXPECT_EQ(plan.cpSizes, (Rows{{2, 2, 2, 2}}));
  EXPECT_EQ(plan.minCpSize, 2);
}

TEST(DynamicCpGolden, VirtualPipelineGroupMultiple) {
  // A microbatch group of 3: the second microbatch is split and widened.
  const DynamicCpPlan plan =
      planOrFail(kExample, dcpConfig(1024, 4, 1, std::nullopt, 3));
  EXPECT_EQ(plan.groups, (Groups{{{0, 1}, {0, 1}, {0, 1}, {0, 1}},
                                 {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
                                 {{2}, {2}, {2}, {2}}}));
  EXPECT_EQ(plan.cpSizes, (Rows{{4, 4, 4, 4}, {4, 4, 4, 4}, {4, 4, 4, 4}}));
  // A group of 1 (or none) leaves the count as it is.
  EXPECT_EQ(planOrFail(kExample, dcpConfig(1024, 4, 1, std::nullopt, 1))
                .numMicrobatches(),
            2);
}

TEST(DynamicCpGolden, SequenceCapFromS2) {
  // N = 3 with an alignment and the dummy tail: K = 2 sequences per
  // sub-group; without N all five share one rank.
  const I32 lengths = {8, 8, 8, 8, 8};
  const DynamicCpPlan free = planOrFail(lengths, dcpConfig(64, 2));
  const DynamicCpPlan capped = planOrFail(lengths, dcpConfig(64, 2, 1, 3));
  EXPECT_EQ(capped.maxRealSeqs, 2);
  std::size_t most = 0;
  for (const std::vector<Pack> &microbatch : capped.groups)
    for (const Pack &ids : microbatch)
      most = std::max(most, ids.size());
  EXPECT_EQ(most, 2u);
  EXPECT_GT(capped.numMicrobatches(), free.numMicrobatches());
  // Without the dummy tail K = N.
  PlannerConfig noDummy = dcpConfig(64, 2, 1, 3);
  noDummy.dummyTail = false;
  EXPECT_EQ(planOrFail(lengths, noDummy).maxRealSeqs, 3);
}

TEST(DynamicCpGolden, NoSequences) {
  const DynamicCpPlan plan = planOrFail({}, dcpConfig(1024, 4));
  EXPECT_EQ(plan.numMicrobatches(), 0);
  EXPECT_TRUE(plan.sizes().empty());
  Result<DynamicCpInputs> inputs = microbatchInputs(plan, 0, 4);
  ASSERT_TRUE(inputs) << inputs.status().message();
  EXPECT_EQ(inputs->numMicrobatches(), 0);
  EXPECT_TRUE(inputs->sampleIds.empty());
}

//===----------------------------------------------------------------------===//
// The inputs of examples/pack_microbatch.mlir
//===----------------------------------------------------------------------===//

TEST(DynamicCpInputs, GoldenRunningExample) {
  const DynamicCpPlan plan = planOrFail(kExample, dcpConfig(1024, 4));
  Result<DynamicCpInputs> inputs = microbatchInputs(plan, 3, 4);
  ASSERT_TRUE(inputs) << inputs.status().message();
  EXPECT_EQ(inputs->slots, 3);
  EXPECT_EQ(inputs->sampleIds, (I32{0, 1, 0, 3, 4, 0}));
  EXPECT_EQ(inputs->numSeqs, (I32{2, 2}));
  EXPECT_EQ(inputs->cpSizes, (I32{4, 2}));
  inputs = microbatchInputs(plan, 0, 3);
  ASSERT_TRUE(inputs) << inputs.status().message();
  EXPECT_EQ(inputs->sampleIds, (I32{0, 1, 2, 0}));
  EXPECT_EQ(inputs->numSeqs, (I32{2, 1}));
  EXPECT_EQ(inputs->cpSizes, (I32{4, 2}));
}

TEST(DynamicCpInputs, Errors) {
  const DynamicCpPlan plan = planOrFail(kExample, dcpConfig(1024, 4));
  EXPECT_ERROR(microbatchInputs(plan, 3, 2),
               "microbatch 0 has 2 sequences on rank 3, more than N-1 = 1");
  EXPECT_ERROR(microbatchInputs(plan, 0, 1), "N = 1 must be >= 2");
  EXPECT_ERROR(microbatchInputs(plan, 4, 4), "rank 4 is outside [0, dp*cp");
  EXPECT_ERROR(microbatchInputs(plan, -1, 4), "rank -1 is outside");
  EXPECT_ERROR(microbatchInputs(plan, 0, int64_t(1) << 40),
               "outside the int32 range");
}

TEST(DynamicCpInputs, IndexErrorsAreNamed) {
  const DynamicCpPlan plan = planOrFail(kExample, dcpConfig(1024, 4));
  EXPECT_TRUE(plan.checkIndex(1, 3));
  EXPECT_VIOLATION(plan.checkIndex(2, 0),
                   "microbatch 2, rank 0: the plan has 2 microbatches over 4 "
                   "ranks");
  EXPECT_VIOLATION(plan.checkIndex(0, 4), "microbatch 0, rank 4");
  EXPECT_VIOLATION(plan.checkIndex(-1, 0), "microbatch -1, rank 0");
}

//===----------------------------------------------------------------------===//
// Errors: the settings' and the scheduler's, with its message
//===----------------------------------------------------------------------===//

TEST(DynamicCpErrors, SettingsAndScheduler) {
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, 0)),
               "cp and dp must be >= 1; got cp=0, dp=1");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, 1, 0)),
               "cp and dp must be >= 1");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, int64_t(1) << 40,
                                            int64_t(1) << 40)),
               "overflows int64");
  EXPECT_ERROR(dynamicCpPlan({5000}, dcpConfig(1024, 4)),
               "needs 8 CP ranks of C = 1024 rows; there are 4");
  EXPECT_ERROR(dynamicCpPlan({5, -1}, dcpConfig(1024, 4)),
               "p[1] = -1 is negative");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, 4), 3),
               "must be a power of two in");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, 2, 2), 8),
               "must be a power of two in");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(0, 4)), "C = 0");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, 4, 1, 1)),
               "must be >= 2 when THD padding");
  EXPECT_ERROR(dynamicCpPlan({5}, dcpConfig(1024, 4, 1, std::nullopt, 0)),
               "must be >= 1");
  EXPECT_ERROR(dynamicCpPlan({200, 200}, dcpConfig(128, 5)),
               "pushes the sub-groups after it past rank 4");
  EXPECT_ERROR(dynamicCpPlan({10, 10}, dcpConfig(1024, 1, 1, std::nullopt, 2)),
               "no microbatch has more than one sub-group");
  // 14 ranks (cp 7, dp 2) with virtual pipeline stages: a microbatch of
  // sub-groups of 4, 4, 4 and 2 ranks split in two, each half widened onto
  // 16 ranks (megatron-core's align_sample_id_groups returns those); was an
  // internal error (the planner fuzzer's seed corpus holds this batch).
  EXPECT_ERROR(dynamicCpPlan({3598, 3598, 3598, 50, 2053, 0, 0, 47},
                             dcpConfig(3616, 7, 2, std::nullopt, 4), 2),
               "makes a microbatch of 16 ranks, not the 14 DP x CP ranks");
}

//===----------------------------------------------------------------------===//
// Plan validation
//===----------------------------------------------------------------------===//

TEST(DynamicCpValidation, FindsEveryKindOfViolation) {
  const PlannerConfig config = dcpConfig(1024, 4, 1, 4);
  const DynamicCpPlan good = planOrFail(kExample, config);
  ASSERT_EQ(good.cpSizes, (Rows{{4, 4, 4, 4}, {2, 2, 2, 2}}));
  auto check = [&](const DynamicCpPlan &plan) {
    return checkDynamicCpPlan(plan, kExample, config);
  };
  EXPECT_TRUE(check(good));

  DynamicCpPlan bad = good;
  bad.C = 512;
  EXPECT_VIOLATION(check(bad), "plan records C = 512");
  bad = good;
  bad.maxRealSeqs = std::nullopt;
  EXPECT_VIOLATION(check(bad), "plan records sequence cap none but S2 gives 3");
  bad = good;
  bad.lengths[0] = 1;
  EXPECT_VIOLATION(check(bad), "other lengths");
  bad = good;
  bad.cpSizes.pop_back();
  EXPECT_VIOLATION(check(bad), "2 microbatches but 1 rows of CP sizes");
  bad = good;
  bad.groups[1].pop_back();
  EXPECT_VIOLATION(check(bad), "microbatch 1 has 3 groups and 4 CP sizes");
  bad = good;
  bad.cpSizes[1] = {3, 3, 3, 2};
  EXPECT_VIOLATION(check(bad), "gives rank 0 CP size 3, not a power of two");
  bad = good;
  bad.cpSizes[1] = {1, 2, 2, 1};
  bad.groups[1] = {{2}, {3, 4}, {3, 4}, {2}};
  EXPECT_VIOLATION(check(bad), "rank 1 (CP size 2) does not start at a");
  bad = good;
  bad.groups[1][1] = {3, 4};
  EXPECT_VIOLATION(check(bad), "rank 1 is in the sub-group of rank 0");
  bad = good;
  bad.groups[1] = {{2}, {2}, {}, {}};
  EXPECT_VIOLATION(check(bad), "leaves rank 2 empty");
  bad = good;
  bad.groups[1] = {{2}, {2}, {2, 3, 4}, {2, 3, 4}};
  EXPECT_VIOLATION(check(bad), "sequence 2 is in microbatch 1 and again");
  bad = good;
  bad.groups[1] = {{2}, {2}, {3}, {3}};
  EXPECT_VIOLATION(check(bad), "sequence 4 is in no microbatch");
  bad = good;
  bad.groups[1] = {{2}, {2}, {3, 9}, {3, 9}};
  EXPECT_VIOLATION(check(bad), "sequence id 9, outside [0, 5)");
  bad = good;
  bad.groups = {{{0}, {0}, {0}, {0}}, {{1, 2, 3, 4}, {1, 2, 3, 4},
                                       {1, 2, 3, 4}, {1, 2, 3, 4}}};
  bad.cpSizes = {{4, 4, 4, 4}, {4, 4, 4, 4}};
  EXPECT_VIOLATION(check(bad), "4 sequences, more than the cap K = 3");
  // Two sequences of 600 tokens on one rank each of C = 1024.
  DynamicCpPlan over;
  over.groups = {{{0, 1}, {0, 1}}};
  over.cpSizes = {{1, 1}};
  over.lengths = {600, 600};
  over.C = 1024;
  over.cp = 2;
  EXPECT_VIOLATION(checkDynamicCpPlan(over, {600, 600}, dcpConfig(1024, 2)),
                   "1200 tokens, more than C*1 = 1024");
  bad = good;
  bad.groups = {{{0}, {0}, {0}, {0}}, {{1}, {2}, {3}, {4}}};
  bad.cpSizes = {{4, 4, 4, 4}, {1, 1, 1, 1}};
  EXPECT_TRUE(check(bad)) << "a valid plan other than the scheduler's";
  bad.groups = {{{0}, {0}, {1}, {1}}, {{2}, {2}, {3, 4}, {3, 4}}};
  bad.cpSizes = {{2, 2, 2, 2}, {2, 2, 2, 2}};
  EXPECT_VIOLATION(check(bad), "puts sequence 0 (3000 tokens) on 2 ranks; it "
                               "needs 4");
  bad = good;
  EXPECT_VIOLATION(checkDynamicCpPlan(bad, kExample, dcpConfig(1024, 4, 1, 4, 3)),
                   "not a multiple of microbatch_group_size_per_vp_stage = 3");
  EXPECT_VIOLATION(checkDynamicCpPlan(good, kExample, config, 2),
                   "min_cp_size = 1");
  EXPECT_VIOLATION(checkDynamicCpPlan(good, kExample, dcpConfig(1024, 0)),
                   "the settings admit no plan: cp and dp must be >= 1");
}

//===----------------------------------------------------------------------===//
// Randomized: the reference scheduler's plans, and the plan's invariants
//===----------------------------------------------------------------------===//

namespace {

/// Deterministic draws from the (standardized) mt19937_64 output, so the
/// same batches are generated with every standard library.
class Draw {
public:
  explicit Draw(uint64_t seed) : engine(seed) {}
  /// An integer in [lo, hi].
  int64_t integer(int64_t lo, int64_t hi) {
    return lo + int64_t(engine() % uint64_t(hi - lo + 1));
  }
  /// One of `values`.
  int64_t pick(const std::vector<int64_t> &values) {
    return values[std::size_t(integer(0, int64_t(values.size()) - 1))];
  }

private:
  std::mt19937_64 engine;
};

/// The smallest power of two p with p*C >= length, at least minCp.
int64_t sizeNeeded(int64_t length, int64_t C, int64_t minCp) {
  int64_t p = 1;
  while (p * C < length)
    p *= 2;
  return std::max(p, minCp);
}

} // namespace

TEST(DynamicCpRandomized, PlansAreTheReferencesAndKeepTheirPromises) {
  Draw draw(20261206);
  int planned = 0, refused = 0, capped = 0, aligned = 0;
  for (int trial = 0; trial < 600; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t dp = draw.integer(1, 4), cp = draw.pick({1, 2, 4});
    const int64_t ranks = dp * cp;
    const int64_t C = draw.pick({64, 128, 512, 2048});
    std::vector<int64_t> minCps;
    for (int64_t m = 1; m <= ranks; m *= 2)
      minCps.push_back(m);
    const int64_t minCp = draw.pick(minCps);
    const std::optional<int64_t> N =
        draw.integer(0, 2) ? std::optional<int64_t>(draw.pick({2, 4, 9}))
                           : std::nullopt;
    const std::optional<int64_t> group =
        trial % 4 == 3 ? std::optional<int64_t>(draw.integer(1, 4))
                       : std::nullopt;
    PlannerConfig config = dcpConfig(C, cp, dp, N, group);
    config.dummyTail = draw.integer(0, 3) != 0;
    // Lengths up to C on each rank of the largest power-of-two sub-group,
    // now and then one longer than every rank together.
    int64_t top = 1;
    while (top * 2 <= ranks)
      top *= 2;
    I32 lengths;
    for (int64_t i = draw.integer(0, 60); i > 0; --i)
      lengths.push_back(int32_t(draw.integer(0, C * draw.pick({1, 1, 2, top}))));
    if (trial % 50 == 7)
      lengths.push_back(int32_t(C * ranks + 1));

    Result<DynamicCpPlan> plan = dynamicCpPlan(lengths, config, minCp);
    Result<std::optional<int64_t>> cap = plannerSequenceCap(config);
    ASSERT_TRUE(cap);
    Result<reference::DynamicCpGroups> expected = reference::dynamicCpGroups(
        lengths, C, ranks, minCp, *cap, group.value_or(1));
    // The planner refuses exactly what the scheduler refuses, by its
    // message, and otherwise plans what it plans.
    ASSERT_EQ(bool(plan), bool(expected))
        << (plan ? expected.status().message() : plan.status().message());
    if (!plan) {
      EXPECT_EQ(plan.status().message(), expected.status().message());
      ++refused;
      continue;
    }
    ++planned;
    capped += cap->has_value();
    aligned += group.value_or(1) > 1;
    EXPECT_EQ(plan->groups, expected->groups);
    EXPECT_EQ(plan->cpSizes, expected->cpSizes);
    EXPECT_EQ(plan->maxRealSeqs, *cap);
    EXPECT_EQ(checkDynamicCpPlan(*plan, lengths, config, minCp).message(), "");

    // The invariants, restated: every sequence once, every sub-group an
    // aligned block of one size and one set of ids within its budget.
    std::vector<int> seen(lengths.size(), 0);
    std::set<int32_t> sizes;
    if (group.value_or(1) > 1) {
      EXPECT_EQ(plan->numMicrobatches() % *group, 0);
    }
    for (int64_t m = 0; m < plan->numMicrobatches(); ++m) {
      for (int64_t j = 0; j < ranks;) {
        ASSERT_TRUE(plan->checkIndex(m, j));
        const auto [first, last] = plan->subGroup(m, j);
        const int64_t size = last - first;
        ASSERT_EQ(first, j);
        ASSERT_LE(last, ranks);
        sizes.insert(int32_t(size));
        EXPECT_GE(size, minCp);
        EXPECT_TRUE((size & (size - 1)) == 0 || size == ranks) << size;
        int64_t tokens = 0;
        for (int32_t id : plan->groups[m][j]) {
          ++seen[std::size_t(id)];
          tokens += lengths[std::size_t(id)];
          EXPECT_GE(size, sizeNeeded(lengths[std::size_t(id)], C, minCp));
        }
        EXPECT_FALSE(plan->groups[m][j].empty());
        EXPECT_LE(tokens, C * size);
        if (*cap) {
          EXPECT_LE(int64_t(plan->groups[m][j].size()), **cap);
        }
        for (int64_t k = first; k < last; ++k) {
          EXPECT_EQ(plan->groups[m][k], plan->groups[m][j]);
          EXPECT_EQ(plan->localRank(m, k), k - first);
          EXPECT_EQ(plan->tokens(m, k), tokens);
        }
        j = last;
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(),
                            [](int count) { return count == 1; }));
    EXPECT_EQ(plan->sizes(), I32(sizes.begin(), sizes.end()));

    // Every rank's inputs are its groups, padded with zeros, and its sizes.
    const int64_t inputN = 1 + int64_t(draw.integer(1, 12));
    for (int64_t rank = 0; rank < ranks; ++rank) {
      Result<DynamicCpInputs> inputs = microbatchInputs(*plan, rank, inputN);
      bool fits = true;
      for (const std::vector<Pack> &microbatch : plan->groups)
        fits = fits && int64_t(microbatch[rank].size()) <= inputN - 1;
      ASSERT_EQ(bool(inputs), fits);
      if (!inputs)
        continue;
      for (int64_t m = 0; m < plan->numMicrobatches(); ++m) {
        const Pack &ids = plan->groups[m][rank];
        I32 row(inputs->sampleIds.begin() + m * (inputN - 1),
                inputs->sampleIds.begin() + (m + 1) * (inputN - 1));
        I32 expectedRow = ids;
        expectedRow.resize(std::size_t(inputN - 1), 0);
        EXPECT_EQ(row, expectedRow);
        EXPECT_EQ(inputs->numSeqs[m], int32_t(ids.size()));
        EXPECT_EQ(inputs->cpSizes[m], plan->cpSizes[m][rank]);
      }
    }
  }
  // The trials exercise every outcome.
  EXPECT_GT(planned, 300);
  EXPECT_GT(refused, 10);
  EXPECT_GT(capped, 100);
  EXPECT_GT(aligned, 20);
}
