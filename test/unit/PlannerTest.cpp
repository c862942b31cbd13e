//===- PlannerTest.cpp - Unit tests of the microbatch planner -------------===//
//
// The S2, S3 and S12 golden vectors of docs/semantics.md as
// planner tests, the planner's errors, plan validation, the inputs of
// examples/pack_microbatch.mlir made from a plan, edge cases, and a
// randomized comparison of first-fit-decreasing with next-fit (and of
// next-fit with the reference scheduler) on a fixed seed.
//
//===----------------------------------------------------------------------===//

#include "planner/Planner.h"
#include "test/unit/PlannerTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::planner;

namespace {

using I32 = std::vector<int32_t>;
using I64 = std::vector<int64_t>;
using Packs = std::vector<Pack>;

using thdc::testing::makeConfig;

/// A config whose S2 cap is exactly K (N = K without the dummy policy).
PlannerConfig capConfig(int64_t maxSeqlenPerRank, int64_t cp, int64_t dp,
                        std::optional<int64_t> cap,
                        std::optional<int64_t> vppGroup = std::nullopt) {
  return makeConfig(maxSeqlenPerRank, cp, dp, cap, false, false, vppGroup);
}

/// Runs `planner`, asserts success and a valid plan, and returns the plan.
template <typename Planner>
MicrobatchPlan planOrFail(Planner planner, const I32 &lengths,
                          const PlannerConfig &config) {
  Result<MicrobatchPlan> plan = planner(lengths, config);
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return MicrobatchPlan();
  Status valid = checkPlan(*plan, lengths, config);
  EXPECT_TRUE(valid) << valid.message();
  return *plan;
}

MicrobatchPlan nextFit(const I32 &lengths, const PlannerConfig &config) {
  return planOrFail(nextFitPlan, lengths, config);
}
MicrobatchPlan firstFit(const I32 &lengths, const PlannerConfig &config) {
  return planOrFail(firstFitDecreasingPlan, lengths, config);
}
MicrobatchPlan balanced(const I32 &lengths, const PlannerConfig &config) {
  return planOrFail(balancedPlan, lengths, config);
}

// The S3 running example: Cap = C*cp = 4*2 = 8.
const I32 kExample = {5, 3, 4, 2, 2, 1, 6};

//===----------------------------------------------------------------------===//
// S2
//===----------------------------------------------------------------------===//

TEST(PlannerS2, GoldenCaps) {
  auto cap = [](std::optional<int64_t> n, bool align, bool dummy) {
    return plannerSequenceCap(makeConfig(4, 2, 1, n, align, dummy));
  };
  Result<std::optional<int64_t>> withDummy = cap(32, true, true);
  ASSERT_TRUE(withDummy) << withDummy.status().message();
  EXPECT_EQ(*withDummy, std::optional<int64_t>(31));
  EXPECT_EQ(*cap(32, true, false), std::optional<int64_t>(32));
  EXPECT_EQ(*cap(32, false, true), std::optional<int64_t>(32));
  EXPECT_EQ(*cap(std::nullopt, true, true), std::nullopt);
  EXPECT_EQ(*cap(1, false, true), std::optional<int64_t>(1));
  EXPECT_ERROR(cap(1, true, true), "must be >= 2 when THD padding appends");
  EXPECT_ERROR(cap(0, false, false), "= 0 must be >= 1");
}

TEST(PlannerS2, PlansRecordTheCapAndPropagateItsErrors) {
  EXPECT_EQ(nextFit({1}, makeConfig(4, 2, 1, 32, true, true)).maxRealSeqs,
            std::optional<int64_t>(31));
  EXPECT_EQ(balanced({1}, makeConfig(4, 2, 1, std::nullopt)).maxRealSeqs,
            std::nullopt);
  EXPECT_ERROR(nextFitPlan({1}, makeConfig(4, 2, 1, 1, true, true)),
               "must be >= 2 when THD padding appends");
  EXPECT_ERROR(balancedPlan({1}, makeConfig(4, 2, 1, 1, true, true)),
               "must be >= 2 when THD padding appends");
}

TEST(PlannerS2, DummyReservesOneSlotInEveryPack) {
  // N = 4 with alignment and dummy: K = 3, so the S3 "cap triggers" golden.
  const PlannerConfig config = makeConfig(4, 2, 1, 4, true, true);
  EXPECT_EQ(nextFit({1, 1, 1, 1, 1}, config).packs, (Packs{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(balanced({1, 1, 1, 1, 1}, config).packs,
            (Packs{{0, 1, 2}, {3, 4}}));
  // Without the dummy all four slots hold real sequences.
  EXPECT_EQ(nextFit({1, 1, 1, 1, 1}, makeConfig(4, 2, 1, 4, true, false)).packs,
            (Packs{{0, 1, 2, 3}, {4}}));
}

//===----------------------------------------------------------------------===//
// S3 next-fit (the reference scheduler)
//===----------------------------------------------------------------------===//

TEST(PlannerS3, GoldenNextFitDp1) {
  MicrobatchPlan plan = nextFit(kExample, capConfig(4, 2, 1, 3));
  EXPECT_EQ(plan.algorithm, PlanAlgorithm::NextFit);
  EXPECT_EQ(plan.packs, (Packs{{0, 1}, {2, 3, 4}, {5, 6}}));
  EXPECT_EQ(plan.packTokens, (I64{8, 8, 7}));
  EXPECT_EQ(plan.capacity, 8);
  ASSERT_EQ(plan.numMicrobatches(), 3);
  for (std::size_t m = 0; m < 3; ++m)
    EXPECT_EQ(plan.groups[m], (Packs{plan.packs[m], plan.packs[m]}));
}

TEST(PlannerS3, GoldenNextFitDp2MovesLastSequence) {
  MicrobatchPlan plan = nextFit(kExample, capConfig(4, 2, 2, 3));
  EXPECT_EQ(plan.packs, (Packs{{0, 1}, {2, 3, 4}, {5}, {6}}));
  EXPECT_EQ(plan.packTokens, (I64{8, 8, 1, 6}));
  ASSERT_EQ(plan.numMicrobatches(), 2);
  EXPECT_EQ(plan.groups[0], (Packs{{0, 1}, {0, 1}, {2, 3, 4}, {2, 3, 4}}));
  EXPECT_EQ(plan.groups[1], (Packs{{5}, {5}, {6}, {6}}));
}

TEST(PlannerS3, GoldenNextFitCapTriggers) {
  MicrobatchPlan plan = nextFit({1, 1, 1, 1, 1}, capConfig(4, 2, 1, 3));
  EXPECT_EQ(plan.packs, (Packs{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(plan.packTokens, (I64{3, 2}));
}

TEST(PlannerS3, GoldenNextFitEqualLengthsDp2) {
  MicrobatchPlan plan = nextFit({3, 3, 3, 3, 3, 3, 3}, capConfig(4, 2, 2, 2));
  EXPECT_EQ(plan.packs, (Packs{{0, 1}, {2, 3}, {4, 5}, {6}}));
  ASSERT_EQ(plan.numMicrobatches(), 2);
  EXPECT_EQ(plan.groups[0], (Packs{{0, 1}, {0, 1}, {2, 3}, {2, 3}}));
  EXPECT_EQ(plan.groups[1], (Packs{{4, 5}, {4, 5}, {6}, {6}}));
}

TEST(PlannerS3, GoldenOversizedFirstSequenceIsAnErrorNotAnEmptyPack) {
  // The reference emits [[], [0], [1]]; the planner names the sequence.
  const PlannerConfig config = capConfig(4, 2, 1, std::nullopt);
  const char *message = "sequence 0 has padded length p[0] = 9, more than "
                        "the pack budget C*cp = 4*2 = 8";
  EXPECT_ERROR(nextFitPlan({9, 3}, config), message);
  EXPECT_ERROR(firstFitDecreasingPlan({9, 3}, config), message);
  EXPECT_ERROR(balancedPlan({9, 3}, config), message);
}

TEST(PlannerS3, OversizedLaterSequenceIsAnErrorNotAnOversizePack) {
  // The reference emits the oversize singleton [[0], [1]].
  EXPECT_ERROR(nextFitPlan({3, 9}, capConfig(4, 2, 1, std::nullopt)),
               "sequence 1 has padded length p[1] = 9");
  EXPECT_ERROR(balancedPlan({3, 9}, capConfig(4, 2, 1, std::nullopt)),
               "sequence 1 has padded length p[1] = 9");
}

/// The S1 padded lengths of `valid` for cp (tp 1) and a low-precision
/// multiple m.
I32 alignedFor(const I32 &valid, int64_t cp, int64_t multiple) {
  Result<int64_t> granularity =
      reference::padGranularity(cp, 1, false, 1, false, multiple);
  EXPECT_TRUE(granularity) << granularity.status().message();
  Result<I32> padded = reference::alignLengths(valid, *granularity);
  EXPECT_TRUE(padded) << padded.status().message();
  return padded ? *padded : I32();
}

TEST(PlannerS1, LowPrecisionMultipleHoldsForEveryRankOfEveryPack) {
  // FP8 with cp = 2: G = lcm(4, 2 * 16) = 32, so each of the two CP ranks
  // holds a multiple of 16 tokens of every sequence, and of every pack.
  const int64_t cp = 2, m = 16;
  const I32 padded = alignedFor({3, 40, 17, 64, 1, 90, 31, 5}, cp, m);
  EXPECT_EQ(padded, (I32{32, 64, 32, 64, 32, 96, 32, 32}));
  const PlannerConfig config = makeConfig(128, cp, 2, 4, true, true);
  for (const MicrobatchPlan &plan :
       {nextFit(padded, config), balanced(padded, config)}) {
    ASSERT_FALSE(plan.packs.empty());
    for (std::size_t k = 0; k < plan.packs.size(); ++k) {
      EXPECT_EQ(plan.packTokens[k] / cp % m, 0) << "pack " << k;
      for (int32_t id : plan.packs[k])
        EXPECT_EQ(padded[id] % (cp * m), 0) << "sequence " << id;
    }
  }
}

TEST(PlannerS1, MultipleBeyondThePackBudgetNamesTheSequence) {
  // 100 tokens fit C*cp = 128 when aligned to 2*cp = 4, but blockwise FP8
  // (m = 128) aligns them to lcm(4, 2 * 128) = 256: the planner names the
  // sequence instead of emitting an oversize pack.
  const PlannerConfig config = capConfig(64, 2, 1, std::nullopt);
  EXPECT_TRUE(nextFitPlan(alignedFor({100}, 2, 1), config));
  EXPECT_ERROR(nextFitPlan(alignedFor({100}, 2, 128), config),
               "sequence 0 has padded length p[0] = 256, more than the pack "
               "budget C*cp = 64*2 = 128");
  EXPECT_ERROR(balancedPlan(alignedFor({100}, 2, 128), config), "p[0] = 256");
}

TEST(PlannerS3, VirtualPipelineGroupMultiple) {
  MicrobatchPlan plan =
      nextFit({2, 2, 2, 2}, capConfig(8, 1, 1, std::nullopt, 2));
  EXPECT_EQ(plan.packs, (Packs{{0, 1, 2}, {3}}));
  EXPECT_EQ(plan.numMicrobatches(), 2);
  MicrobatchPlan better =
      balanced({2, 2, 2, 2}, capConfig(8, 1, 1, std::nullopt, 2));
  EXPECT_EQ(better.packs, (Packs{{0, 1, 2}, {3}}));
}

TEST(PlannerS3, ParameterErrorsComeFromTheReference) {
  const I32 lengths = {3};
  EXPECT_ERROR(nextFitPlan(lengths, capConfig(0, 2, 1, 3)), "C = 0");
  EXPECT_ERROR(nextFitPlan(lengths, capConfig(4, 0, 1, 3)), "cp = 0");
  EXPECT_ERROR(balancedPlan(lengths, capConfig(4, 2, 0, 3)), "dp = 0");
  EXPECT_ERROR(balancedPlan(lengths, capConfig(4, 2, 1, 3, 0)),
               "microbatch_group_size_per_vp_stage = 0");
  EXPECT_ERROR(nextFitPlan({3, -1}, capConfig(4, 2, 1, 3)),
               "p[1] = -1 is negative");
  EXPECT_ERROR(balancedPlan({3, -1}, capConfig(4, 2, 1, 3)),
               "p[1] = -1 is negative");
  EXPECT_ERROR(nextFitPlan(lengths, capConfig(4, 2, 2, 3)),
               "Not enough samples to move");
  EXPECT_ERROR(balancedPlan(lengths, capConfig(4, 2, 2, 3)),
               "Not enough samples to move");
}

//===----------------------------------------------------------------------===//
// S3 first-fit decreasing and the balanced plan
//===----------------------------------------------------------------------===//

TEST(PlannerBalanced, GoldenRunningExampleDp1) {
  // FFD: 6 -> A, 5 -> B, 4 -> C, 3 -> B, 2 -> A, 2 -> C, 1 -> C.
  MicrobatchPlan plan = balanced(kExample, capConfig(4, 2, 1, 3));
  EXPECT_EQ(plan.algorithm, PlanAlgorithm::FirstFitDecreasing);
  EXPECT_EQ(plan.packs, (Packs{{0, 1}, {2, 4, 5}, {3, 6}}));
  EXPECT_EQ(plan.packTokens, (I64{8, 7, 8}));
  EXPECT_EQ(plan.numMicrobatches(), 3);
}

TEST(PlannerBalanced, GoldenRunningExampleDp2SplitsHeaviestPack) {
  // Three FFD packs; the heaviest multi-sequence pack {3, 6} (8 tokens,
  // created first) gives up its longest sequence 6.
  MicrobatchPlan plan = balanced(kExample, capConfig(4, 2, 2, 3));
  EXPECT_EQ(plan.packs, (Packs{{0, 1}, {2, 4, 5}, {3}, {6}}));
  EXPECT_EQ(plan.packTokens, (I64{8, 7, 2, 6}));
  ASSERT_EQ(plan.numMicrobatches(), 2);
  EXPECT_EQ(plan.groups[0], (Packs{{0, 1}, {0, 1}, {2, 4, 5}, {2, 4, 5}}));
  EXPECT_EQ(plan.groups[1], (Packs{{3}, {3}, {6}, {6}}));
}

TEST(PlannerBalanced, GoldenCapAndEqualLengthsMatchNextFit) {
  EXPECT_EQ(balanced({1, 1, 1, 1, 1}, capConfig(4, 2, 1, 3)).packs,
            (Packs{{0, 1, 2}, {3, 4}}));
  MicrobatchPlan plan = balanced({3, 3, 3, 3, 3, 3, 3}, capConfig(4, 2, 2, 2));
  EXPECT_EQ(plan.packs, (Packs{{0, 1}, {2, 3}, {4, 5}, {6}}));
  EXPECT_EQ(plan.groups[0], (Packs{{0, 1}, {0, 1}, {2, 3}, {2, 3}}));
}

TEST(PlannerBalanced, FirstFitDecreasingSavesAMicrobatch) {
  // Next-fit: [5] [4,3] [4]; FFD: [5,3] [4,4].
  const I32 lengths = {5, 4, 3, 4};
  const PlannerConfig config = capConfig(4, 2, 1, std::nullopt);
  EXPECT_EQ(nextFit(lengths, config).packs, (Packs{{0}, {1, 2}, {3}}));
  MicrobatchPlan plan = balanced(lengths, config);
  EXPECT_EQ(plan.algorithm, PlanAlgorithm::FirstFitDecreasing);
  EXPECT_EQ(plan.packs, (Packs{{0, 2}, {1, 3}}));
  EXPECT_EQ(plan.packTokens, (I64{8, 8}));
}

TEST(PlannerBalanced, FallsBackToNextFitWhenFirstFitNeedsMore) {
  // With K = 3 next-fit finds [1,1,2] [1,1,6]; FFD puts 6 and 2 together
  // first and needs three packs.
  const I32 capped = {1, 1, 2, 1, 1, 6};
  const PlannerConfig cappedConfig = capConfig(4, 2, 1, 3);
  EXPECT_EQ(firstFit(capped, cappedConfig).packs,
            (Packs{{0, 1, 3}, {2, 5}, {4}}));
  MicrobatchPlan plan = balanced(capped, cappedConfig);
  EXPECT_EQ(plan.algorithm, PlanAlgorithm::NextFit);
  EXPECT_EQ(plan.packs, (Packs{{0, 1, 2}, {3, 4, 5}}));

  // Without a cap (Cap 12): next-fit [7,3,2] [12] [2,4,6]; FFD needs four.
  const I32 uncapped = {7, 3, 2, 12, 2, 4, 6};
  const PlannerConfig uncappedConfig = capConfig(12, 1, 1, std::nullopt);
  EXPECT_EQ(firstFit(uncapped, uncappedConfig).numMicrobatches(), 4);
  MicrobatchPlan fallback = balanced(uncapped, uncappedConfig);
  EXPECT_EQ(fallback.algorithm, PlanAlgorithm::NextFit);
  EXPECT_EQ(fallback.packs, (Packs{{0, 1, 2}, {3}, {4, 5, 6}}));
}

TEST(PlannerBalanced, SucceedsWhereNextFitHasNotEnoughSamplesToMove) {
  // dp = 2, Cap 8: next-fit makes three singletons and cannot split them;
  // FFD makes [7] [2,6].
  const I32 lengths = {2, 7, 6};
  const PlannerConfig config = capConfig(8, 1, 2, std::nullopt);
  EXPECT_ERROR(nextFitPlan(lengths, config), "Not enough samples to move");
  MicrobatchPlan plan = balanced(lengths, config);
  EXPECT_EQ(plan.packs, (Packs{{0, 2}, {1}}));
  EXPECT_EQ(plan.numMicrobatches(), 1);
}

//===----------------------------------------------------------------------===//
// S12
//===----------------------------------------------------------------------===//

TEST(PlannerS12, GoldenUpperBoundIsReached) {
  // GBS 64, dp 2, cp 2, C 4096, Lmax 2048, K 31 (N 32 with the dummy):
  // s = 4 sequences per pack, 16 packs, U = 8 microbatches.
  const I32 lengths(64, 2048);
  const PlannerConfig config = makeConfig(4096, 2, 2, 32, true, true);
  Result<int64_t> bound = reference::maxMicrobatchesUpperBound(
      64, 2, 2, 4096, 2048, std::nullopt, 31);
  ASSERT_TRUE(bound) << bound.status().message();
  EXPECT_EQ(*bound, 8);
  EXPECT_EQ(nextFit(lengths, config).numMicrobatches(), 8);
  EXPECT_EQ(balanced(lengths, config).numMicrobatches(), 8);
}

TEST(PlannerS12, UpperBoundVariantsAreReached) {
  // VPP group 3: 16 packs split into 18, / dp 2 = 9.
  const I32 lengths(64, 2048);
  const PlannerConfig vpp = makeConfig(4096, 2, 2, 32, true, true, 3);
  EXPECT_EQ(*reference::maxMicrobatchesUpperBound(64, 2, 2, 4096, 2048, 3, 31),
            9);
  EXPECT_EQ(nextFit(lengths, vpp).numMicrobatches(), 9);
  EXPECT_EQ(balanced(lengths, vpp).numMicrobatches(), 9);
  // K = 2 limits s to 2: 32 packs, 16 microbatches.
  const PlannerConfig capped = capConfig(4096, 2, 2, 2);
  EXPECT_EQ(nextFit(lengths, capped).numMicrobatches(), 16);
  EXPECT_EQ(balanced(lengths, capped).numMicrobatches(), 16);
}

TEST(PlannerS12, PlannerFiguresAreTheReferences) {
  // The golden rows of S12 through the config: K comes from N, the alignment
  // and the dummy tail.
  Result<int64_t> bound =
      microbatchUpperBound(makeConfig(4096, 2, 2, 32, true, true), 64, 2048);
  ASSERT_TRUE(bound) << bound.status().message();
  EXPECT_EQ(*bound, 8);
  EXPECT_EQ(*microbatchUpperBound(makeConfig(4096, 2, 2, 32, true, true, 3), 64,
                                  2048),
            9);
  EXPECT_EQ(*microbatchUpperBound(capConfig(4096, 2, 2, 2), 64, 2048), 16);
  EXPECT_EQ(
      *microbatchUpperBound(capConfig(1024, 1, 2, std::nullopt), 64, 2048), 32);
  EXPECT_EQ(*microbatchUpperBound(capConfig(1024, 1, 4, std::nullopt), 1, 128),
            1);
  EXPECT_ERROR(
      microbatchUpperBound(makeConfig(4096, 2, 2, 1, true, true), 64, 2048),
      "must be >= 2 when THD padding appends");
  EXPECT_ERROR(microbatchUpperBound(capConfig(4096, 2, 2, 31), 0, 2048),
               "needs positive inputs (GBS = 0");

  // Capture count: runtime 5, bound 8 -> 8; runtime 9 -> 9; forced -> 5.
  MicrobatchPlan five;
  five.groups.resize(5);
  MicrobatchPlan nine;
  nine.groups.resize(9);
  EXPECT_EQ(graphCaptureCount(five, 8), 8);
  EXPECT_EQ(graphCaptureCount(nine, 8), 9);
  EXPECT_EQ(graphCaptureCount(five, 8, /*useRuntimeCount=*/true), 5);
}

//===----------------------------------------------------------------------===//
// The inputs of examples/pack_microbatch.mlir
//===----------------------------------------------------------------------===//

TEST(PlannerInputs, GoldenRunningExampleEveryRank) {
  // S3: C = 4, cp = 2, N = 4 with the dummy (K = 3) -> [[0,1],[2,3,4],[5,6]];
  // both CP ranks get every pack.
  const PlannerConfig config = makeConfig(4, 2, 1, 4, true, true);
  const MicrobatchPlan plan = nextFit(kExample, config);
  for (int64_t rank : {0, 1}) {
    Result<MicrobatchInputs> inputs = microbatchInputs(plan, rank, 4);
    ASSERT_TRUE(inputs) << inputs.status().message();
    EXPECT_EQ(inputs->slots, 3);
    EXPECT_EQ(inputs->numMicrobatches(), 3);
    EXPECT_EQ(inputs->sampleIds, (I32{0, 1, 0, 2, 3, 4, 5, 6, 0}));
    EXPECT_EQ(inputs->numSeqs, (I32{2, 3, 2}));
  }
  // A larger N leaves more zeros after each pack.
  Result<MicrobatchInputs> wide = microbatchInputs(plan, 1, 6);
  ASSERT_TRUE(wide) << wide.status().message();
  EXPECT_EQ(wide->slots, 5);
  EXPECT_EQ(wide->sampleIds,
            (I32{0, 1, 0, 0, 0, 2, 3, 4, 0, 0, 5, 6, 0, 0, 0}));
}

TEST(PlannerInputs, EachDataParallelRankGetsItsPack) {
  // dp = 2, cp = 2: packs [[0,1],[2,3,4],[5],[6]]; ranks 0-1 take packs 0
  // and 2, ranks 2-3 packs 1 and 3.
  const MicrobatchPlan plan = nextFit(kExample, capConfig(4, 2, 2, 3));
  const I32 expectedIds[] = {{0, 1, 0, 5, 0, 0},
                             {0, 1, 0, 5, 0, 0},
                             {2, 3, 4, 6, 0, 0},
                             {2, 3, 4, 6, 0, 0}};
  const I32 expectedCounts[] = {{2, 1}, {2, 1}, {3, 1}, {3, 1}};
  for (int64_t rank = 0; rank < 4; ++rank) {
    Result<MicrobatchInputs> inputs = microbatchInputs(plan, rank, 4);
    ASSERT_TRUE(inputs) << inputs.status().message();
    EXPECT_EQ(inputs->sampleIds, expectedIds[rank]) << "rank " << rank;
    EXPECT_EQ(inputs->numSeqs, expectedCounts[rank]) << "rank " << rank;
  }
}

TEST(PlannerInputs, BalancedPlanInPackOrder) {
  // FFD's packs [[0,1],[2,4,5],[3,6]]: ids in the pack's (increasing) order.
  const MicrobatchPlan plan = balanced(kExample, capConfig(4, 2, 1, 3));
  Result<MicrobatchInputs> inputs = microbatchInputs(plan, 0, 4);
  ASSERT_TRUE(inputs) << inputs.status().message();
  EXPECT_EQ(inputs->sampleIds, (I32{0, 1, 0, 2, 4, 5, 3, 6, 0}));
  EXPECT_EQ(inputs->numSeqs, (I32{2, 3, 2}));
}

TEST(PlannerInputs, NoMicrobatches) {
  const MicrobatchPlan plan = nextFit({}, capConfig(4, 2, 1, 3));
  Result<MicrobatchInputs> inputs = microbatchInputs(plan, 1, 4);
  ASSERT_TRUE(inputs) << inputs.status().message();
  EXPECT_EQ(inputs->numMicrobatches(), 0);
  EXPECT_TRUE(inputs->sampleIds.empty());
}

TEST(PlannerInputs, Errors) {
  // K = 3 without the dummy reservation: a pack of 3 does not fit N = 3.
  const MicrobatchPlan plan = nextFit(kExample, capConfig(4, 2, 1, 3));
  EXPECT_ERROR(microbatchInputs(plan, 0, 3),
               "microbatch 1 has 3 sequences on rank 0, more than N-1 = 2");
  EXPECT_ERROR(microbatchInputs(plan, 2, 4),
               "rank 2 is outside [0, dp*cp = 1*2 = 2)");
  EXPECT_ERROR(microbatchInputs(plan, -1, 4), "rank -1 is outside");
  EXPECT_ERROR(microbatchInputs(plan, 0, 1),
               "thd_max_packed_sequences N = 1 must be >= 2");
}

TEST(PlannerInputs, AbsurdCapacityIsAnErrorNotAWrappedBuffer) {
  // 8 microbatches of N-1 = 2^61 slots: 8 * 2^61 wraps to 0 in 64 bits, so
  // a wrapped count sized sample_ids 0 and the copy wrote past it.
  const PlannerConfig config = capConfig(4, 1, 1, 1);
  const MicrobatchPlan plan = nextFit({4, 4, 4, 4, 4, 4, 4, 4}, config);
  ASSERT_EQ(plan.numMicrobatches(), 8);
  const int64_t wrapsToZero = (int64_t(1) << 61) + 1;
  EXPECT_ERROR(microbatchInputs(plan, 0, wrapsToZero),
               "thd_max_packed_sequences N = 2305843009213693953 is outside "
               "the int32 range");
  EXPECT_ERROR(microbatchInputs(plan, 0, std::numeric_limits<int64_t>::max()),
               "is outside the int32 range");
  // The pipeline's largest N is accepted (2^31 - 2 zeros per microbatch
  // would be 64 GiB here, so on a plan without microbatches).
  const MicrobatchPlan none = nextFit({}, config);
  Result<MicrobatchInputs> widest =
      microbatchInputs(none, 0, std::numeric_limits<int32_t>::max());
  ASSERT_TRUE(widest) << widest.status().message();
  EXPECT_EQ(widest->slots, std::numeric_limits<int32_t>::max() - 1);
  EXPECT_TRUE(widest->sampleIds.empty());
}

TEST(PlannerInputs, RankCountOverflowIsAnError) {
  // A hand-made plan whose dp*cp = 2^32 * 2^32 wraps to 0.
  MicrobatchPlan plan;
  plan.dp = int64_t(1) << 32;
  plan.cp = int64_t(1) << 32;
  EXPECT_ERROR(microbatchInputs(plan, 0, 4),
               "the plan's dp*cp = 4294967296*4294967296 overflows int64");
}

TEST(PlannerS3, ProductsOverflowingInt64AreErrors) {
  // dp * vppGroup = 2^32 * 2^32 wrapped to 0: a zero divisor (SIGFPE).
  PlannerConfig config =
      capConfig(4, 1, int64_t(1) << 32, std::nullopt, int64_t(1) << 32);
  EXPECT_ERROR(nextFitPlan({}, config),
               "dp * vppGroup = 4294967296 * 4294967296 overflows int64");
  EXPECT_ERROR(balancedPlan({1}, config), "overflows int64");
  EXPECT_FALSE(checkPlan(MicrobatchPlan(), {}, config));
  // C * cp = 2^62 * 4 wraps to 0.
  config = capConfig(int64_t(1) << 62, 4, 1, std::nullopt);
  EXPECT_ERROR(nextFitPlan({4}, config),
               "C * cp = 4611686018427387904 * 4 overflows int64");
  EXPECT_ERROR(firstFitDecreasingPlan({4}, config), "overflows int64");
  // dp * cp = 2^32 * 2^32 (the groups of a microbatch).
  config = capConfig(1, int64_t(1) << 32, int64_t(1) << 32, std::nullopt);
  EXPECT_ERROR(nextFitPlan({}, config), "dp * cp");
}

TEST(PlannerS12, UpperBoundOverflowIsAnError) {
  // C * cp = 2^62 * 4 wrapped to 0 gave a bound of one sequence per pack.
  EXPECT_ERROR(
      microbatchUpperBound(capConfig(int64_t(1) << 62, 4, 1, 31), 64, 2048),
      "C * cp = 4611686018427387904 * 4 overflows int64");
  EXPECT_ERROR(
      microbatchUpperBound(
          capConfig(4096, 1, int64_t(1) << 32, 31, int64_t(1) << 32), 64, 2048),
      "dp * vppGroup");
}

//===----------------------------------------------------------------------===//
// Plan validation
//===----------------------------------------------------------------------===//

TEST(PlannerValidation, FindsEveryKindOfViolation) {
  const PlannerConfig config = capConfig(4, 2, 2, 3);
  const MicrobatchPlan valid = nextFit(kExample, config);
  auto violation = [&](auto corrupt) {
    MicrobatchPlan plan = valid;
    corrupt(plan);
    Status checked = checkPlan(plan, kExample, config);
    return checked ? std::string("(valid)") : checked.message();
  };
  auto regroup = [](MicrobatchPlan &plan) {
    plan.groups = microbatchGroups(plan.packs, 2, 2);
  };
  EXPECT_EQ(checkPlan(valid, kExample, config).message(), "");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.packs[3] = {5}; }),
            "sequence 5 is in both pack 2 and pack 3");
  EXPECT_EQ(violation([&](MicrobatchPlan &plan) {
              plan.packs[0] = {0};
              plan.packTokens[0] = 5;
              regroup(plan);
            }),
            "sequence 1 is in no pack");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) {
              plan.packs[2].clear();
              plan.packs[3] = {5, 6};
            }),
            "pack 2 is empty");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) {
              plan.packs[0] = {1, 0};
            }),
            "pack 0 is not in increasing id order at 0");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.packTokens[1] = 7; }),
            "pack 1 holds 8 tokens but records 7");
  EXPECT_EQ(violation([&](MicrobatchPlan &plan) {
              plan.packs = {{0, 1}, {2, 3, 4}, {5, 6}};
              plan.packTokens = {8, 8, 7};
            }),
            "plan has 3 packs, not a multiple of dp * (vppGroup or 1) = 2");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.packs[3] = {7}; }),
            "pack 3 holds sequence id 7, outside [0, 7)");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.groups[1][0] = {6}; }),
            "groups differ from the S3 mapping packs[m*dp + j/cp]");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.capacity = 9; }),
            "plan records capacity 9 but C*cp = 8");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.maxRealSeqs = 4; }),
            "plan records sequence cap 4 but S2 gives 3");
  EXPECT_EQ(violation([](MicrobatchPlan &plan) { plan.cp = 1; }),
            "plan records dp x cp = 2 x 1 but the config has 2 x 2");

  // Budget and cap, on a one-microbatch config.
  const PlannerConfig single = capConfig(4, 2, 1, 3);
  MicrobatchPlan overBudget = nextFit({4, 4, 1}, single);
  overBudget.packs = {{0, 1, 2}};
  overBudget.packTokens = {9};
  overBudget.groups = microbatchGroups(overBudget.packs, 1, 2);
  EXPECT_EQ(checkPlan(overBudget, {4, 4, 1}, single).message(),
            "pack 0 holds 9 tokens, more than the budget C*cp = 8");
  MicrobatchPlan overCap = nextFit({1, 1, 1, 1}, single);
  overCap.packs = {{0, 1, 2, 3}};
  overCap.packTokens = {4};
  overCap.groups = microbatchGroups(overCap.packs, 1, 2);
  EXPECT_EQ(checkPlan(overCap, {1, 1, 1, 1}, single).message(),
            "pack 0 has 4 sequences, more than the cap K = 3");
  EXPECT_EQ(checkPlan(valid, {9}, single).message(),
            "the config or lengths admit no plan: sequence 0 has padded "
            "length p[0] = 9, more than the pack budget C*cp = 4*2 = 8; no "
            "microbatch can hold it: raise max_seqlen_per_dp_cp_rank or "
            "truncate the sequence");
}

TEST(PlannerValidation, GroupMappingMatchesTheReference) {
  // The reference builds next-fit's groups itself; they must equal the
  // planner's mapping used for FFD.
  Result<reference::PackingResult> reference =
      reference::dpBalancedGroups(kExample, 4, 2, 2, 3);
  ASSERT_TRUE(reference) << reference.status().message();
  EXPECT_EQ(microbatchGroups(reference->packs, 2, 2), reference->groups);
  EXPECT_EQ(microbatchGroups({{0}, {1}, {2}}, 3, 1),
            (MicrobatchGroups{{{0}, {1}, {2}}}));
}

//===----------------------------------------------------------------------===//
// Edge cases
//===----------------------------------------------------------------------===//

TEST(PlannerEdges, NoSequences) {
  for (auto planner : {nextFitPlan, firstFitDecreasingPlan, balancedPlan}) {
    MicrobatchPlan plan = planOrFail(planner, {}, capConfig(4, 2, 2, 3, 2));
    EXPECT_TRUE(plan.packs.empty());
    EXPECT_TRUE(plan.packTokens.empty());
    EXPECT_EQ(plan.numMicrobatches(), 0);
  }
}

TEST(PlannerEdges, OneSequenceExactlyAtBudget) {
  for (auto planner : {nextFitPlan, firstFitDecreasingPlan, balancedPlan}) {
    MicrobatchPlan plan = planOrFail(planner, {8}, capConfig(4, 2, 1, 3));
    EXPECT_EQ(plan.packs, (Packs{{0}}));
    EXPECT_EQ(plan.packTokens, (I64{8}));
    EXPECT_EQ(plan.groups, (MicrobatchGroups{{{0}, {0}}}));
  }
  // Two sequences at budget never share a pack.
  EXPECT_EQ(balanced({8, 8}, capConfig(4, 2, 1, std::nullopt)).packs,
            (Packs{{0}, {1}}));
}

TEST(PlannerEdges, CapOfOneSequence) {
  const I32 lengths = {1, 2, 3};
  for (auto planner : {nextFitPlan, firstFitDecreasingPlan, balancedPlan}) {
    EXPECT_EQ(planOrFail(planner, lengths, capConfig(4, 2, 1, 1)).packs,
              (Packs{{0}, {1}, {2}}));
    EXPECT_EQ(
        planOrFail(planner, lengths, capConfig(4, 2, 3, 1)).numMicrobatches(),
        1);
    // N = 2 with the dummy reserves one slot: K = 1.
    EXPECT_EQ(
        planOrFail(planner, lengths, makeConfig(4, 2, 1, 2, true, true)).packs,
        (Packs{{0}, {1}, {2}}));
    EXPECT_ERROR(planner(lengths, capConfig(4, 2, 2, 1)),
                 "Not enough samples to move");
  }
}

TEST(PlannerEdges, ZeroLengthSequencesAreKept) {
  MicrobatchPlan plan = balanced({0, 8, 0}, capConfig(4, 2, 1, std::nullopt));
  EXPECT_EQ(plan.packs, (Packs{{0, 1, 2}}));
  EXPECT_EQ(plan.packTokens, (I64{8}));
}

//===----------------------------------------------------------------------===//
// Randomized: FFD vs next-fit, next-fit vs the reference, the S12 bound
//===----------------------------------------------------------------------===//

/// Deterministic draws from the (standardized) mt19937_64 output, so the
/// same batches are generated with every standard library.
class Draw {
public:
  explicit Draw(uint64_t seed) : engine(seed) {}
  /// An integer in [lo, hi].
  int64_t integer(int64_t lo, int64_t hi) {
    return lo + int64_t(engine() % uint64_t(hi - lo + 1));
  }
  /// A real in (0, 1].
  double unit() { return double((engine() >> 11) + 1) * 0x1.0p-53; }

private:
  std::mt19937_64 engine;
};

/// The length distributions of the comparison.
enum Family { Uniform, PowerLaw, AllEqual, ManyTiny, FewNearBudget };
const char *const kFamilyNames[] = {"uniform", "power-law", "all-equal",
                                    "many-tiny", "few-near-budget"};
constexpr int kNumFamilies = 5;

/// Valid lengths (>= 1, <= capacity) of `count` sequences from `family`.
I32 drawValidLengths(Draw &draw, Family family, int64_t count,
                     int64_t capacity) {
  I32 lengths;
  const int64_t equal = draw.integer(1, capacity);
  const double alpha = 1.05 + draw.unit();
  const double minimum = std::max<double>(1.0, double(capacity) / 64);
  for (int64_t i = 0; i < count; ++i) {
    int64_t length = 1;
    switch (family) {
    case Uniform:
      length = draw.integer(1, capacity);
      break;
    case PowerLaw: // Pareto(alpha) from `minimum`, clipped to the budget.
      length = int64_t(std::min<double>(
          double(capacity),
          std::ceil(minimum / std::pow(draw.unit(), 1 / alpha))));
      break;
    case AllEqual:
      length = equal;
      break;
    case ManyTiny:
      length = draw.integer(1, std::max<int64_t>(1, capacity / 32));
      break;
    case FewNearBudget:
      length = draw.integer(1, 10) == 1
                   ? draw.integer(capacity * 4 / 5, capacity)
                   : draw.integer(1, std::max<int64_t>(1, capacity / 8));
      break;
    }
    lengths.push_back(int32_t(std::min(length, capacity)));
  }
  return lengths;
}

/// One of `sizes`, drawn.
int64_t drawOneOf(Draw &draw, const I64 &sizes) {
  return sizes[draw.integer(0, int64_t(sizes.size()) - 1)];
}

/// The sums of compareWithNextFit() over its batches.
struct Comparison {
  int trials = 0, compared = 0, nextFitFailures = 0, rescued = 0;
  int fallbacks = 0, improved = 0;
  double totalReduction = 0;
  double familyReduction[kNumFamilies] = {};
  int familyCompared[kNumFamilies] = {};
};

/// `trialsPerFamily` random batches of each family at DP sizes `dps` and CP
/// sizes `cps` through next-fit, FFD and the balanced plan: next-fit is the
/// reference scheduler, every plan passes checkPlan, the balanced plan never
/// needs more microbatches than next-fit, and next-fit keeps the S12 bound.
void compareWithNextFit(uint64_t seed, int trialsPerFamily, const I64 &dps,
                        const I64 &cps, Comparison &sums) {
  Draw draw(seed);
  int &trials = sums.trials, &compared = sums.compared;
  int &nextFitFailures = sums.nextFitFailures, &rescued = sums.rescued;
  int &fallbacks = sums.fallbacks, &improved = sums.improved;
  double &totalReduction = sums.totalReduction;
  double *familyReduction = sums.familyReduction;
  int *familyCompared = sums.familyCompared;
  for (int trial = 0; trial < kNumFamilies * trialsPerFamily; ++trial) {
    const Family family = Family(trial % kNumFamilies);
    // C even, so C*cp is a multiple of the S1 granularity 2*cp.
    const int64_t cp = drawOneOf(draw, cps);
    const int64_t maxPerRank = 2 * draw.integer(8, 1024);
    const int64_t dp = drawOneOf(draw, dps);
    std::optional<int64_t> maxPacked;
    if (draw.integer(0, 2))
      maxPacked = draw.integer(2, 48);
    const bool alignment = draw.integer(0, 1);
    const bool dummy = draw.integer(0, 1);
    std::optional<int64_t> vppGroup;
    if (draw.integer(0, 3) == 0)
      vppGroup = draw.integer(2, 4);
    const PlannerConfig config =
        makeConfig(maxPerRank, cp, dp, maxPacked, alignment, dummy, vppGroup);
    const int64_t capacity = maxPerRank * cp;
    const I32 valid =
        drawValidLengths(draw, family, draw.integer(1, 400), capacity);
    Result<int64_t> granularity = reference::padGranularity(cp, 1, false);
    ASSERT_TRUE(granularity) << granularity.status().message();
    Result<I32> lengths = reference::alignLengths(valid, *granularity);
    ASSERT_TRUE(lengths) << lengths.status().message();
    ++trials;
    SCOPED_TRACE("trial " + std::to_string(trial) + " (" +
                 kFamilyNames[family] + ")");

    Result<std::optional<int64_t>> cap = plannerSequenceCap(config);
    ASSERT_TRUE(cap) << cap.status().message();
    Result<reference::PackingResult> reference = reference::dpBalancedGroups(
        *lengths, maxPerRank, cp, dp, *cap, vppGroup);
    Result<MicrobatchPlan> nextFit = nextFitPlan(*lengths, config);
    Result<MicrobatchPlan> firstFit = firstFitDecreasingPlan(*lengths, config);
    Result<MicrobatchPlan> best = balancedPlan(*lengths, config);

    // Next-fit is the reference scheduler, exactly.
    ASSERT_EQ(bool(nextFit), bool(reference));
    if (firstFit) {
      EXPECT_EQ(checkPlan(*firstFit, *lengths, config).message(), "");
    }
    if (!nextFit) {
      EXPECT_NE(nextFit.status().message().find("Not enough samples to move"),
                std::string::npos)
          << nextFit.status().message();
      ++nextFitFailures;
      rescued += bool(best);
      continue;
    }
    EXPECT_EQ(nextFit->packs, reference->packs);
    EXPECT_EQ(nextFit->groups, reference->groups);
    EXPECT_EQ(checkPlan(*nextFit, *lengths, config).message(), "");

    ASSERT_TRUE(best) << best.status().message();
    EXPECT_EQ(checkPlan(*best, *lengths, config).message(), "");
    EXPECT_LE(best->numMicrobatches(), nextFit->numMicrobatches());
    if (firstFit && firstFit->numMicrobatches() <= nextFit->numMicrobatches()) {
      EXPECT_EQ(best->algorithm, PlanAlgorithm::FirstFitDecreasing);
    } else {
      ++fallbacks;
    }

    // S12: both stay within the capture bound of the dp_balanced scheduler.
    const int32_t longest = *std::max_element(lengths->begin(), lengths->end());
    Result<int64_t> bound = reference::maxMicrobatchesUpperBound(
        int64_t(lengths->size()), dp, cp, maxPerRank, longest, vppGroup, *cap);
    ASSERT_TRUE(bound) << bound.status().message();
    EXPECT_LE(nextFit->numMicrobatches(), *bound);

    const double reduction =
        double(nextFit->numMicrobatches() - best->numMicrobatches()) /
        double(nextFit->numMicrobatches());
    ++compared;
    improved += reduction > 0;
    totalReduction += reduction;
    familyReduction[family] += reduction;
    ++familyCompared[family];
  }
}

/// Prints `sums`: the batches and the microbatches FFD saved.
void printComparison(const Comparison &sums) {
  std::printf("[ planner  ] %d random batches, %d compared (next-fit failed "
              "with \"Not enough samples to move\" on %d, balanced rescued "
              "%d); FFD fewer microbatches on %d, fell back to next-fit on "
              "%d; average reduction %.2f%%\n",
              sums.trials, sums.compared, sums.nextFitFailures, sums.rescued,
              sums.improved, sums.fallbacks,
              100 * sums.totalReduction / std::max(1, sums.compared));
  for (int f = 0; f < kNumFamilies; ++f)
    if (sums.familyCompared[f])
      std::printf("[ planner  ]   %-16s %3d batches, average reduction "
                  "%.2f%%\n",
                  kFamilyNames[f], sums.familyCompared[f],
                  100 * sums.familyReduction[f] / sums.familyCompared[f]);
}

TEST(PlannerRandomized, BalancedNeverNeedsMoreMicrobatchesThanNextFit) {
  Comparison sums;
  compareWithNextFit(20250704, 60, {1, 2, 4, 8}, {1, 2, 4}, sums);
  if (HasFatalFailure())
    return;
  ASSERT_GE(sums.compared, 200);
  const double average = sums.totalReduction / sums.compared;
  printComparison(sums);
  RecordProperty("average_microbatch_reduction_percent",
                 std::to_string(100 * average));
  EXPECT_GT(average, 0.0);
}

/// The same at rank counts that are not powers of two: DP sizes 3, 5, 6
/// and 7, CP sizes 3 and 6 (C*cp then a multiple of 3, the S1 granularity
/// 2*cp not a power of two), and CP 1 for DP alone.
TEST(PlannerRandomized, NonPowerOfTwoRanksKeepTheSamePromises) {
  Comparison sums;
  compareWithNextFit(20261206, 16, {3, 5, 6, 7}, {1, 3, 6}, sums);
  if (HasFatalFailure())
    return;
  printComparison(sums);
  EXPECT_GE(sums.compared, sums.trials / 2);
}

} // namespace

//===----------------------------------------------------------------------===//
// Capacity ladders
//===----------------------------------------------------------------------===//

namespace {
std::vector<Rung> rungs(const I64 &rows, const std::vector<std::optional<int64_t>> &sequences) {
  std::vector<Rung> ladder;
  for (std::size_t i = 0; i < rows.size(); ++i)
    ladder.push_back(Rung{rows[i], sequences[i]});
  return ladder;
}
} // namespace

TEST(PlannerLadder, GoldenRunningExample) {
  // Next-fit over C = 4, cp = 2, K = 3: [[0,1],[2,3,4],[5,6]], 8, 8 and 7
  // tokens. Rungs of B*cp = 4 and 8 tokens: every pack needs the top one.
  const PlannerConfig config = capConfig(4, 2, 1, 3);
  const MicrobatchPlan plan = nextFit(kExample, config);
  Result<LadderPlan> assigned =
      assignRungs(plan, kExample, rungs({2, 4}, {3, 3}), config);
  ASSERT_TRUE(assigned) << assigned.status().message();
  EXPECT_EQ(assigned->packRungs, (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(assigned->packRows, (I64{8, 8, 8}));
  EXPECT_EQ(assigned->packMaxLengths, (I64{5, 4, 6}));
  EXPECT_EQ(assigned->tokens(), 23);
  EXPECT_EQ(assigned->paddedRows(), 1);
  // A lower rung of B = 3 (6 tokens) holds none of them either.
  assigned = assignRungs(plan, kExample, rungs({3, 4}, {3, 3}), config);
  ASSERT_TRUE(assigned);
  EXPECT_EQ(assigned->packRungs, (std::vector<int32_t>{1, 1, 1}));
  // Lengths [3, 1, 6, 7, 2]: next-fit packs [[0,1],[2],[3],[4]] of 4, 6,
  // 7, 2 tokens: rungs of 4, 6 and 8 tokens put them at 0, 1, 2, 0.
  const I32 lengths = {3, 1, 6, 7, 2};
  const MicrobatchPlan small = nextFit(lengths, config);
  ASSERT_EQ(small.packTokens, (I64{4, 6, 7, 2}));
  assigned = assignRungs(small, lengths, rungs({2, 3, 4}, {3, 3, 3}), config);
  ASSERT_TRUE(assigned) << assigned.status().message();
  EXPECT_EQ(assigned->packRungs, (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(assigned->paddedRows(), 4 + 6 + 8 + 4 - 19);
  EXPECT_EQ(assigned->rung(1, 1), 1); // microbatch 1 on CP rank 1
}

TEST(PlannerLadder, RungsOfEqualRowsDifferInSequences) {
  // Packs of 8, 8, 7 tokens and 2, 3, 2 sequences over (4, K 2), (4, K 3):
  // the 3-sequence pack needs the second.
  const PlannerConfig config = capConfig(4, 2, 1, 3);
  const MicrobatchPlan plan = nextFit(kExample, config);
  Result<LadderPlan> assigned =
      assignRungs(plan, kExample, rungs({4, 4}, {2, 3}), config);
  ASSERT_TRUE(assigned) << assigned.status().message();
  EXPECT_EQ(assigned->packRungs, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(assigned->packRows, (I64{8, 8, 8}));
}

TEST(PlannerLadder, SequenceCapacityPushesAPackUp) {
  // Four sequences of 1 token: one pack of 4 tokens and 4 sequences. A rung
  // of 4 tokens but N = 4 (K = 3 with the dummy) cannot hold it.
  const PlannerConfig config = makeConfig(8, 1, 1, 8, true, true);
  const I32 lengths = {1, 1, 1, 1};
  const MicrobatchPlan plan = nextFit(lengths, config);
  ASSERT_EQ(plan.packs.size(), 1u);
  Result<LadderPlan> assigned =
      assignRungs(plan, lengths, rungs({4, 8}, {4, 8}), config);
  ASSERT_TRUE(assigned) << assigned.status().message();
  EXPECT_EQ(assigned->packRungs, (std::vector<int32_t>{1}));
  assigned = assignRungs(plan, lengths, rungs({4, 8}, {5, 8}), config);
  ASSERT_TRUE(assigned);
  EXPECT_EQ(assigned->packRungs, (std::vector<int32_t>{0}));
}

TEST(PlannerLadder, BadLaddersAndUnfitPacksAreNamed) {
  const PlannerConfig config = capConfig(4, 2, 1, 3);
  const MicrobatchPlan plan = nextFit(kExample, config);
  EXPECT_ERROR(assignRungs(plan, kExample, {}, config), "at least one rung");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({4, 2}, {3, 3}), config),
               "rows must not decrease");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({4, 4}, {3, 3}), config),
               "a rung of equal rows must hold more");
  EXPECT_ERROR(assignRungs(plan, kExample,
                           rungs({4, 4}, {std::nullopt, std::nullopt}), config),
               "rows must increase");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({0, 4}, {3, 3}), config),
               "rung 0 has 0 rows");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({2, 4}, {3, 2}), config),
               "at least as many sequences");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({2, 4}, {3, std::nullopt}),
                           config),
               "every rung one or none");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({2, 3}, {3, 3}), config),
               "pack 0 fits no rung: no rung holds 8 rows and 2 sequences at "
               "CP size 2: the top rung holds 6 rows and 3 sequences");
  EXPECT_ERROR(assignRungs(plan, kExample, rungs({2, 4}, {3, 3}),
                           capConfig(4, 1, 1, 3)),
               "not the config's cp 1");
}

TEST(PlannerLadder, GoldenRungIndex) {
  // Rows {2, 3, 4}, N 4 each (K = 3 with an alignment and the dummy tail),
  // cp 2: rungs of 4, 6 and 8 rows.
  const std::vector<Rung> ladder = rungs({2, 3, 4}, {4, 4, 4});
  const PlannerConfig config = makeConfig(4, 2, 1, 4, true, true);
  auto index = [&](int64_t rows, int64_t sequences) {
    return rungIndex(ladder, rows, sequences, config);
  };
  EXPECT_EQ(*index(0, 0), 0);
  EXPECT_EQ(*index(4, 3), 0);
  EXPECT_EQ(*index(5, 1), 1);
  EXPECT_EQ(*index(6, 3), 1);
  EXPECT_EQ(*index(7, 1), 2);
  EXPECT_EQ(*index(8, 3), 2);
  EXPECT_ERROR(index(9, 1), "no rung holds 9 rows and 1 sequences at CP size "
                            "2: the top rung holds 8 rows and 3 sequences");
  // N sequences need a rung of more N under the dummy policy, even when
  // they fill its rows: the dummy's slot is kept (the S2 cap).
  EXPECT_ERROR(index(8, 4), "no rung holds 8 rows and 4 sequences");
  // Without the dummy tail the cap is N; without N there is none.
  PlannerConfig noDummy = config;
  noDummy.dummyTail = false;
  EXPECT_EQ(*rungIndex(ladder, 4, 4, noDummy), 0);
  EXPECT_EQ(*rungIndex(rungs({2, 4}, {std::nullopt, std::nullopt}), 5, 1000,
                       config),
            1);
  EXPECT_ERROR(rungIndex(rungs({2, 4}, {std::nullopt, std::nullopt}), 9, 1,
                         config),
               "the top rung holds 8 rows and any number of sequences");
  // Equal rows, more sequences: the second rung of 4 rows holds 5.
  const std::vector<Rung> equal = rungs({4, 4, 8}, {3, 6, 8});
  EXPECT_EQ(*rungIndex(equal, 8, 2, config), 0);
  EXPECT_EQ(*rungIndex(equal, 8, 5, config), 1);
  EXPECT_EQ(*rungIndex(equal, 9, 2, config), 2);
}

TEST(PlannerLadder, RungIndexErrors) {
  const PlannerConfig config = makeConfig(4, 2, 1, 4, true, true);
  const std::vector<Rung> ladder = rungs({2, 4}, {4, 4});
  EXPECT_ERROR(rungIndex({}, 1, 1, config), "at least one rung");
  EXPECT_ERROR(rungIndex(rungs({4, 2}, {4, 4}), 1, 1, config),
               "rows must not decrease");
  EXPECT_ERROR(rungIndex(ladder, -1, 1, config),
               "rows and sequences must be >= 0; got -1, 1");
  EXPECT_ERROR(rungIndex(ladder, 1, -1, config), "must be >= 0");
  EXPECT_ERROR(rungIndex(ladder, 1, 1, makeConfig(4, 0, 1, 4, true, true)),
               "cp = 0 must be >= 1");
  EXPECT_ERROR(rungIndex(rungs({1, 2}, {1, 4}), 1, 0, config),
               "rung of 1 rows: ");
  EXPECT_ERROR(rungIndex(rungs({int64_t(1) << 62}, {4}), 1, 1, config),
               "overflows int64");
}

namespace {
/// `trials` random batches at DP sizes `dps` and CP sizes `cps` through
/// ladderPlan: a plan whenever next-fit or the balanced plan has one, with
/// no more microbatches than next-fit, each pack on the smallest rung that
/// holds it. Adds the rows the ladder pads to `savedRows` and those a single
/// rung of C would pad to `singleRows`.
void checkRandomLadderPlans(uint64_t seed, int trials, const I64 &dps,
                            const I64 &cps, int64_t &savedRows,
                            int64_t &singleRows) {
  Draw draw(seed);
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t cp = drawOneOf(draw, cps);
    const int64_t C = 2 * draw.integer(16, 512);
    const int64_t dp = drawOneOf(draw, dps);
    const int64_t N = draw.integer(3, 40);
    const int64_t k = draw.integer(1, 8);
    std::vector<Rung> ladder;
    for (int64_t i = 1; i <= k; ++i) {
      const int64_t rows = std::max<int64_t>(i, (C * i / k) / 2 * 2);
      if (!ladder.empty() && rows <= ladder.back().rows)
        continue;
      ladder.push_back(Rung{rows, std::min(N, 2 + (N - 2) * i / k)});
    }
    ladder.back() = Rung{C, N};
    const PlannerConfig config = makeConfig(C, cp, dp, N, true, true);
    const I32 valid = drawValidLengths(draw, Family(trial % kNumFamilies),
                                       draw.integer(1, 200), C * cp);
    Result<I32> lengths = reference::alignLengths(
        valid, *reference::padGranularity(cp, 1, false));
    ASSERT_TRUE(lengths);
    Result<MicrobatchPlan> nextFitOnly = nextFitPlan(*lengths, config);
    Result<LadderPlan> planned = ladderPlan(*lengths, config, ladder);
    ASSERT_EQ(bool(planned), bool(nextFitOnly) || bool(balancedPlan(*lengths, config)))
        << (planned ? "" : planned.status().message());
    if (!planned)
      continue;
    EXPECT_EQ(checkPlan(planned->plan, *lengths, config).message(), "");
    if (nextFitOnly) {
      EXPECT_LE(planned->plan.numMicrobatches(), nextFitOnly->numMicrobatches());
    }
    for (std::size_t p = 0; p < planned->plan.packs.size(); ++p) {
      const int32_t r = planned->packRungs[p];
      const int64_t tokens = planned->plan.packTokens[p];
      const int64_t sequences = int64_t(planned->plan.packs[p].size());
      // Holds it, and the rung below does not.
      EXPECT_GE(ladder[r].rows * cp, tokens);
      EXPECT_LE(sequences, *ladder[r].sequences - 1);
      if (r > 0) {
        EXPECT_TRUE(ladder[r - 1].rows * cp < tokens ||
                    *ladder[r - 1].sequences - 1 < sequences);
      }
      EXPECT_EQ(planned->packRows[p], ladder[r].rows * cp);
    }
    EXPECT_GE(planned->paddedRows(), 0);
    savedRows += planned->paddedRows();
    singleRows += int64_t(planned->plan.packs.size()) * C * cp - planned->tokens();
  }
}
} // namespace

TEST(PlannerLadder, RandomizedPlansUseTheSmallestRungAndNoMoreMicrobatches) {
  int64_t savedRows = 0, singleRows = 0;
  checkRandomLadderPlans(20261203, 300, {1, 2}, {1, 2, 4}, savedRows,
                         singleRows);
  // The ladder never pads more than the single capacity C.
  EXPECT_LE(savedRows, singleRows);
}

/// The same at rank counts that are not powers of two: DP sizes 3, 5, 6
/// and 7, CP sizes 3 and 6, and CP 1 for DP alone.
TEST(PlannerLadder, RandomizedPlansAtNonPowerOfTwoRanks) {
  int64_t savedRows = 0, singleRows = 0;
  checkRandomLadderPlans(20261206, 100, {3, 5, 6, 7}, {1, 3, 6}, savedRows,
                         singleRows);
  EXPECT_LE(savedRows, singleRows);
}

/// Degenerate ladders: a single rung, a rung of one row, a rung whose S2
/// cap holds one sequence or none, rungs of equal rows at non-power-of-two
/// CP sizes. Every plan is either an error or puts each pack on the
/// smallest rung that holds it, and never on one that cannot.
TEST(PlannerLadder, DegenerateRungsHoldOnlyWhatTheyCan) {
  Draw draw(20261206);
  int planned = 0, onDegenerate = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t cp = draw.integer(1, 6);
    const int64_t C = draw.integer(1, 256);
    const int64_t N = draw.integer(2, 24);
    std::vector<Rung> ladder;
    switch (trial % 5) {
    case 0: // the top rung alone
      break;
    case 1: // one row
      ladder.push_back(Rung{1, N});
      break;
    case 2: // one sequence under the dummy policy (N = 2), or none (N = 1)
      ladder.push_back(Rung{std::max<int64_t>(1, C / 2), draw.integer(1, 2)});
      break;
    case 3: // equal rows, more sequences
      ladder.push_back(Rung{C, std::max<int64_t>(1, N / 2)});
      break;
    case 4: // every degenerate rung at once
      ladder.push_back(Rung{1, 1});
      ladder.push_back(Rung{1, 2});
      ladder.push_back(Rung{C, std::max<int64_t>(2, N / 2)});
      break;
    }
    if (!ladder.empty() && ladder.back().rows == C &&
        *ladder.back().sequences >= N)
      ladder.pop_back();
    ladder.push_back(Rung{C, N});
    const bool align = draw.integer(0, 1), dummy = draw.integer(0, 1);
    const PlannerConfig config = makeConfig(C, cp, 1, N, align, dummy);
    I32 lengths;
    for (int64_t i = draw.integer(1, 60); i > 0; --i)
      lengths.push_back(int32_t(draw.integer(1, C * cp)));
    Result<LadderPlan> plan = ladderPlan(lengths, config, ladder);
    if (!plan) {
      // Refused by name: the ladder, the cap, or the planner.
      EXPECT_FALSE(plan.status().message().empty());
      continue;
    }
    ++planned;
    auto capOf = [&](const Rung &rung) -> int64_t {
      PlannerConfig at = config;
      at.maxPackedSequences = rung.sequences;
      Result<std::optional<int64_t>> cap = plannerSequenceCap(at);
      return cap ? cap->value_or(INT64_MAX) : -1;
    };
    auto holds = [&](const Rung &rung, int64_t tokens, int64_t seqs) {
      return rung.rows * cp >= tokens && capOf(rung) >= seqs;
    };
    EXPECT_EQ(checkPlan(plan->plan, lengths, config).message(), "");
    for (std::size_t p = 0; p < plan->plan.packs.size(); ++p) {
      const int32_t r = plan->packRungs[p];
      const int64_t tokens = plan->plan.packTokens[p];
      const int64_t seqs = int64_t(plan->plan.packs[p].size());
      ASSERT_GE(r, 0);
      ASSERT_LT(size_t(r), ladder.size());
      EXPECT_TRUE(holds(ladder[r], tokens, seqs)) << "rung " << r;
      for (int32_t lower = 0; lower < r; ++lower)
        EXPECT_FALSE(holds(ladder[lower], tokens, seqs)) << "rung " << lower;
      onDegenerate += r + 1 < int32_t(ladder.size());
    }
  }
  // The trials exercise both outcomes.
  EXPECT_GT(planned, 100);
  EXPECT_GT(onDegenerate, 10);
}
