//===- ReferenceTest.cpp - Unit tests of the THD reference semantics ------===//
//
// One test per golden vector of docs/semantics.md (and of
// golden_ref.py), one per row of the edge-case matrix of docs/semantics.md, the composite
// graph step with a test per status bit, and a randomized property test.
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::reference;

namespace {

using I32 = std::vector<int32_t>;
using I64 = std::vector<int64_t>;
using F32 = std::vector<float>;
using Mask = std::vector<uint8_t>;

/// Builds a 0/1 mask from ints (readable literals in the tests).
Mask mask(std::initializer_list<int> bits) {
  Mask result;
  for (int bit : bits)
    result.push_back(static_cast<uint8_t>(bit));
  return result;
}

/// `count` copies of `value` appended to `prefix`.
template <typename T>
std::vector<T> withTail(std::vector<T> prefix, std::size_t count, T value) {
  prefix.insert(prefix.end(), count, value);
  return prefix;
}

/// Asserts that `expr` failed with a message containing `substring`.
#define EXPECT_ERROR(expr, substring)                                          \
  do {                                                                         \
    auto result_ = (expr);                                                     \
    ASSERT_FALSE(result_) << "expected an error containing: " << (substring);  \
    EXPECT_NE(result_.status().message().find(substring), std::string::npos)   \
        << "error was: " << result_.status().message();                        \
  } while (0)

/// Asserts that `expr` succeeded and yields `expected`.
#define EXPECT_VALUE(expr, expected)                                           \
  do {                                                                         \
    auto result_ = (expr);                                                     \
    ASSERT_TRUE(result_) << result_.status().message();                        \
    EXPECT_EQ(*result_, expected);                                             \
  } while (0)

// The running example of docs/semantics.md: three sequences, v = [3,2,4], p = [4,4,4].
const I32 kCu = {0, 3, 5, 9};
const I32 kCup = {0, 4, 8, 12};
const I64 kRawTokens = {11, 12, 13, 99, 21, 22, 99, 99, 31, 32, 33, 34};
const I64 kSanitizedTokens = {11, 12, 13, 0, 21, 22, 0, 0, 31, 32, 33, 34};
const Mask kRunningMask = mask({0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0});

//===----------------------------------------------------------------------===//
// Result
//===----------------------------------------------------------------------===//

TEST(Result, HoldsValueOrError) {
  Result<I32> value = I32{1, 2};
  ASSERT_TRUE(value);
  EXPECT_EQ(value->size(), 2u);
  EXPECT_EQ((*value)[1], 2);
  EXPECT_TRUE(value.status().message().empty());

  Result<I32> failure = Status::error("bad value 3");
  EXPECT_FALSE(failure);
  EXPECT_EQ(failure.status().message(), "bad value 3");
  EXPECT_FALSE(Result<int>(Status::error("")));
}

//===----------------------------------------------------------------------===//
// S1
//===----------------------------------------------------------------------===//

TEST(S1, GoldenGranularityCp2Tp2Sp) {
  EXPECT_VALUE(padGranularity(2, 2, true), int64_t(8));
}

TEST(S1, GoldenCp2Tp1AlignsRunningExample) {
  EXPECT_VALUE(padGranularity(2, 1, false), int64_t(4));
  EXPECT_VALUE(padGranularity(2, 1, true), int64_t(4));
  EXPECT_VALUE(alignLengths({3, 2, 4}, 4), (I32{4, 4, 4}));
}

TEST(S1, GoldenRefRoundUpToFour) {
  EXPECT_VALUE(alignLengths({3, 2, 4, 5}, 4), (I32{4, 4, 4, 8}));
}

TEST(S1, AlreadyAlignedAndUnitGranularityAreUnchanged) {
  EXPECT_VALUE(alignLengths({8, 4, 0}, 4), (I32{8, 4, 0}));
  EXPECT_VALUE(padGranularity(1, 1, false), int64_t(1));
  EXPECT_VALUE(padGranularity(1, 8, false), int64_t(1));
  EXPECT_VALUE(alignLengths({3, 1, 7}, 1), (I32{3, 1, 7}));
}

TEST(S1, GranularityVariants) {
  EXPECT_VALUE(padGranularity(1, 4, true), int64_t(4));
  EXPECT_VALUE(padGranularity(4, 1, false), int64_t(8));
  EXPECT_VALUE(padGranularity(2, 2, true, /*dp=*/2, /*dynamicCp=*/true),
               int64_t(16));
  EXPECT_VALUE(padGranularity(1, 1, false, /*dp=*/4, /*dynamicCp=*/true),
               int64_t(8));
}

TEST(S1, AlignErrors) {
  EXPECT_ERROR(alignLengths({3}, 0), "G = 0 must be > 0");
  EXPECT_ERROR(alignLengths({3, -3}, 4), "v[1] = -3 is negative");
  EXPECT_ERROR(alignLengths({std::numeric_limits<int32_t>::max()}, 4),
               "outside the int32 range");
}

TEST(S1, VarlenSampleAlignment) {
  // ids = prompt (5, 6), answer (7, 8), EOD (2); prompt targets ignored.
  const I64 ids = {5, 6, 7, 8, 2};
  const I64 targets = {-100, -100, 7, 8, 2};
  Result<VarlenSample> exact = alignVarlenSample(ids, targets, 4, 0, -100);
  ASSERT_TRUE(exact) << exact.status().message();
  EXPECT_EQ(exact->validLength, 4);
  EXPECT_EQ(exact->paddedLength, 4);
  EXPECT_EQ(exact->tokens, (I64{5, 6, 7, 8}));
  EXPECT_EQ(exact->labels, (I64{-100, 7, 8, 2}));
  EXPECT_EQ(exact->positionIds, (I64{0, 1, 2, 3}));
  EXPECT_EQ(exact->lossMask, (F32{0, 1, 1, 1}));

  Result<VarlenSample> padded = alignVarlenSample(ids, targets, 8, 0, -100);
  ASSERT_TRUE(padded) << padded.status().message();
  EXPECT_EQ(padded->paddedLength, 8);
  EXPECT_EQ(padded->tokens, (I64{5, 6, 7, 8, 2, 0, 0, 0}));
  EXPECT_EQ(padded->labels, (I64{-100, 7, 8, 2, 0, 0, 0, 0}));
  EXPECT_EQ(padded->positionIds, (I64{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(padded->lossMask, (F32{0, 1, 1, 1, 0, 0, 0, 0}));
}

TEST(S1, VarlenSampleEmptyTokenisationAndErrors) {
  Result<VarlenSample> empty = alignVarlenSample({2, 2}, {2, 2}, 4, 0, -100);
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ(empty->validLength, 1);
  EXPECT_EQ(empty->tokens, (I64{2, 2, 0, 0}));
  EXPECT_EQ(empty->labels, (I64{2, 0, 0, 0}));
  EXPECT_EQ(empty->lossMask, (F32{1, 0, 0, 0}));
  EXPECT_ERROR(alignVarlenSample({2}, {2}, 4, 0, -100), "at least 2 ids");
  EXPECT_ERROR(alignVarlenSample({2, 2}, {2}, 4, 0, -100),
               "ids has 2 entries but targets has 1");
}

//===----------------------------------------------------------------------===//
// S2
//===----------------------------------------------------------------------===//

TEST(S2, GoldenAlignmentAndDummyReservesOneSlot) {
  EXPECT_VALUE(schedulerMaxRealNumSeqs(32, true, true),
               std::optional<int64_t>(31));
}

TEST(S2, GoldenAlignmentWithoutDummy) {
  EXPECT_VALUE(schedulerMaxRealNumSeqs(32, true, false),
               std::optional<int64_t>(32));
}

TEST(S2, GoldenNoAlignment) {
  EXPECT_VALUE(schedulerMaxRealNumSeqs(32, false, true),
               std::optional<int64_t>(32));
}

TEST(S2, GoldenOneSlotWithDummyIsAnError) {
  EXPECT_ERROR(schedulerMaxRealNumSeqs(1, true, true),
               "thd_max_packed_sequences = 1 must be >= 2");
}

TEST(S2, NoneAndNonPositive) {
  EXPECT_VALUE(schedulerMaxRealNumSeqs(std::nullopt, true, true),
               std::optional<int64_t>());
  EXPECT_ERROR(schedulerMaxRealNumSeqs(0, false, false),
               "thd_max_packed_sequences = 0 must be >= 1");
  EXPECT_VALUE(schedulerMaxRealNumSeqs(1, false, true),
               std::optional<int64_t>(1));
}

//===----------------------------------------------------------------------===//
// S3
//===----------------------------------------------------------------------===//

using Packs = std::vector<I32>;

TEST(S3, GoldenNextFitDp1) {
  Result<PackingResult> result =
      dpBalancedGroups({5, 3, 4, 2, 2, 1, 6}, 4, 2, 1, 3);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->packs, (Packs{{0, 1}, {2, 3, 4}, {5, 6}}));
  ASSERT_EQ(result->groups.size(), 3u);
  for (std::size_t m = 0; m < 3; ++m)
    EXPECT_EQ(result->groups[m], (Packs{result->packs[m], result->packs[m]}));
}

TEST(S3, GoldenDp2MovesLastSequence) {
  Result<PackingResult> result =
      dpBalancedGroups({5, 3, 4, 2, 2, 1, 6}, 4, 2, 2, 3);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->packs, (Packs{{0, 1}, {2, 3, 4}, {5}, {6}}));
  ASSERT_EQ(result->groups.size(), 2u);
  EXPECT_EQ(result->groups[0], (Packs{{0, 1}, {0, 1}, {2, 3, 4}, {2, 3, 4}}));
  EXPECT_EQ(result->groups[1], (Packs{{5}, {5}, {6}, {6}}));
}

TEST(S3, GoldenCapTriggers) {
  Result<PackingResult> result = dpBalancedGroups({1, 1, 1, 1, 1}, 4, 2, 1, 3);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->packs, (Packs{{0, 1, 2}, {3, 4}}));
}

TEST(S3, GoldenEqualLengthsDp2) {
  Result<PackingResult> result =
      dpBalancedGroups({3, 3, 3, 3, 3, 3, 3}, 4, 2, 2, 2);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->packs, (Packs{{0, 1}, {2, 3}, {4, 5}, {6}}));
  ASSERT_EQ(result->groups.size(), 2u);
  EXPECT_EQ(result->groups[0], (Packs{{0, 1}, {0, 1}, {2, 3}, {2, 3}}));
  EXPECT_EQ(result->groups[1], (Packs{{4, 5}, {4, 5}, {6}, {6}}));
}

TEST(S3, GoldenOversizedFirstSequenceEmitsEmptyPack) {
  Result<PackingResult> result = dpBalancedGroups({9, 3}, 4, 2, 1);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->packs, (Packs{{}, {0}, {1}}));
}

TEST(S3, VirtualPipelineGroupMultiple) {
  Result<PackingResult> result =
      dpBalancedGroups({2, 2, 2, 2}, 8, 1, 1, std::nullopt, 2);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->packs, (Packs{{0, 1, 2}, {3}}));
  EXPECT_EQ(result->groups.size(), 2u);
}

TEST(S3, Errors) {
  EXPECT_ERROR(dpBalancedGroups({3}, 4, 2, 2), "Not enough samples to move");
  EXPECT_ERROR(dpBalancedGroups({3, -1}, 4, 2, 1), "p[1] = -1 is negative");
  EXPECT_ERROR(dpBalancedGroups({3}, 4, 2, 1, 0), "K = 0 must be >= 1");
  EXPECT_ERROR(dpBalancedGroups({3}, 0, 2, 1), "C = 0");
  Result<PackingResult> empty = dpBalancedGroups({}, 4, 2, 2);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->packs.empty());
  EXPECT_TRUE(empty->groups.empty());
}

//===----------------------------------------------------------------------===//
// S3b
//===----------------------------------------------------------------------===//

TEST(S3b, SizeNeeded) {
  EXPECT_EQ(dynamicCpSizeNeeded(1, 1024, 1), 1);
  EXPECT_EQ(dynamicCpSizeNeeded(1024, 1024, 1), 1);
  EXPECT_EQ(dynamicCpSizeNeeded(1025, 1024, 1), 2);
  EXPECT_EQ(dynamicCpSizeNeeded(3000, 1024, 1), 4);
  EXPECT_EQ(dynamicCpSizeNeeded(10, 1024, 2), 2);
  EXPECT_EQ(dynamicCpSizeNeeded(0, 1024, 1), 1);
}

// The expected groups are the reference framework's scheduler's
// (DefaultDynamicCPScheduler.get_groups_and_subsamples) on the same input.
TEST(S3b, GoldenGroups) {
  using Groups = std::vector<std::vector<I32>>;
  Result<DynamicCpGroups> a =
      dynamicCpGroups({3000, 1000, 500, 200, 100}, 1024, 4);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ(a->groups, (Groups{{{0, 1}, {0, 1}, {0, 1}, {0, 1}},
                               {{2}, {2}, {3, 4}, {3, 4}}}));
  EXPECT_EQ(a->cpSizes, (std::vector<I32>{{4, 4, 4, 4}, {2, 2, 2, 2}}));
  // The empty rank 3 is filled by doubling the smallest sub-group ({1} at 2).
  Result<DynamicCpGroups> b = dynamicCpGroups({1500, 100}, 1024, 4);
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ(b->groups, (Groups{{{0}, {0}, {1}, {1}}}));
  EXPECT_EQ(b->cpSizes, (std::vector<I32>{{2, 2, 2, 2}}));
  // Doubling the first sub-group moves the others up.
  Result<DynamicCpGroups> c = dynamicCpGroups({100, 100, 100}, 100, 4);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->groups, (Groups{{{0}, {0}, {1}, {2}}}));
  EXPECT_EQ(c->cpSizes, (std::vector<I32>{{2, 2, 1, 1}}));
  // min_cp 2 puts short sequences on two ranks.
  Result<DynamicCpGroups> d = dynamicCpGroups({10, 10}, 1024, 4, 2);
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ(d->cpSizes, (std::vector<I32>{{2, 2, 2, 2}}));
}

TEST(S3b, FillingEmptyRanksNeverWritesPastTheLastRank) {
  // Two sequences of 200 rows over 5 ranks of 128: each takes a sub-group of
  // two, rank 4 stays empty, and doubling the first sub-group would push the
  // second to ranks 4..5. megatron-core's scheduler raises an IndexError
  // there; this was a heap overflow. It is refused by name.
  Result<DynamicCpGroups> groups = dynamicCpGroups({200, 200}, 128, 5);
  ASSERT_FALSE(groups);
  EXPECT_NE(groups.status().message().find(
                "pushes the sub-groups after it past rank 4"),
            std::string::npos)
      << groups.status().message();
  // Every rank count from 1 to 32 and a few shapes: a plan or an error.
  for (int64_t ranks = 1; ranks <= 32; ++ranks)
    for (std::vector<int32_t> lengths :
         {std::vector<int32_t>{200, 200}, {100, 100, 100}, {1, 300, 40, 250, 7}})
      (void)dynamicCpGroups(lengths, 128, ranks);
}

TEST(S3b, SequenceCap) {
  // Without a cap all five short sequences share one rank's sub-group;
  // with K = 2 no sub-group holds more than two.
  Result<DynamicCpGroups> free = dynamicCpGroups({8, 8, 8, 8, 8}, 64, 2);
  Result<DynamicCpGroups> capped =
      dynamicCpGroups({8, 8, 8, 8, 8}, 64, 2, 1, 2);
  ASSERT_TRUE(free && capped);
  std::size_t longest = 0;
  for (const auto &microbatch : capped->groups)
    for (const auto &ids : microbatch)
      longest = std::max(longest, ids.size());
  EXPECT_EQ(longest, 2u);
  EXPECT_GT(capped->groups.size(), free->groups.size());
}

TEST(S3b, Errors) {
  EXPECT_ERROR(dynamicCpGroups({5000}, 1024, 4), "needs 8 CP ranks");
  EXPECT_ERROR(dynamicCpGroups({5, -1}, 1024, 4), "p[1] = -1 is negative");
  EXPECT_ERROR(dynamicCpGroups({5}, 1024, 4, 3), "must be a power of two");
  EXPECT_ERROR(dynamicCpGroups({5}, 1024, 4, 8), "must be a power of two");
  EXPECT_ERROR(dynamicCpGroups({5}, 0, 4), "C = 0");
  EXPECT_ERROR(dynamicCpGroups({5}, 1024, 4, 1, 0), "K = 0");
  Result<DynamicCpGroups> empty = dynamicCpGroups({}, 1024, 4);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->groups.empty());
}

// The expected microbatches are the reference framework's
// align_sample_id_groups on the same input.
TEST(S3b, VirtualPipelineAlignment) {
  using Microbatches = std::vector<std::vector<I32>>;
  // Sub-groups of 4, 2, 1, 1 ranks cut at half: the second half widened
  // (its first sub-group doubled, the others after it), the first onto all.
  auto a = alignDynamicCpMicrobatches(
      {{{10}, {10}, {10}, {10}, {11}, {11}, {12}, {13}}}, 2);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ(*a, (Microbatches{{{11}, {11}, {11}, {11}, {12}, {12}, {13}, {13}},
                              {{10}, {10}, {10}, {10}, {10}, {10}, {10}, {10}}}));
  // Two splits for a multiple of 3, the second of the first half.
  auto b = alignDynamicCpMicrobatches(
      {{{10}, {10}, {11}, {11}, {12}, {12}, {13}, {14}}}, 3);
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ(*b, (Microbatches{{{12}, {12}, {12}, {12}, {13}, {13}, {14}, {14}},
                              {{11}, {11}, {11}, {11}, {11}, {11}, {11}, {11}},
                              {{10}, {10}, {10}, {10}, {10}, {10}, {10}, {10}}}));
  // A microbatch of one sub-group is passed over for the one before it.
  auto c = alignDynamicCpMicrobatches(
      {{{0, 1}, {0, 1}, {0, 1}, {0, 1}}, {{2}, {2}, {3, 4}, {3, 4}}}, 3);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(*c, (Microbatches{{{0, 1}, {0, 1}, {0, 1}, {0, 1}},
                              {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
                              {{2}, {2}, {2}, {2}}}));
  EXPECT_ERROR(alignDynamicCpMicrobatches({{{0, 1}, {0, 1}, {0, 1}, {0, 1}}}, 2),
               "no microbatch has more than one sub-group to split");
  EXPECT_ERROR(alignDynamicCpMicrobatches({{{0}}}, 0), "must be >= 1");
  // Sub-groups of 3 and 1: the half of 3 ranks cannot be widened onto 4
  // (the framework's loop never ends there).
  EXPECT_ERROR(alignDynamicCpMicrobatches({{{10}, {10}, {10}, {11}}}, 2),
               "no sub-group can be widened onto the empty ranks");
  // Sub-groups of 4, 4, 4, 2 over 14 ranks: widening either half doubles a
  // sub-group of 4 past rank 13, and the framework's slice assignment
  // lengthens the microbatch to 16 ranks (it returns two such microbatches).
  EXPECT_ERROR(alignDynamicCpMicrobatches(
                   {{{10}, {10}, {10}, {10}, {11}, {11}, {11}, {11}, {12},
                     {12}, {12}, {12}, {13}, {13}}},
                   2),
               "makes a microbatch of 16 ranks, not the 14 DP x CP ranks");
  EXPECT_ERROR(alignDynamicCpMicrobatches({{{10, 11}, {10, 11}}, {{12}, {12}}}, 3),
               "cannot make the 2 microbatches a multiple");
  EXPECT_ERROR(alignDynamicCpMicrobatches({{{10}, {11}, {11}, {12}}}, 2),
               "not non-increasing (1 then 2)");
  // Through the scheduler: its sizes recomputed, a multiple of the group.
  Result<DynamicCpGroups> d =
      dynamicCpGroups({3000, 1000, 500, 200, 100}, 1024, 4, 1, std::nullopt, 3);
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_EQ(d->groups, *c);
  EXPECT_EQ(d->cpSizes,
            (std::vector<I32>{{4, 4, 4, 4}, {4, 4, 4, 4}, {4, 4, 4, 4}}));
  auto unchanged = alignDynamicCpMicrobatches(*c, 3);
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(*unchanged, *c);
}

//===----------------------------------------------------------------------===//
// S4
//===----------------------------------------------------------------------===//

TEST(S4, GoldenPackFromPool) {
  // Pool holds the three padded samples A, B, C back to back (P = 99).
  const I64 pool = kRawTokens;
  for (int64_t pad : {int64_t(99), int64_t(0)}) {
    Result<PackedBuffer<int64_t>> packed =
        pack(pool, {0, 4, 8}, {0, 1, 2}, {3, 2, 4}, {4, 4, 4}, pad);
    ASSERT_TRUE(packed) << packed.status().message();
    EXPECT_EQ(packed->values,
              (I64{11, 12, 13, pad, 21, 22, pad, pad, 31, 32, 33, 34}));
    EXPECT_EQ(packed->metadata.cuSeqlens, kCu);
    EXPECT_EQ(packed->metadata.cuSeqlensPadded, kCup);
    EXPECT_EQ(packed->metadata.maxSeqlen, 4);
  }
}

TEST(S4, GoldenConcatSamples) {
  Result<PackedBuffer<int64_t>> packed = concatSamples<int64_t>(
      {{11, 12, 13, 99}, {21, 22, 99, 99}, {31, 32, 33, 34}}, {3, 2, 4},
      {4, 4, 4});
  ASSERT_TRUE(packed) << packed.status().message();
  EXPECT_EQ(packed->values, kRawTokens);
  EXPECT_EQ(packed->metadata.cuSeqlens, kCu);
  EXPECT_EQ(packed->metadata.cuSeqlensPadded, kCup);
  EXPECT_EQ(packed->metadata.maxSeqlen, 4);
}

TEST(S4, PackReordersUnpaddedPoolAndFloats) {
  const I64 pool = {11, 12, 13, 21, 22, 31, 32, 33, 34};
  Result<PackedBuffer<int64_t>> packed =
      pack(pool, {0, 3, 5}, {2, 0}, {4, 3}, {4, 8}, -1);
  ASSERT_TRUE(packed) << packed.status().message();
  EXPECT_EQ(packed->values,
            (I64{31, 32, 33, 34, 11, 12, 13, -1, -1, -1, -1, -1}));
  EXPECT_EQ(packed->metadata.cuSeqlens, (I32{0, 4, 7}));
  EXPECT_EQ(packed->metadata.cuSeqlensPadded, (I32{0, 4, 12}));
  EXPECT_EQ(packed->metadata.maxSeqlen, 8);

  const F32 lossPool = {1, 1, 0.5f, 1, 1};
  Result<PackedBuffer<float>> loss =
      pack(lossPool, {0, 3}, {1, 0}, {2, 3}, {4, 4}, 0.0f);
  ASSERT_TRUE(loss) << loss.status().message();
  EXPECT_EQ(loss->values, (F32{1, 1, 0, 0, 1, 1, 0.5f, 0}));
}

TEST(S4, CumulativeLengths) {
  EXPECT_VALUE(cumulativeLengths({3, 2, 4}), kCu);
  EXPECT_VALUE(cumulativeLengths({}), (I32{0}));
  EXPECT_VALUE(cumulativeLengths({0, 4, 0}), (I32{0, 0, 4, 4}));
  EXPECT_ERROR(cumulativeLengths({3, -2}), "lens[1] = -2 is negative");
  EXPECT_ERROR(cumulativeLengths({std::numeric_limits<int32_t>::max(), 1}),
               "outside the int32 range");
}

TEST(S4, PackErrors) {
  const I64 pool = kRawTokens;
  EXPECT_ERROR(pack(pool, {0, 4, 8}, {0, 1}, {5, 2}, {4, 4}, 0),
               "v[0] = 5 exceeds padded length p[0] = 4");
  EXPECT_ERROR(pack(pool, {0, 4, 8}, {0, 3}, {3, 2}, {4, 4}, 0),
               "sampleIds[1] = 3 is out of range for 3 samples");
  EXPECT_ERROR(pack(pool, {0, 4, 10}, {2}, {4}, {4}, 0),
               "reads pool rows [10, 14) outside the pool of 12 rows");
  EXPECT_ERROR(pack(pool, {0}, {0, 0}, {3}, {4}, 0), "sample ids has 2");
  EXPECT_ERROR(concatSamples<int64_t>({{1, 2, 3}}, {3}, {4}),
               "sample 0 has 3 rows but its padded length p[0] = 4");
}

//===----------------------------------------------------------------------===//
// S5
//===----------------------------------------------------------------------===//

TEST(S5, GoldenRunningExample) {
  EXPECT_VALUE(paddingMask(kCu, kCup), kRunningMask);
}

TEST(S5, GoldenSchedulerUnitTest) {
  EXPECT_VALUE(paddingMask({0, 3, 5}, {0, 4, 8}),
               mask({0, 0, 0, 1, 0, 0, 1, 1}));
}

TEST(S5, GoldenTrailingRepeatsGiveSameMask) {
  EXPECT_VALUE(paddingMask({0, 3, 5, 9, 9, 9}, {0, 4, 8, 12, 12, 12}),
               kRunningMask);
}

TEST(S5, NegativeValidLengthClampsToZero) {
  EXPECT_VALUE(paddingMask({0, 3, 1}, {0, 4, 8}),
               mask({0, 0, 0, 1, 1, 1, 1, 1}));
}

TEST(S5, ValidAbovePaddedGivesNoPadding) {
  EXPECT_VALUE(paddingMask({0, 6, 8}, {0, 4, 8}),
               mask({0, 0, 0, 0, 0, 0, 1, 1}));
}

TEST(S5, Errors) {
  EXPECT_ERROR(paddingMask({0, 3}, {0, 4, 8}),
               "cu_seqlens has 2 entries but cu_seqlens_padded has 3");
  EXPECT_ERROR(paddingMask({}, {}), "at least one entry");
  EXPECT_ERROR(paddingMask({0, 3}, {0, -4}), "cu_seqlens_padded[1] = -4");
}

//===----------------------------------------------------------------------===//
// S6
//===----------------------------------------------------------------------===//

TEST(S6, GoldenRunningExampleTokens) {
  EXPECT_VALUE(sanitize(kRawTokens, kRunningMask, 0), kSanitizedTokens);
}

TEST(S6, GoldenPrUnitTest) {
  const Mask m = mask({0, 0, 1, 0, 1});
  EXPECT_VALUE(sanitize(I64{11, 12, -1, 21, -1}, m, 0),
               (I64{11, 12, 0, 21, 0}));
  EXPECT_VALUE(sanitize(I64{0, 1, 2, 0, 1}, m, 0), (I64{0, 1, 0, 0, 0}));
  EXPECT_VALUE(sanitize(F32{1, 1, 1, 1, 1}, m, 0.0f), (F32{1, 1, 0, 1, 0}));
}

TEST(S6, SizeMismatch) {
  EXPECT_ERROR(sanitize(I64{1, 2, 3}, mask({0, 1}), 0),
               "values has 3 entries but padding mask has 2");
}

//===----------------------------------------------------------------------===//
// S7
//===----------------------------------------------------------------------===//

TEST(S7, GoldenTeUnitTest) {
  EXPECT_VALUE(cpPartitionIndices({0, 8, 16}, 16, 2, 0),
               (I32{0, 1, 6, 7, 8, 9, 14, 15}));
  EXPECT_VALUE(cpPartitionIndices({0, 8, 16}, 16, 2, 1),
               (I32{2, 3, 4, 5, 10, 11, 12, 13}));
}

TEST(S7, GoldenRunningExampleIndices) {
  EXPECT_VALUE(cpPartitionIndices(kCup, 12, 2, 0), (I32{0, 3, 4, 7, 8, 11}));
  EXPECT_VALUE(cpPartitionIndices(kCup, 12, 2, 1), (I32{1, 2, 5, 6, 9, 10}));
}

TEST(S7, GoldenRunningExampleGatheredKeys) {
  const F32 lossMask = {1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1};
  const I32 r0 = {0, 3, 4, 7, 8, 11}, r1 = {1, 2, 5, 6, 9, 10};
  EXPECT_VALUE(cpSlice(kSanitizedTokens, r0), (I64{11, 0, 21, 0, 31, 34}));
  EXPECT_VALUE(cpSlice(kSanitizedTokens, r1), (I64{12, 13, 22, 0, 32, 33}));
  EXPECT_VALUE(cpSlice(kRunningMask, r0), mask({0, 1, 0, 1, 0, 0}));
  EXPECT_VALUE(cpSlice(kRunningMask, r1), mask({0, 0, 0, 1, 0, 0}));
  EXPECT_VALUE(cpSlice(lossMask, r0), (F32{1, 0, 1, 0, 1, 1}));
  EXPECT_VALUE(cpSlice(lossMask, r1), (F32{1, 1, 1, 0, 1, 1}));
}

TEST(S7, GoldenStaticCuGivesIdenticalIndices) {
  const I32 staticCup = {0, 4, 8, 12, 12, 12};
  EXPECT_VALUE(cpPartitionIndices(staticCup, 12, 2, 0),
               (I32{0, 3, 4, 7, 8, 11}));
  EXPECT_VALUE(cpPartitionIndices(staticCup, 12, 2, 1),
               (I32{1, 2, 5, 6, 9, 10}));
}

TEST(S7, GoldenTotalBeyondLastEntryJoinsLastSequence) {
  EXPECT_VALUE(cpPartitionIndices(kCup, 16, 2, 0),
               (I32{0, 3, 4, 7, 8, 11, 12, 13}));
  EXPECT_VALUE(cpPartitionIndices(kCup, 16, 2, 1),
               (I32{1, 2, 5, 6, 9, 10, 11, 12}));
}

TEST(S7, GoldenEntryNotDivisibleBy2Cp) {
  EXPECT_ERROR(cpPartitionIndices({0, 3, 8}, 8, 2, 0),
               "cu_seqlens_padded[1] = 3 is not divisible by 2*cp = 4");
}

TEST(S7, TeHostChecks) {
  EXPECT_ERROR(cpPartitionIndices({0}, 8, 2, 0), "at least 2 entries");
  EXPECT_ERROR(cpPartitionIndices(kCup, 12, 2, 2),
               "CP rank 2 is outside [0, cp = 2)");
  EXPECT_ERROR(cpPartitionIndices(kCup, 12, 2, -1), "CP rank -1");
  EXPECT_ERROR(cpPartitionIndices({0, 0}, 0, 2, 0),
               "total_tokens = 0 must be > 0");
  EXPECT_ERROR(cpPartitionIndices({0, 4}, 6, 2, 0),
               "total_tokens = 6 is not divisible by 2*cp = 4");
  EXPECT_ERROR(cpPartitionIndices(kCup, 12, 0, 0), "cp = 0 must be >= 1");
}

TEST(S7, Cp1IsIdentity) {
  EXPECT_VALUE(cpPartitionIndices({0, 3, 5}, 5, 1, 0), (I32{0, 1, 2, 3, 4}));
  EXPECT_VALUE(cpPartitionIndices({0}, 0, 1, 0), I32{});
}

TEST(S7, ContiguousMode) {
  EXPECT_VALUE(cpPartitionIndices(kCup, 12, 2, 1, CpMode::Contiguous),
               (I32{6, 7, 8, 9, 10, 11}));
  EXPECT_VALUE(cpPartitionIndices(kCup, 12, 3, 2, CpMode::Contiguous),
               (I32{8, 9, 10, 11}));
  EXPECT_VALUE(cpPartitionIndices({0}, 0, 2, 0, CpMode::Contiguous), I32{});
  EXPECT_ERROR(cpPartitionIndices(kCup, 13, 2, 0, CpMode::Contiguous),
               "total_tokens = 13 is not divisible by cp = 2");
}

TEST(S7, SliceIndexOutOfRange) {
  EXPECT_ERROR(cpSlice(I64{1, 2, 3}, {0, 3}),
               "indices[1] = 3 is out of range for a buffer of 3 rows");
}

TEST(S7, GoldenUnsliceRunningExample) {
  // Rank 0 kept rows [0,3,4,7,8,11], rank 1 [1,2,5,6,9,10]; gathered with
  // R = 6 rows each they come back in sequence order.
  EXPECT_VALUE(cpUnsliceIndices(kCup, 2, 6),
               (I32{0, 6, 7, 1, 2, 8, 9, 3, 4, 10, 11, 5}));
  const I64 gathered = {0, 3, 4, 7, 8, 11, 1, 2, 5, 6, 9, 10};
  Result<I32> indices = cpUnsliceIndices(kCup, 2, 6);
  ASSERT_TRUE(indices) << indices.status().message();
  EXPECT_VALUE(cpSlice(gathered, *indices),
               (I64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(S7, GoldenUnsliceWithTail) {
  // R = 8: each rank's slice padded with 2 rows (rank 0: 100, 101; rank 1:
  // 200, 201); they follow the 12 rows of the sequences, rank 0's first.
  const I64 gathered = {0, 3, 4, 7, 8, 11, 100, 101,
                        1, 2, 5, 6, 9, 10, 200, 201};
  Result<I32> indices = cpUnsliceIndices(kCup, 2, 8);
  ASSERT_TRUE(indices) << indices.status().message();
  EXPECT_EQ(*indices,
            (I32{0, 8, 9, 1, 2, 10, 11, 3, 4, 12, 13, 5, 6, 7, 14, 15}));
  EXPECT_VALUE(cpSlice(gathered, *indices),
               (I64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 100, 101, 200, 201}));
}

TEST(S7, GoldenUnsliceContiguousAndEmpty) {
  // Contiguous, T = 12, cp 3, R 5: rank r kept rows [4r, 4r+4) and one
  // padded row.
  EXPECT_VALUE(cpUnsliceIndices(kCup, 3, 5, CpMode::Contiguous),
               (I32{0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 4, 9, 14}));
  // No sequence (a microbatch that validation rejected): every row is a
  // tail row, so the gathered rows stay where they are.
  EXPECT_VALUE(cpUnsliceIndices({0}, 2, 3), (I32{0, 1, 2, 3, 4, 5}));
  EXPECT_VALUE(cpUnsliceIndices({0, 3, 5}, 1, 4), (I32{0, 1, 2, 3}));
}

TEST(S7, UnsliceInconsistentOffsetsStayInBounds) {
  // A total above cp*R, an offset not divisible by 2*cp: some rows of the
  // input, never one outside it.
  for (CpMode mode : {CpMode::Zigzag, CpMode::Contiguous})
    for (const I32 &cup : {I32{0, 4, 8, 40}, I32{0, 3, 5, 7}, I32{0, 1}}) {
      Result<I32> indices = cpUnsliceIndices(cup, 4, 3, mode);
      ASSERT_TRUE(indices) << indices.status().message();
      ASSERT_EQ(indices->size(), 12u);
      for (int32_t index : *indices)
        EXPECT_TRUE(index >= 0 && index < 12) << index;
    }
}

TEST(S7, UnsliceErrors) {
  EXPECT_ERROR(cpUnsliceIndices(kCup, 0, 6), "cp = 0 must be >= 1");
  EXPECT_ERROR(cpUnsliceIndices(kCup, 2, 0), "rows_per_rank = 0 must be >= 1");
  EXPECT_ERROR(cpUnsliceIndices(kCup, 4, 1 << 30),
               "cp * rows_per_rank = 4 * 1073741824 is above int32 max");
  EXPECT_ERROR(cpUnsliceIndices({}, 2, 6), "at least one entry");
  EXPECT_ERROR(cpUnsliceIndices({0, 8, 4}, 2, 6),
               "cu_seqlens_padded decreases");
}

/// Slicing a buffer on every rank, padding each slice to R rows and
/// gathering the slices, then unslicing, gives the buffer back: its T rows
/// in sequence order, then the padded rows rank after rank. Random offsets
/// (zero-length sequences included), cp 1 to 4, both modes.
TEST(S7, UnsliceUndoesSliceAndPadOnEveryRank) {
  std::mt19937 rng(20261107);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t cp = uniform(1, 4);
    const CpMode mode = trial % 2 ? CpMode::Contiguous : CpMode::Zigzag;
    const int64_t multiple =
        cp == 1 ? 1 : (mode == CpMode::Zigzag ? 2 * cp : cp);
    I32 cup = {0};
    for (int64_t s = uniform(0, 5); s > 0; --s)
      cup.push_back(cup.back() + int32_t(multiple * uniform(0, 4)));
    const int64_t total = cup.back(), local = total / cp;
    const int64_t perRank = local + uniform(local == 0 ? 1 : 0, 5);
    const int64_t rows = cp * perRank;
    // The packed buffer, then each rank's padded rows, all distinct.
    I64 original(static_cast<size_t>(rows));
    std::iota(original.begin(), original.end(), 1000);
    const I64 packed(original.begin(), original.begin() + total);
    I64 gathered, gatheredFilled;
    for (int64_t rank = 0; rank < cp; ++rank) {
      I64 slice;
      if (total > 0) {
        Result<I32> indices = cpPartitionIndices(cup, total, cp, rank, mode);
        ASSERT_TRUE(indices) << indices.status().message();
        Result<I64> sliced = cpSlice(packed, *indices);
        ASSERT_TRUE(sliced) << sliced.status().message();
        slice = *sliced;
      }
      ASSERT_EQ(int64_t(slice.size()), local);
      Result<I64> filled = padTail(slice, perRank, int64_t(-1));
      ASSERT_TRUE(filled) << filled.status().message();
      gatheredFilled.insert(gatheredFilled.end(), filled->begin(),
                            filled->end());
      // The same slice with this rank's own rows of the tail.
      auto tail = original.begin() + total + rank * (perRank - local);
      slice.insert(slice.end(), tail, tail + (perRank - local));
      gathered.insert(gathered.end(), slice.begin(), slice.end());
    }
    Result<I32> indices = cpUnsliceIndices(cup, cp, perRank, mode);
    ASSERT_TRUE(indices) << indices.status().message();
    I32 sorted = *indices;
    std::sort(sorted.begin(), sorted.end());
    I32 identity(static_cast<size_t>(rows));
    std::iota(identity.begin(), identity.end(), 0);
    ASSERT_EQ(sorted, identity) << "not a permutation, trial " << trial;
    EXPECT_VALUE(cpSlice(gathered, *indices), original);
    I64 expectedFilled = withTail(packed, size_t(rows - total), int64_t(-1));
    EXPECT_VALUE(cpSlice(gatheredFilled, *indices), expectedFilled);
  }
}

//===----------------------------------------------------------------------===//
// S8
//===----------------------------------------------------------------------===//

TEST(S8, GoldenPositionIdsCp1) {
  EXPECT_VALUE(positionIds(kCu, kCup),
               (I64{0, 1, 2, 0, 0, 1, 0, 0, 0, 1, 2, 3}));
}

TEST(S8, GoldenPositionIdsCp2AfterSlicing) {
  Result<I64> positions = positionIds(kCu, kCup);
  ASSERT_TRUE(positions) << positions.status().message();
  for (int rank = 0; rank < 2; ++rank) {
    Result<I32> indices = cpPartitionIndices(kCup, 12, 2, rank);
    ASSERT_TRUE(indices) << indices.status().message();
    EXPECT_VALUE(cpSlice(*positions, *indices),
                 rank == 0 ? (I64{0, 0, 0, 0, 0, 3}) : (I64{1, 2, 1, 0, 1, 2}));
  }
}

TEST(S8, GoldenRopeCp2StaticCu) {
  const I32 cu = {0, 4, 8, 12, 16, 16, 16};
  EXPECT_VALUE(ropePositions(cu, 2, 0, 8), (I64{0, 3, 0, 3, 0, 3, 0, 3}));
  EXPECT_VALUE(ropePositions(cu, 2, 1, 8), (I64{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(S8, GoldenRefRopeCp2RunningExample) {
  EXPECT_VALUE(ropePositions(kCup, 2, 0, 6), (I64{0, 3, 0, 3, 0, 3}));
  EXPECT_VALUE(ropePositions(kCup, 2, 1, 6), (I64{1, 2, 1, 2, 1, 2}));
}

TEST(S8, GoldenRopeCp1TailContinuesLastSequence) {
  EXPECT_VALUE(ropePositions(kCup, 1, 0, 16),
               (I64{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(S8, RopeTableRowsAbsoluteShiftAndClamp) {
  // freqRows > max_seqlen: absolute table, shifted by the sequence start.
  EXPECT_VALUE(ropeTableRows(kCup, 1, 0, 12, 4, 100),
               (I64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_VALUE(ropeTableRows(kCup, 1, 0, 16, 4, 6),
               (I64{0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}));
  // freqRows <= max_seqlen: no shift, only the clamp.
  EXPECT_VALUE(ropeTableRows(kCup, 1, 0, 16, 4, 4),
               (I64{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 3, 3, 3, 3}));
  EXPECT_ERROR(ropeTableRows(kCup, 1, 0, 4, 4, 0), "needs at least 1");
}

TEST(S8, RopeErrors) {
  EXPECT_ERROR(ropePositions({0}, 1, 0, 4), "at least 2 entries");
  EXPECT_ERROR(ropePositions(kCup, 2, 2, 4), "CP rank 2 is outside");
  EXPECT_ERROR(ropePositions({0, 8, 4}, 1, 0, 4), "decreases");
}

TEST(S8, GoldenSeqIdx) {
  I32 expected;
  for (auto [id, count] : {std::pair{0, 5}, {1, 2}, {2, 4}, {3, 5}})
    expected.insert(expected.end(), count, id);
  EXPECT_VALUE(seqIdx({0, 5, 7, 11}, 16), expected);
}

TEST(S8, SeqIdxErrors) {
  EXPECT_ERROR(seqIdx({0, 5, 7, 11}, 10), "covers 11 rows instead of 10");
  EXPECT_ERROR(seqIdx({}, 4), "at least one entry");
}

//===----------------------------------------------------------------------===//
// S9
//===----------------------------------------------------------------------===//

void expectKwargs(const Result<ThdPaddingKwargs> &kwargs,
                  std::optional<int64_t> alignment,
                  std::optional<int64_t> target,
                  std::optional<int64_t> maxNumSeqs) {
  ASSERT_TRUE(kwargs) << kwargs.status().message();
  EXPECT_EQ(kwargs->alignment, alignment);
  EXPECT_EQ(kwargs->targetLength, target);
  EXPECT_EQ(kwargs->maxNumSeqs, maxNumSeqs);
}

TEST(S9, PaddingKwargsTablePr) {
  const auto pr = SemanticsVersion::PR4359;
  const auto none = std::nullopt;
  expectKwargs(
      thdPaddingKwargs(PadAlignment::maxLength(), 4096, 32, true, true, pr),
      none, 4096, 32);
  expectKwargs(
      thdPaddingKwargs(PadAlignment::maxLength(), 4096, 32, false, true, pr),
      none, 4096, none);
  expectKwargs(thdPaddingKwargs(PadAlignment::multipleOf(128), 4096, 32, false,
                                true, pr),
               128, none, none);
}

TEST(S9, PaddingKwargsTableDevLater) {
  const auto dev = SemanticsVersion::DevLater;
  const auto none = std::nullopt;
  expectKwargs(thdPaddingKwargs(PadAlignment::multipleOf(4096), 4096, 32, true,
                                true, dev),
               none, 4096, 32);
  expectKwargs(
      thdPaddingKwargs(PadAlignment::maxLength(), 4096, 32, false, true, dev),
      none, 4096, 32);
  expectKwargs(thdPaddingKwargs(PadAlignment::multipleOf(128), 4096, 32, false,
                                true, dev),
               128, none, 32);
}

TEST(S9, ConfigValidation) {
  const auto pr = SemanticsVersion::PR4359;
  EXPECT_ERROR(
      thdPaddingKwargs(PadAlignment::multipleOf(0), 4096, 32, false, false, pr),
      "pad_packed_seq_alignment = 0");
  EXPECT_ERROR(thdPaddingKwargs(PadAlignment::multipleOf(8192), 4096, 32, false,
                                false, pr),
               "pad_packed_seq_alignment = 8192");
  EXPECT_ERROR(
      thdPaddingKwargs(PadAlignment::multipleOf(128), 4096, 32, true, true, pr),
      "exactly max_seqlen_per_dp_cp_rank = 4096, got 128");
  EXPECT_ERROR(
      thdPaddingKwargs(PadAlignment::maxLength(), 0, 32, false, false, pr),
      "max_seqlen_per_dp_cp_rank = 0");
  EXPECT_ERROR(thdPaddingKwargs(PadAlignment::maxLength(), 4096, std::nullopt,
                                true, true, SemanticsVersion::DevLater),
               "requires --thd-max-packed-sequences");
}

//===----------------------------------------------------------------------===//
// S10
//===----------------------------------------------------------------------===//

TailPaddingConfig tailConfig(int64_t cp, std::optional<int64_t> alignment,
                             std::optional<int64_t> target,
                             std::optional<int64_t> maxNumSeqs,
                             TailPolicy policy) {
  TailPaddingConfig config;
  config.cp = cp;
  config.alignment = alignment;
  config.target = target;
  config.maxNumSeqs = maxNumSeqs;
  config.policy = policy;
  return config;
}

const Mask kTailMask12Of16 = withTail<uint8_t>(Mask(12, 0), 4, 1);

TEST(S10, GoldenAlignment8WithDummy) {
  Result<TailPaddingResult> result =
      padTailMetadata(kCup, kCup, 4, 12,
                      tailConfig(1, 8, std::nullopt, std::nullopt,
                                 TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->localTarget, 16);
  EXPECT_EQ(result->globalTarget, 16);
  EXPECT_EQ(result->cuSeqlens, (I32{0, 4, 8, 12, 16}));
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 12, 16}));
  EXPECT_EQ(result->maxSeqlen, 4);
  EXPECT_EQ(result->totalTokens, std::optional<int64_t>(16));
  EXPECT_EQ(result->tailMask, kTailMask12Of16);
}

TEST(S10, GoldenAlignment8WithoutDummy) {
  Result<TailPaddingResult> result = padTailMetadata(
      kCup, kCup, 4, 12,
      tailConfig(1, 8, std::nullopt, std::nullopt, TailPolicy::None));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->localTarget, 16);
  EXPECT_EQ(result->cuSeqlens, kCup);
  EXPECT_EQ(result->cuSeqlensPadded, kCup);
  EXPECT_EQ(result->maxSeqlen, 4);
  EXPECT_EQ(result->totalTokens, std::optional<int64_t>(16));
  EXPECT_EQ(result->tailMask, kTailMask12Of16);
}

TEST(S10, GoldenGraphCp1Target16N6) {
  Result<TailPaddingResult> result = padTailMetadata(
      kCup, kCup, 4, 12,
      tailConfig(1, std::nullopt, 16, 6, TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->localTarget, 16);
  EXPECT_EQ(result->cuSeqlens, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(result->maxSeqlen, 16);
  EXPECT_EQ(result->totalTokens, std::nullopt);
  EXPECT_EQ(result->tailMask, kTailMask12Of16);
}

TEST(S10, GoldenGraphCp2Target8N6Metadata) {
  Result<TailPaddingResult> result = padTailMetadata(
      kCup, kCup, 4, 6,
      tailConfig(2, std::nullopt, 8, 6, TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->localTarget, 8);
  EXPECT_EQ(result->globalTarget, 16);
  EXPECT_EQ(result->cuSeqlens, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(result->maxSeqlen, 16);
  EXPECT_EQ(result->totalTokens, std::nullopt);
  EXPECT_EQ(result->tailMask, mask({0, 0, 0, 0, 0, 0, 1, 1}));
  // TE assigns local rows 6-7 to the dummy: its chunks r and 2cp-1-r.
  EXPECT_VALUE(cpPartitionIndices(result->cuSeqlensPadded, 16, 2, 0),
               (I32{0, 3, 4, 7, 8, 11, 12, 15}));
  EXPECT_VALUE(cpPartitionIndices(result->cuSeqlensPadded, 16, 2, 1),
               (I32{1, 2, 5, 6, 9, 10, 13, 14}));
}

TEST(S10, GoldenSplitDummySequences) {
  // cp 1, target 20, N 5, cup [0,4,8] (cu [0,3,6]), dummies of 5: the
  // tail of 12 rows in ceil(12/5) = 3 pieces over the 3 spare entries.
  TailPaddingConfig config = tailConfig(1, std::nullopt, 20, 5,
                                        TailPolicy::SplitDummySequences);
  config.dummyLength = 5;
  Result<TailPaddingResult> result =
      padTailMetadata({0, 3, 6}, {0, 4, 8}, 4, 8, config);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 13, 18, 20}));
  EXPECT_EQ(result->cuSeqlens, (I32{0, 3, 6, 11, 16, 18}));
  EXPECT_EQ(result->numSeqs, 5);
  EXPECT_EQ(result->maxSeqlen, 20);
  // N 3 leaves one spare entry: one dummy takes the whole tail.
  config.maxNumSeqs = 3;
  result = padTailMetadata({0, 3, 6}, {0, 4, 8}, 4, 8, config);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 20}));
  EXPECT_EQ(result->numSeqs, 3);
  // N 4: two spare entries, pieces of 5 and 7.
  config.maxNumSeqs = 4;
  result = padTailMetadata({0, 3, 6}, {0, 4, 8}, 4, 8, config);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 13, 20}));
  EXPECT_EQ(result->cuSeqlens, (I32{0, 3, 6, 11, 18}));
  // No tail: nothing added.
  config.target = 8;
  result = padTailMetadata({0, 3, 6}, {0, 4, 8}, 4, 8, config);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 8, 8}));
  EXPECT_EQ(result->numSeqs, 2);
}

TEST(S10, GoldenSplitDummySequencesZigzagCp2) {
  // cp 2, target 8 (gT 16), cup [0,4], dummies of 4: 8, 12, 16.
  TailPaddingConfig config = tailConfig(2, std::nullopt, 8, 6,
                                        TailPolicy::SplitDummySequences);
  config.dummyLength = 4;
  Result<TailPaddingResult> result =
      padTailMetadata({0, 4}, {0, 4}, 4, 2, config);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(result->numSeqs, 4);
  config.dummyLength = 2;
  EXPECT_ERROR(padTailMetadata({0, 4}, {0, 4}, 4, 2, config),
               "dummy length 2 is not divisible by 2*cp = 4");
  config.dummyLength = std::nullopt;
  EXPECT_ERROR(padTailMetadata({0, 4}, {0, 4}, 4, 2, config),
               "must be set and >= 1");
  config.dummyLength = 4;
  config.maxNumSeqs = std::nullopt;
  EXPECT_ERROR(padTailMetadata({0, 4}, {0, 4}, 4, 2, config),
               "thd_max_packed_sequences must be set");
}

TEST(S10, GoldenDevDummyWithGaps) {
  Result<TailPaddingResult> result = padTailMetadata(
      kCu, kCup, 4, 12,
      tailConfig(1, std::nullopt, 16, 6, TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlens, (I32{0, 3, 5, 9, 13, 13, 13}));
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
}

TEST(S10, GoldenDevExtendLastCp2Target8) {
  Result<TailPaddingResult> result = padTailMetadata(
      kCu, kCup, 4, 6,
      tailConfig(2, std::nullopt, 8, std::nullopt, TailPolicy::ExtendLast));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 16}));
  EXPECT_EQ(result->cuSeqlens, kCu);
  EXPECT_EQ(result->maxSeqlen, 8);
  EXPECT_EQ(result->globalTarget, 16);
  EXPECT_VALUE(cpPartitionIndices(result->cuSeqlensPadded, 16, 2, 0),
               (I32{0, 3, 4, 7, 8, 9, 14, 15}));
  EXPECT_VALUE(cpPartitionIndices(result->cuSeqlensPadded, 16, 2, 1),
               (I32{1, 2, 5, 6, 10, 11, 12, 13}));
  // The dummy layout of the same buffer, for contrast.
  EXPECT_VALUE(cpPartitionIndices({0, 4, 8, 12, 16}, 16, 2, 0),
               (I32{0, 3, 4, 7, 8, 11, 12, 15}));
}

TEST(S10, GoldenRefExtendLastCp1Alignment8) {
  Result<TailPaddingResult> result = padTailMetadata(
      kCu, kCup, 4, 12,
      tailConfig(1, 8, std::nullopt, std::nullopt, TailPolicy::ExtendLast));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 16}));
  EXPECT_EQ(result->cuSeqlens, kCu);
  EXPECT_EQ(result->maxSeqlen, 8);
  EXPECT_EQ(result->globalTarget, 16);
}

TEST(S10, GoldenPrTestTarget256N8) {
  const I32 cu = {0, 100, 150, 180};
  Result<TailPaddingResult> result = padTailMetadata(
      cu, cu, 100, 180,
      tailConfig(1, std::nullopt, 256, 8, TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  const I32 expected = {0, 100, 150, 180, 256, 256, 256, 256, 256};
  EXPECT_EQ(result->cuSeqlens, expected);
  EXPECT_EQ(result->cuSeqlensPadded, expected);
  EXPECT_EQ(result->maxSeqlen, 256);
}

TEST(S10, GoldenPrTestMaskMerge) {
  EXPECT_VALUE(mergeTailMask(mask({0, 0, 0, 1, 0, 0, 1, 1}), 8, 10),
               mask({0, 0, 0, 1, 0, 0, 1, 1, 1, 1}));
  EXPECT_VALUE(padTail(mask({0, 0, 0, 1, 0, 0, 1, 1}), 10, 1),
               mask({0, 0, 0, 1, 0, 0, 1, 1, 1, 1}));
  // Rows at or past localLength are padding even if the old mask says 0.
  EXPECT_VALUE(mergeTailMask(mask({0, 0, 0, 0}), 3, 5), mask({0, 0, 0, 1, 1}));
  EXPECT_ERROR(mergeTailMask(mask({0, 0, 0}), 3, 2),
               "refusing to silently truncate");
}

TEST(S10, GoldenEagerVersusMetadataPathUnderCp) {
  // cup[-1] = 3200, cp = 2, a = 128: tensor path Lt 1664 / gT 3328, PR
  // metadata-only path gT 3200.
  const I32 cup = {0, 3200};
  Result<TailPaddingResult> tensorPath =
      padTailMetadata(cup, cup, 3200, 1600,
                      tailConfig(2, 128, std::nullopt, std::nullopt,
                                 TailPolicy::AppendDummySequence));
  ASSERT_TRUE(tensorPath) << tensorPath.status().message();
  EXPECT_EQ(tensorPath->localTarget, 1664);
  EXPECT_EQ(tensorPath->globalTarget, 3328);
  EXPECT_EQ(tensorPath->cuSeqlensPadded, (I32{0, 3200, 3328}));
  EXPECT_VALUE(metadataOnlyGlobalTarget(3200, 2, 128, std::nullopt),
               int64_t(3200));
  EXPECT_VALUE(metadataOnlyGlobalTarget(3200, 2, std::nullopt, 2048),
               int64_t(4096));
  EXPECT_ERROR(metadataOnlyGlobalTarget(3200, 2, 128, 2048), "exactly one");
}

TEST(S10, TargetEqualsActualAppendsNoDummy) {
  Result<TailPaddingResult> graph = padTailMetadata(
      kCu, kCup, 4, 12,
      tailConfig(1, std::nullopt, 12, 6, TailPolicy::AppendDummySequence));
  ASSERT_TRUE(graph) << graph.status().message();
  EXPECT_EQ(graph->cuSeqlensPadded, (I32{0, 4, 8, 12, 12, 12, 12}));
  EXPECT_EQ(graph->cuSeqlens, (I32{0, 3, 5, 9, 9, 9, 9}));
  EXPECT_EQ(graph->maxSeqlen, 12);
  Result<TailPaddingResult> eager =
      padTailMetadata(kCu, kCup, 4, 12,
                      tailConfig(1, 4, std::nullopt, std::nullopt,
                                 TailPolicy::AppendDummySequence));
  ASSERT_TRUE(eager) << eager.status().message();
  EXPECT_EQ(eager->cuSeqlensPadded, kCup);
  EXPECT_EQ(eager->cuSeqlens, kCu);
  EXPECT_EQ(eager->maxSeqlen, 4);
  EXPECT_EQ(eager->tailMask, Mask(12, 0));
}

TEST(S10, ConfigErrors) {
  const auto dummy = TailPolicy::AppendDummySequence;
  EXPECT_ERROR(padTailMetadata(kCu, kCup, 4, 12,
                               tailConfig(1, 8, 16, std::nullopt, dummy)),
               "exactly one of alignment and target");
  EXPECT_ERROR(padTailMetadata(kCu, kCup, 4, 12,
                               tailConfig(1, std::nullopt, std::nullopt,
                                          std::nullopt, dummy)),
               "alignment = None, target = None");
  EXPECT_ERROR(
      padTailMetadata(kCu, kCup, 4, 12,
                      tailConfig(1, 0, std::nullopt, std::nullopt, dummy)),
      "alignment = 0 must be > 0");
  EXPECT_ERROR(
      padTailMetadata({0, 3}, kCup, 4, 12,
                      tailConfig(1, 8, std::nullopt, std::nullopt, dummy)),
      "cu_seqlens has 2 entries");
}

TEST(S10, DummyLengthNotDivisibleBy2CpUnderZigzag) {
  // cp = 2, target 7: gT 14, dummy 14 - 12 = 2 is not a multiple of 4.
  EXPECT_ERROR(padTailMetadata(kCup, kCup, 4, 6,
                               tailConfig(2, std::nullopt, 7, std::nullopt,
                                          TailPolicy::AppendDummySequence)),
               "dummy sequence length 2");
  // The contiguous layout has no such requirement.
  TailPaddingConfig contiguous = tailConfig(2, std::nullopt, 7, std::nullopt,
                                            TailPolicy::AppendDummySequence);
  contiguous.mode = CpMode::Contiguous;
  Result<TailPaddingResult> result =
      padTailMetadata(kCup, kCup, 4, 6, contiguous);
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 4, 8, 12, 14}));
}

TEST(S10, ExtendLastErrors) {
  EXPECT_ERROR(padTailMetadata({0}, {0}, 0, 0,
                               tailConfig(1, std::nullopt, 8, std::nullopt,
                                          TailPolicy::ExtendLast)),
               "at least one real sequence");
  EXPECT_ERROR(padTailMetadata(kCu, kCup, 4, 6,
                               tailConfig(2, std::nullopt, 7, std::nullopt,
                                          TailPolicy::ExtendLast)),
               "gT = 14 is not divisible by 2*cp = 4");
}

TEST(S10, PadCuSeqlens) {
  EXPECT_VALUE(padCuSeqlens({0, 4, 8}, 5), (I32{0, 4, 8, 8, 8}));
  EXPECT_VALUE(padCuSeqlens({0, 4, 8}, 3), (I32{0, 4, 8}));
  EXPECT_ERROR(padCuSeqlens({0, 4, 8, 12}, 3),
               "Actual num_seqs (3) exceeds thd_max_packed_sequences (2)");
  EXPECT_ERROR(padCuSeqlens({}, 3), "empty");
}

TEST(S10, PadTailTensors) {
  EXPECT_VALUE(padTail(I64{11, 0, 21}, 5, 0), (I64{11, 0, 21, 0, 0}));
  EXPECT_VALUE(padTail(F32{1, 0.5f}, 3, 0.0f), (F32{1, 0.5f, 0}));
  EXPECT_ERROR(padTail(I64{1, 2, 3}, 2, 0),
               "length 3 exceeds the target length 2; refusing to silently "
               "truncate");
}

//===----------------------------------------------------------------------===//
// S11
//===----------------------------------------------------------------------===//

TEST(S11, CaptureSeed) {
  EXPECT_EQ(graphCaptureCuSeed(8, 2, 6), (I32{0, 16, 16, 16, 16, 16, 16}));
  EXPECT_EQ(graphCaptureCuSeed(4096, 1, 1), (I32{0, 4096}));
}

//===----------------------------------------------------------------------===//
// S12
//===----------------------------------------------------------------------===//

TEST(S12, GoldenUpperBound) {
  EXPECT_VALUE(
      maxMicrobatchesUpperBound(64, 2, 2, 4096, 2048, std::nullopt, 31),
      int64_t(8));
}

TEST(S12, UpperBoundVariants) {
  // VPP group 3: 16 packs round up to 18, / dp 2 = 9.
  EXPECT_VALUE(maxMicrobatchesUpperBound(64, 2, 2, 4096, 2048, 3, 31),
               int64_t(9));
  // The sequence cap K = 2 limits s to 2: 32 packs.
  EXPECT_VALUE(maxMicrobatchesUpperBound(64, 2, 2, 4096, 2048, std::nullopt, 2),
               int64_t(16));
  // Lmax above C*cp: one sample per pack.
  EXPECT_VALUE(maxMicrobatchesUpperBound(64, 2, 1, 1024, 2048), int64_t(32));
  EXPECT_VALUE(maxMicrobatchesUpperBound(1, 4, 1, 1024, 128), int64_t(1));
  EXPECT_ERROR(maxMicrobatchesUpperBound(64, 0, 2, 4096, 2048), "dp = 0");
}

TEST(S12, CaptureCountAndSlots) {
  EXPECT_EQ(graphCaptureCount(5, 8, false), 8);
  EXPECT_EQ(graphCaptureCount(9, 8, false), 9);
  EXPECT_EQ(graphCaptureCount(5, 8, true), 5);
  EXPECT_VALUE(graphSlotsNeeded({1, 1, 1, 2, -1, -1, -2, -1}), int64_t(3));
  EXPECT_VALUE(graphSlotsNeeded({1, -1, 2, -2, 1, -1}), int64_t(1));
  EXPECT_VALUE(graphSlotsNeeded({}), int64_t(0));
  EXPECT_ERROR(graphSlotsNeeded({1, 0}), "order[1] = 0");
}

//===----------------------------------------------------------------------===//
// S14
//===----------------------------------------------------------------------===//

TEST(S14, GoldenReadHalf) {
  const I64 x = {100, 101, 102, 103, 104, 105, 106, 107};
  EXPECT_VALUE(readHalfRows({0, 4, 8}, 0, 8), (I32{0, 1, 4, 5}));
  EXPECT_VALUE(readHalfRows({0, 4, 8}, 1, 8), (I32{2, 3, 6, 7}));
  EXPECT_VALUE(readHalf(x, {0, 4, 8}, 0), (I64{100, 101, 104, 105}));
  EXPECT_VALUE(readHalf(x, {0, 4, 8}, 1), (I64{102, 103, 106, 107}));
}

TEST(S14, ReadHalfZeroLengthAndErrors) {
  EXPECT_VALUE(readHalfRows({0, 4, 4, 8}, 1, 8), (I32{2, 3, 6, 7}));
  EXPECT_ERROR(readHalfRows({0, 3, 8}, 0, 8), "local cu_seqlens[1] = 3");
  EXPECT_ERROR(readHalfRows({0, 4, 8}, 2, 8), "half = 2");
  EXPECT_ERROR(readHalfRows({0, 4, 8}, 1, 6), "outside the local buffer");
}

TEST(S14, GoldenLseMerge) {
  const double lse = lseMerge(0.0, 0.0);
  EXPECT_NEAR(lse, 0.693147, 1e-6);
  EXPECT_DOUBLE_EQ(lse, std::log(2.0));
  EXPECT_DOUBLE_EQ(correctOutput(0.0, 1.0, 0.0, lse), 0.5);
  // Both steps weighted by 0.5: the merged output is their mean.
  EXPECT_DOUBLE_EQ(
      correctOutput(correctOutput(0.0, 3.0, 0.0, lse), 5.0, 0.0, lse), 4.0);
}

TEST(S14, LseMergeEdgeValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(lseMerge(-inf, -inf), -inf);
  EXPECT_DOUBLE_EQ(lseMerge(-inf, 2.0), 2.0);
  EXPECT_DOUBLE_EQ(lseMerge(1.0, 3.0), 3.0 + std::log1p(std::exp(-2.0)));
  // A step value exactly 0 contributes 0, even with an overflowing weight.
  EXPECT_DOUBLE_EQ(correctOutput(1.5, 0.0, inf, 0.0), 1.5);
}

TEST(S14, TeDocstringSequenceToCpRankOrder) {
  const I32 expected = {0, 7, 8,  15, 16, 23, 24, 25, 38, 39,  // rank 0
                        1, 6, 9,  14, 17, 22, 26, 27, 36, 37,  // rank 1
                        2, 5, 10, 13, 18, 21, 28, 29, 34, 35,  // rank 2
                        3, 4, 11, 12, 19, 20, 30, 31, 32, 33}; // rank 3
  EXPECT_VALUE(sequenceOrderToCpRankOrder({0, 8, 16, 24, 40}, 4), expected);
  EXPECT_ERROR(sequenceOrderToCpRankOrder({0, 6, 16}, 4),
               "cu_seqlens_padded[1] = 6 is not divisible by 2*cp = 8");
}

//===----------------------------------------------------------------------===//
// Edge-case matrix (one test per row)
//===----------------------------------------------------------------------===//

TEST(EdgeCase, ZeroSequencesInPack) {
  // S3 emits an empty pack only when the first sequence exceeds C*cp.
  Result<PackingResult> packs = dpBalancedGroups({9, 3}, 4, 2, 1);
  ASSERT_TRUE(packs) << packs.status().message();
  EXPECT_TRUE(packs->packs[0].empty());
  // S4 on an empty pack (the PR raises IndexError; the reference defines it).
  Result<PackedBuffer<int64_t>> empty = pack(I64{1, 2}, {0}, {}, {}, {}, 0);
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_TRUE(empty->values.empty());
  EXPECT_EQ(empty->metadata.cuSeqlens, (I32{0}));
  EXPECT_EQ(empty->metadata.cuSeqlensPadded, (I32{0}));
  EXPECT_EQ(empty->metadata.maxSeqlen, 0);
  // S5 with a single cu entry: everything is padding.
  EXPECT_VALUE(paddingMask({0}, {0}), Mask{});
  EXPECT_VALUE(paddingMask({0}, {6}), Mask(6, 1));
}

TEST(EdgeCase, ZeroLengthSequences) {
  const I32 cu = {0, 3, 3, 5}, cup = {0, 4, 4, 8};
  EXPECT_VALUE(paddingMask(cu, cup), mask({0, 0, 0, 1, 0, 0, 1, 1}));
  EXPECT_VALUE(cpPartitionIndices(cup, 8, 2, 0), (I32{0, 3, 4, 7}));
  EXPECT_VALUE(cpPartitionIndices(cup, 8, 2, 1), (I32{1, 2, 5, 6}));
  EXPECT_VALUE(positionIds(cu, cup), (I64{0, 1, 2, 0, 0, 1, 0, 0}));
  EXPECT_VALUE(ropePositions(cup, 2, 0, 4), (I64{0, 3, 0, 3}));
  EXPECT_VALUE(seqIdx(cup, 8), (I32{0, 0, 0, 0, 2, 2, 2, 2}));
  // A leading zero-length sequence.
  EXPECT_VALUE(paddingMask({0, 0, 3}, {0, 0, 4}), mask({0, 0, 0, 1}));
  EXPECT_VALUE(cpPartitionIndices({0, 0, 4}, 4, 2, 0), (I32{0, 3}));
}

TEST(EdgeCase, TotalLengthZero) {
  EXPECT_VALUE(paddingMask({0, 0}, {0, 0}), Mask{});
  EXPECT_ERROR(cpPartitionIndices({0, 0}, 0, 2, 0),
               "total_tokens = 0 must be > 0");
  EXPECT_VALUE(cpPartitionIndices({0, 0}, 0, 1, 0), I32{});
  // S10 target mode: a single dummy [0, gT].
  Result<TailPaddingResult> cp1 =
      padTailMetadata({0}, {0}, 0, 0,
                      tailConfig(1, std::nullopt, 8, std::nullopt,
                                 TailPolicy::AppendDummySequence));
  ASSERT_TRUE(cp1) << cp1.status().message();
  EXPECT_EQ(cp1->cuSeqlensPadded, (I32{0, 8}));
  EXPECT_EQ(cp1->cuSeqlens, (I32{0, 8}));
  EXPECT_EQ(cp1->maxSeqlen, 8);
  Result<TailPaddingResult> cp2 = padTailMetadata(
      {0, 0, 0}, {0, 0, 0}, 0, 0,
      tailConfig(2, std::nullopt, 4, 4, TailPolicy::AppendDummySequence));
  ASSERT_TRUE(cp2) << cp2.status().message();
  EXPECT_EQ(cp2->cuSeqlensPadded, (I32{0, 0, 0, 8, 8}));
  EXPECT_EQ(cp2->cuSeqlens, (I32{0, 0, 0, 8, 8}));
  EXPECT_EQ(cp2->tailMask, Mask(4, 1));
}

TEST(EdgeCase, AlignmentNotDividingC) {
  // Eager: only a <= C is checked, so Lt can exceed C.
  Result<ThdPaddingKwargs> eager = thdPaddingKwargs(
      PadAlignment::multipleOf(3), 8, 6, false, true, SemanticsVersion::PR4359);
  ASSERT_TRUE(eager) << eager.status().message();
  ASSERT_EQ(eager->alignment, std::optional<int64_t>(3));
  Result<TailPaddingResult> result = padTailMetadata(
      {0, 8}, {0, 8}, 8, 8,
      tailConfig(1, *eager->alignment, std::nullopt, std::nullopt,
                 TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->localTarget, 9);
  EXPECT_EQ(result->cuSeqlensPadded, (I32{0, 8, 9}));
  // Graph mode forces target_len = C ...
  Result<ThdPaddingKwargs> graph = thdPaddingKwargs(
      PadAlignment::maxLength(), 8, 6, true, true, SemanticsVersion::PR4359);
  ASSERT_TRUE(graph) << graph.status().message();
  EXPECT_EQ(graph->targetLength, std::optional<int64_t>(8));
  EXPECT_EQ(graph->alignment, std::nullopt);
  // ... and rejects an integer alignment other than C with the scheduler.
  EXPECT_ERROR(thdPaddingKwargs(PadAlignment::multipleOf(3), 8, 6, true, true,
                                SemanticsVersion::PR4359),
               "got 3");
}

TEST(EdgeCase, Cp1) {
  EXPECT_VALUE(padGranularity(1, 2, false), int64_t(1));
  EXPECT_VALUE(cpPartitionIndices(kCup, 12, 1, 0),
               (I32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_VALUE(ropePositions(kCup, 1, 0, 12),
               (I64{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  Result<TailPaddingResult> result =
      padTailMetadata(kCu, kCup, 4, 12,
                      tailConfig(1, 5, std::nullopt, std::nullopt,
                                 TailPolicy::AppendDummySequence));
  ASSERT_TRUE(result) << result.status().message();
  EXPECT_EQ(result->globalTarget, result->localTarget);
  EXPECT_EQ(result->globalTarget, 15);
}

TEST(EdgeCase, TargetBelowActual) {
  EXPECT_ERROR(padTailMetadata(kCu, kCup, 4, 12,
                               tailConfig(1, std::nullopt, 8, std::nullopt,
                                          TailPolicy::AppendDummySequence)),
               "local length 12 exceeds the local target length Lt = 8; "
               "refusing to silently truncate");
  EXPECT_ERROR(padTailMetadata({0, 12}, {0, 12}, 12, 6,
                               tailConfig(2, std::nullopt, 4, std::nullopt,
                                          TailPolicy::AppendDummySequence)),
               "Individual request length 12 (sequence 0) exceeds the global "
               "target length gT = 8");
  EXPECT_ERROR(padTailMetadata(kCu, kCup, 4, 4,
                               tailConfig(2, std::nullopt, 4, std::nullopt,
                                          TailPolicy::AppendDummySequence)),
               "cu_seqlens_padded[3] = 12 exceeds the global target length "
               "gT = 8");
}

TEST(EdgeCase, MoreThanNEntries) {
  EXPECT_ERROR(padTailMetadata(kCup, kCup, 4, 12,
                               tailConfig(1, std::nullopt, 16, 3,
                                          TailPolicy::AppendDummySequence)),
               "Actual num_seqs (4) exceeds thd_max_packed_sequences (3)");
  // The dp_balanced cap K = N - 1 prevents it.
  Result<std::optional<int64_t>> cap = schedulerMaxRealNumSeqs(4, true, true);
  ASSERT_TRUE(cap && *cap);
  Result<PackingResult> packs = dpBalancedGroups(I32(10, 1), 1024, 1, 1, **cap);
  ASSERT_TRUE(packs) << packs.status().message();
  for (const I32 &p : packs->packs)
    EXPECT_LE(static_cast<int64_t>(p.size()), **cap);
}

TEST(EdgeCase, CuEntryNotMultipleOf2Cp) {
  EXPECT_ERROR(cpPartitionIndices({0, 3, 8}, 8, 2, 1),
               "cu_seqlens_padded[1] = 3 is not divisible by 2*cp = 4");
  EXPECT_ERROR(cpPartitionIndices({0, 8, 20}, 20, 4, 0),
               "total_tokens = 20 is not divisible by 2*cp = 8");
}

//===----------------------------------------------------------------------===//
// Composite: megatronGraphStep
//===----------------------------------------------------------------------===//

/// The running example as graph input: C = 8, cp = 2, N = 6, garbage in rows
/// 12..15 and in cu entries 4..6.
GraphStepInput runningExampleInput(int32_t rank) {
  GraphStepInput input;
  input.tokens = withTail<int64_t>(kRawTokens, 4, 77);
  input.labels =
      withTail<int64_t>({12, 13, 2, 99, 22, 2, 99, 99, 32, 33, 34, 2}, 4, 77);
  input.positionIds =
      withTail<int64_t>({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, 4, 5);
  input.lossMask = withTail<float>(
      {1, 1, 1, 0.25f, 1, 1, 0.25f, 0.25f, 1, 1, 1, 1}, 4, 0.75f);
  input.cuSeqlens = {0, 3, 5, 9, -5, 1000, 7};
  input.cuSeqlensPadded = {0, 4, 8, 12, 3, -1, 99};
  input.numSeqs = 3;
  input.cpRank = rank;
  return input;
}

/// (sequences, tokens) of droppedCounts, for comparisons.
std::pair<int32_t, int32_t> dropped(int32_t status, const I32 &cu,
                                    int64_t numSeqs) {
  Result<DroppedCounts> counts = droppedCounts(status, cu, numSeqs);
  EXPECT_TRUE(counts) << counts.status().message();
  return counts ? std::make_pair(counts->sequences, counts->tokens)
                : std::make_pair(-1, -1);
}

TEST(S10, SplitDummiesGraphStepMatchesOneDummyOnTheData) {
  // megatronGraphStep at cp 1, C 16 with dummies of 2: the data and the
  // mask are those of one dummy; the offsets split the tail of 4 rows.
  GraphStepInput input = runningExampleInput(0);
  GraphStepOutput one = megatronGraphStep(input, 16, 1, 6);
  GraphStepOutput split = megatronGraphStep(input, 16, 1, 6, 2);
  EXPECT_EQ(split.tokens, one.tokens);
  EXPECT_EQ(split.paddingMask, one.paddingMask);
  EXPECT_EQ(split.lossMask, one.lossMask);
  EXPECT_EQ(split.maxSeqlen, one.maxSeqlen);
  EXPECT_EQ(one.cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(split.cuSeqlensPadded, (I32{0, 4, 8, 12, 14, 16, 16}));
  EXPECT_EQ(split.cuSeqlens, (I32{0, 3, 5, 9, 11, 13, 13}));
}

TEST(Dropped, GoldenInvalidMicrobatchLosesWhatItClaimed) {
  using Counts = std::pair<int32_t, int32_t>;
  // The running example, flagged not monotonic (8) or with any other bit.
  EXPECT_EQ(dropped(StatusNotMonotonic, kCu, 2), Counts(2, 5));
  EXPECT_EQ(dropped(StatusCpRankOutOfRange, kCu, 3), Counts(3, 9));
  EXPECT_EQ(dropped(StatusNumSeqsOutOfRange | StatusNotDivisibleBy2Cp, kCu, 0),
            Counts(0, 0));
  // A valid microbatch loses nothing, whatever its count.
  EXPECT_EQ(dropped(0, kCu, 3), Counts(0, 0));
  EXPECT_EQ(dropped(0, {0, -4}, 9), Counts(0, 0));
}

TEST(Dropped, GarbageIsClampedNotReadOutOfBounds) {
  using Counts = std::pair<int32_t, int32_t>;
  // num_seqs past the array reads its last entry (E-1 = 3 sequences).
  EXPECT_EQ(dropped(StatusNumSeqsOutOfRange, kCu, 7), Counts(3, 9));
  EXPECT_EQ(dropped(StatusNumSeqsOutOfRange, kCu, int64_t(1) << 40),
            Counts(3, 9));
  // A negative num_seqs claims no sequence.
  EXPECT_EQ(dropped(StatusNumSeqsOutOfRange, kCu, -5), Counts(0, 0));
  // Negative offsets give no negative token count.
  EXPECT_EQ(dropped(StatusNotMonotonic, {0, 4, -7, 2}, 2), Counts(2, 0));
  EXPECT_EQ(dropped(StatusNotMonotonic, {-3}, 0), Counts(0, 0));
  EXPECT_ERROR(droppedCounts(StatusNotMonotonic, {}, 0),
               "cu_seqlens has no entry");
}

TEST(GraphStep, GoldenCp2Target8N6Rank0) {
  GraphStepOutput out = megatronGraphStep(runningExampleInput(0), 8, 2, 6);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(out.tokens, (I64{11, 0, 21, 0, 31, 34, 0, 0}));
  EXPECT_EQ(out.labels, (I64{12, 0, 22, 0, 32, 2, 0, 0}));
  EXPECT_EQ(out.positionIds, (I64{0, 0, 0, 0, 0, 3, 0, 0}));
  EXPECT_EQ(out.lossMask, (F32{1, 0, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(out.paddingMask, mask({0, 1, 0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(out.cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(out.cuSeqlens, (I32{0, 3, 5, 9, 13, 13, 13}));
  EXPECT_EQ(out.maxSeqlen, 16);
}

TEST(GraphStep, GoldenCp2Target8N6Rank1) {
  GraphStepOutput out = megatronGraphStep(runningExampleInput(1), 8, 2, 6);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(out.tokens, (I64{12, 13, 22, 0, 32, 33, 0, 0}));
  EXPECT_EQ(out.labels, (I64{13, 2, 2, 0, 33, 34, 0, 0}));
  EXPECT_EQ(out.positionIds, (I64{1, 2, 1, 0, 1, 2, 0, 0}));
  EXPECT_EQ(out.lossMask, (F32{1, 1, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(out.paddingMask, mask({0, 0, 0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(out.cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(out.cuSeqlens, (I32{0, 3, 5, 9, 13, 13, 13}));
  EXPECT_EQ(out.maxSeqlen, 16);
}

TEST(GraphStep, GoldenCp1Target16N6) {
  GraphStepInput input = runningExampleInput(0);
  GraphStepOutput out = megatronGraphStep(input, 16, 1, 6);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(out.tokens, withTail<int64_t>(kSanitizedTokens, 4, 0));
  EXPECT_EQ(out.paddingMask, withTail<uint8_t>(kRunningMask, 4, 1));
  EXPECT_EQ(out.positionIds,
            (I64{0, 1, 2, 0, 0, 1, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0}));
  EXPECT_EQ(out.cuSeqlensPadded, (I32{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(out.cuSeqlens, (I32{0, 3, 5, 9, 13, 13, 13}));
  EXPECT_EQ(out.maxSeqlen, 16);
}

TEST(GraphStep, FullBufferHasNoDummy) {
  GraphStepInput input = runningExampleInput(0);
  input.tokens.resize(12);
  input.labels.resize(12);
  input.positionIds.resize(12);
  input.lossMask.resize(12);
  input.cuSeqlens = {0, 3, 5, 9, 1};
  input.cuSeqlensPadded = {0, 4, 8, 12, 1};
  GraphStepOutput out = megatronGraphStep(input, 6, 2, 4);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(out.tokens, (I64{11, 0, 21, 0, 31, 34}));
  EXPECT_EQ(out.paddingMask, mask({0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(out.cuSeqlensPadded, (I32{0, 4, 8, 12, 12}));
  EXPECT_EQ(out.cuSeqlens, (I32{0, 3, 5, 9, 9}));
  EXPECT_EQ(out.maxSeqlen, 12);
}

/// Checks the outputs of an invalid (or empty) microbatch: everything is the
/// dummy sequence.
void expectEmptyMicrobatch(const GraphStepOutput &out, int64_t c, int64_t cp,
                           int64_t n) {
  EXPECT_EQ(out.tokens, I64(c, 0));
  EXPECT_EQ(out.labels, I64(c, 0));
  EXPECT_EQ(out.positionIds, I64(c, 0));
  EXPECT_EQ(out.lossMask, F32(c, 0.0f));
  EXPECT_EQ(out.paddingMask, Mask(c, 1));
  EXPECT_EQ(out.cuSeqlensPadded, graphCaptureCuSeed(c, cp, n));
  EXPECT_EQ(out.cuSeqlens, graphCaptureCuSeed(c, cp, n));
  EXPECT_EQ(out.maxSeqlen, c * cp);
}

TEST(GraphStep, EmptyMicrobatchIsValid) {
  GraphStepInput input = runningExampleInput(1);
  input.numSeqs = 0;
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, 0);
  expectEmptyMicrobatch(out, 8, 2, 6);
}

TEST(GraphStep, AllZeroLengthSequencesAreValid) {
  GraphStepInput input = runningExampleInput(0);
  input.numSeqs = 2;
  input.cuSeqlens = {0, 0, 0, 4, 4, 4, 4};
  input.cuSeqlensPadded = {0, 0, 0, 4, 4, 4, 4};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(out.paddingMask, Mask(8, 1));
  EXPECT_EQ(out.tokens, I64(8, 0));
  EXPECT_EQ(out.cuSeqlensPadded, (I32{0, 0, 0, 16, 16, 16, 16}));
  EXPECT_EQ(out.cuSeqlens, (I32{0, 0, 0, 16, 16, 16, 16}));
}

TEST(GraphStep, StatusBit1NumSeqsOutOfRange) {
  GraphStepInput input = runningExampleInput(0);
  input.numSeqs = 6; // N - 1 = 5 is the largest with room for the dummy.
  input.cuSeqlens = {0, 3, 5, 9, 9, 9, 9};
  input.cuSeqlensPadded = {0, 4, 8, 12, 12, 12, 12};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, StatusNumSeqsOutOfRange);
  expectEmptyMicrobatch(out, 8, 2, 6);
  input.numSeqs = -1;
  EXPECT_EQ(megatronGraphStep(input, 8, 2, 6).status, StatusNumSeqsOutOfRange);
  input.numSeqs = 5;
  EXPECT_EQ(megatronGraphStep(input, 8, 2, 6).status, 0);
}

TEST(GraphStep, StatusBit2TotalExceedsCapacity) {
  GraphStepInput input = runningExampleInput(0);
  input.cuSeqlensPadded = {0, 4, 8, 20, 0, 0, 0};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, StatusTotalExceedsCapacity);
  expectEmptyMicrobatch(out, 8, 2, 6);
}

TEST(GraphStep, StatusBit4NotDivisibleBy2Cp) {
  GraphStepInput input = runningExampleInput(1);
  input.cuSeqlensPadded = {0, 4, 6, 12, 0, 0, 0};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, StatusNotDivisibleBy2Cp);
  expectEmptyMicrobatch(out, 8, 2, 6);
  // With cp = 1 the same offsets are fine.
  EXPECT_EQ(megatronGraphStep(runningExampleInput(0), 16, 1, 6).status, 0);
}

TEST(GraphStep, StatusBit8NotMonotonic) {
  GraphStepInput input = runningExampleInput(0);
  input.cuSeqlens = {0, 3, 2, 5, 0, 0, 0};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, StatusNotMonotonic);
  expectEmptyMicrobatch(out, 8, 2, 6);
  input = runningExampleInput(0);
  input.cuSeqlensPadded = {4, 8, 12, 16, 0, 0, 0};
  EXPECT_EQ(megatronGraphStep(input, 8, 2, 6).status, StatusNotMonotonic);
}

TEST(GraphStep, StatusBit16ValidExceedsPadded) {
  GraphStepInput input = runningExampleInput(0);
  input.cuSeqlens = {0, 3, 8, 9, 0, 0, 0};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, StatusValidExceedsPadded);
  expectEmptyMicrobatch(out, 8, 2, 6);
}

TEST(GraphStep, StatusBit32CpRankOutOfRange) {
  GraphStepOutput out = megatronGraphStep(runningExampleInput(2), 8, 2, 6);
  EXPECT_EQ(out.status, StatusCpRankOutOfRange);
  expectEmptyMicrobatch(out, 8, 2, 6);
  EXPECT_EQ(megatronGraphStep(runningExampleInput(-1), 8, 2, 6).status,
            StatusCpRankOutOfRange);
  EXPECT_EQ(megatronGraphStep(runningExampleInput(1), 16, 1, 6).status,
            StatusCpRankOutOfRange);
}

TEST(GraphStep, StatusBitsCombineWithClampedNumSeqs) {
  GraphStepInput input = runningExampleInput(5);
  input.numSeqs = 9; // Clamped to N = 6 for the other checks.
  input.cuSeqlens = {0, 3, 5, 9, 9, 9, 9};
  input.cuSeqlensPadded = {0, 4, 8, 12, 16, 20, 24};
  GraphStepOutput out = megatronGraphStep(input, 8, 2, 6);
  EXPECT_EQ(out.status, StatusNumSeqsOutOfRange | StatusTotalExceedsCapacity |
                            StatusCpRankOutOfRange);
  expectEmptyMicrobatch(out, 8, 2, 6);
  EXPECT_EQ(graphStepStatus(input, 8, 2, 6), out.status);
}

TEST(GraphStepDeathTest, InputSizesArePreconditions) {
  GraphStepInput input = runningExampleInput(0);
  input.tokens.pop_back();
  EXPECT_DEATH(megatronGraphStep(input, 8, 2, 6), "all must have C\\*cp = 16");
  input = runningExampleInput(0);
  input.cuSeqlens.push_back(0);
  EXPECT_DEATH(megatronGraphStep(input, 8, 2, 6), "N\\+1 = 7");
  EXPECT_DEATH(megatronGraphStep(runningExampleInput(0), 7, 2, 6),
               "must be even");
}

//===----------------------------------------------------------------------===//
// Sizes whose products overflow int64 are refused, never wrapped
//===----------------------------------------------------------------------===//

// C = 2^61 + 4 with cp = 8: C*cp = 2^64 + 32 wraps to 32 in 64 bits.
constexpr int64_t kWrapsTo32 = (int64_t(1) << 61) + 4;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

/// The running example's graph input resized to 32 rows (what C*cp wraps
/// to), N = 6.
GraphStepInput wrappedCapacityInput() {
  GraphStepInput input = runningExampleInput(0);
  input.tokens.resize(32, 0);
  input.labels.resize(32, 0);
  input.positionIds.resize(32, 0);
  input.lossMask.resize(32, 0.0f);
  return input;
}

TEST(GraphStepDeathTest, CapacityOverflowIsAPreconditionNotAWrap) {
  const GraphStepInput input = wrappedCapacityInput();
  EXPECT_DEATH(megatronGraphStep(input, kWrapsTo32, 8, 6),
               "megatronGraphStep: C \\* cp = 2305843009213693956 \\* 8 "
               "overflows int64");
  EXPECT_DEATH(graphStepStatus(input, kWrapsTo32, 8, 6), "overflows int64");
}

TEST(GraphStep, PreconditionErrorReportsWithoutAborting) {
  Status problem =
      checkGraphStepPreconditions(wrappedCapacityInput(), kWrapsTo32, 8, 6);
  ASSERT_FALSE(problem);
  EXPECT_EQ(problem.message(), "C * cp = 2305843009213693956 * 8 overflows "
                               "int64, outside the int32 range of the cu "
                               "arrays");
  problem = checkGraphStepPreconditions(runningExampleInput(0), 1 << 30, 4, 6);
  ASSERT_FALSE(problem);
  EXPECT_EQ(problem.message(), "C * cp = 1073741824 * 4 = 4294967296, outside "
                               "the int32 range of the cu arrays");
  problem =
      checkGraphStepPreconditions(runningExampleInput(0), 8, 2, kInt64Max);
  ASSERT_FALSE(problem);
  EXPECT_NE(problem.message().find("N = 9223372036854775807 is outside the "
                                   "int32"),
            std::string::npos)
      << problem.message();
  EXPECT_TRUE(checkGraphStepPreconditions(runningExampleInput(0), 8, 2, 6));
  problem = checkGraphStepPreconditions(runningExampleInput(0), 7, 2, 6);
  ASSERT_FALSE(problem);
  EXPECT_NE(problem.message().find("must be even"), std::string::npos)
      << problem.message();
}

/// A random graph-step input in the static shapes of (C, cp, N): valid
/// metadata (zero-length, empty and full microbatches included) with
/// garbage past numSeqs+1, broken one way or another one time in two (too
/// many or negative sequences, an offset not divisible by 2*cp, valid
/// longer than padded, decreasing, past C*cp, a CP rank out of range, too
/// few rows given); the data rows only when `withData`.
GraphStepInput randomGraphStepInput(std::mt19937 &rng, int64_t c, int64_t cp,
                                    int64_t n, bool withData) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t granule = cp > 1 ? 2 * cp : 1, budget = c * cp;
  GraphStepInput input;
  const int64_t count = uniform(0, 4) == 0 ? n - 1 : uniform(0, n - 1);
  input.cuSeqlens = {0};
  input.cuSeqlensPadded = {0};
  for (int64_t s = 0; s < count; ++s) {
    const int64_t left = budget - input.cuSeqlensPadded.back();
    const int64_t padded =
        std::min(left, uniform(0, 2 * budget / std::max<int64_t>(count, 1))) /
        granule * granule;
    const int64_t valid = uniform(0, 3) == 0 ? padded : uniform(0, padded);
    input.cuSeqlens.push_back(input.cuSeqlens.back() + int32_t(valid));
    input.cuSeqlensPadded.push_back(input.cuSeqlensPadded.back() +
                                    int32_t(padded));
  }
  if (count > 0 && uniform(0, 3) == 0)
    input.cuSeqlensPadded.back() = int32_t(budget);
  while (int64_t(input.cuSeqlens.size()) < n + 1) {
    input.cuSeqlens.push_back(int32_t(uniform(-1000, 1000)));
    input.cuSeqlensPadded.push_back(int32_t(uniform(-1000, 1000)));
  }
  input.numSeqs = int32_t(count);
  input.cpRank = int32_t(uniform(0, cp - 1));
  const std::size_t last = std::size_t(count);
  if (uniform(0, 1))
    input.rowsGiven =
        uniform(0, 1) ? input.cuSeqlensPadded[last] : uniform(-1, budget);
  const int64_t breakage = uniform(0, 14);
  if (breakage == 0)
    input.numSeqs = int32_t(n + uniform(0, 2));
  else if (breakage == 1)
    input.numSeqs = int32_t(-uniform(1, 3));
  else if (breakage == 2 && count > 0)
    input.cuSeqlensPadded[1] += 1;
  else if (breakage == 3 && count > 0)
    input.cuSeqlens[1] = input.cuSeqlensPadded[1] + 3;
  else if (breakage == 4 && count > 1)
    std::swap(input.cuSeqlensPadded[1], input.cuSeqlensPadded[2]);
  else if (breakage == 5)
    input.cuSeqlensPadded[last] = int32_t(budget + granule);
  else if (breakage == 6)
    input.cpRank = int32_t(cp + uniform(0, 1));
  if (withData) {
    input.tokens = I64(std::size_t(budget), 7);
    input.labels = I64(std::size_t(budget), 8);
    input.positionIds = I64(std::size_t(budget), 9);
    input.lossMask = F32(std::size_t(budget), 1.0f);
  }
  return input;
}

/// graphStepMetadata is megatronGraphStep's metadata without the data: on
/// random inputs, valid and broken, every cp and both tail policies, the
/// same offsets, max_seqlen and status, with the data rows given to it or
/// not.
TEST(GraphStep, MetadataIsTheStepsWithoutTheData) {
  std::mt19937 rng(4711);
  int broken = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t cp = int64_t(1) << (trial % 4), n = 2 + trial % 7;
    const int64_t c = (trial % 5 == 0 ? 2 : 16) * (1 + trial % 3);
    GraphStepInput input = randomGraphStepInput(rng, c, cp, n, true);
    const int64_t granule = cp > 1 ? 2 * cp : 1;
    std::optional<int64_t> dummy;
    if (trial % 2)
      dummy = granule * (1 + trial % 5);
    const GraphStepOutput step = megatronGraphStep(input, c, cp, n, dummy);
    broken += step.status != 0;
    for (bool withData : {true, false}) {
      GraphStepInput given = input;
      if (!withData) {
        given.tokens.clear();
        given.labels.clear();
        given.positionIds.clear();
        given.lossMask.clear();
      }
      const GraphStepMetadata metadata =
          graphStepMetadata(given, c, cp, n, dummy);
      ASSERT_EQ(metadata.cuSeqlensPadded, step.cuSeqlensPadded)
          << "trial " << trial;
      ASSERT_EQ(metadata.cuSeqlens, step.cuSeqlens) << "trial " << trial;
      ASSERT_EQ(metadata.maxSeqlen, step.maxSeqlen) << "trial " << trial;
      ASSERT_EQ(metadata.status, step.status) << "trial " << trial;
    }
  }
  EXPECT_GT(broken, 500);
  EXPECT_LT(broken, 2500);
}

/// The metadata alone is linear in N: at C*cp = 2^31-1, the largest the
/// step takes, it makes no row (megatronGraphStep would make 2^31 of each
/// data key).
TEST(GraphStep, MetadataMakesNoRows) {
  GraphStepInput input;
  input.cuSeqlens = {0, 40, 100, 0, 0};
  input.cuSeqlensPadded = {0, 40, 100, 0, 0};
  input.numSeqs = 2;
  const int64_t rows = std::numeric_limits<int32_t>::max();
  GraphStepMetadata metadata = graphStepMetadata(input, rows, 1, 4);
  EXPECT_EQ(metadata.status, 0);
  EXPECT_EQ(metadata.cuSeqlensPadded,
            (I32{0, 40, 100, int32_t(rows), int32_t(rows)}));
  EXPECT_EQ(metadata.cuSeqlens, metadata.cuSeqlensPadded);
  EXPECT_EQ(metadata.maxSeqlen, rows);
  metadata = graphStepMetadata(input, (int64_t(1) << 30) - 2, 2, 4,
                               int64_t(1) << 29);
  EXPECT_EQ(metadata.cuSeqlensPadded,
            (I32{0, 40, 100, 100 + (1 << 29), int32_t(rows - 3)}));
  input.cuSeqlensPadded[2] = 98;  // not divisible by 2*cp = 4
  metadata = graphStepMetadata(input, (int64_t(1) << 30) - 2, 2, 4);
  EXPECT_EQ(metadata.status, StatusNotDivisibleBy2Cp | StatusValidExceedsPadded);
  EXPECT_EQ(metadata.cuSeqlensPadded,
            (I32{0, int32_t(rows - 3), int32_t(rows - 3), int32_t(rows - 3),
                 int32_t(rows - 3)}));
}

TEST(GraphStepDeathTest, MetadataPreconditionsAreTheStepsButTheData) {
  GraphStepInput input = runningExampleInput(0);
  input.tokens.clear();
  EXPECT_TRUE(checkGraphStepMetadataPreconditions(input, 8, 2, 6));
  EXPECT_FALSE(checkGraphStepPreconditions(input, 8, 2, 6));
  input.cuSeqlens.push_back(0);
  EXPECT_DEATH(graphStepMetadata(input, 8, 2, 6), "N\\+1 = 7");
  EXPECT_DEATH(graphStepMetadata(runningExampleInput(0), 7, 2, 6),
               "must be even");
  EXPECT_DEATH(graphStepMetadata(runningExampleInput(0), 1 << 30, 4, 6),
               "outside the int32 range");
}

TEST(PackStep, CapacityOverflowIsAnErrorNotAnAbort) {
  // Sizes consistent with C*cp wrapped to 32 and N = 6.
  PackStepInput input;
  input.tokenPool = {11, 12, 13, 21, 22};
  input.labelPool = {12, 13, 2, 22, 2};
  input.lossMaskPool = {1, 1, 1, 1, 1};
  input.sampleOffsets = {0, 3};
  input.sampleLengths = {3, 2};
  input.sampleIds = {0, 1, 0, 0, 0};
  input.numSeqs = 2;
  EXPECT_ERROR(packMicrobatchStep(input, kWrapsTo32, 8, 6),
               "packMicrobatchStep: C * cp = 2305843009213693956 * 8 "
               "overflows int64");
  EXPECT_ERROR(packMicrobatchStep(input, 1 << 30, 4, 6),
               "C * cp = 1073741824 * 4 = 4294967296, outside the int32");
  EXPECT_TRUE(packMicrobatchStep(input, 8, 2, 6));
}

TEST(S3, ProductsOverflowingInt64AreErrors) {
  // C*cp = 2^62 * 4 wrapped to 0: no sequence fitted, an empty first pack.
  EXPECT_ERROR(dpBalancedGroups({4}, int64_t(1) << 62, 4, 1),
               "the pack budget C * cp = 4611686018427387904 * 4 overflows "
               "int64");
  // dp * vppGroup = 2^32 * 2^32 wrapped to 0: a zero divisor.
  EXPECT_ERROR(dpBalancedGroups({}, 4, 1, int64_t(1) << 32, std::nullopt,
                                int64_t(1) << 32),
               "the pack multiple dp * vppGroup = 4294967296 * 4294967296 "
               "overflows int64");
  // dp * cp = 2^32 * 2^32: the ranks of a microbatch's group.
  EXPECT_ERROR(dpBalancedGroups({}, 1, int64_t(1) << 32, int64_t(1) << 32),
               "the rank count dp * cp = 4294967296 * 4294967296 overflows "
               "int64");
}

TEST(S12, UpperBoundOverflowIsAnError) {
  // C*cp wrapped to 0 gave one sequence per pack: 64 microbatches.
  EXPECT_ERROR(maxMicrobatchesUpperBound(64, 1, 4, int64_t(1) << 62, 2048),
               "the pack budget C * cp = 4611686018427387904 * 4 overflows");
  // dp * vppGroup wrapped to 0 divided by zero.
  EXPECT_ERROR(maxMicrobatchesUpperBound(64, int64_t(1) << 32, 1, 4096, 2048,
                                         int64_t(1) << 32),
               "dp * vppGroup = 4294967296 * 4294967296 overflows int64");
  // int64 max packs rounded up to a multiple of 2^62.
  EXPECT_ERROR(maxMicrobatchesUpperBound(kInt64Max, int64_t(1) << 62, 1, 1, 1),
               "rounded up to a multiple of dp * vppGroup = "
               "4611686018427387904 overflows int64");
  EXPECT_VALUE(maxMicrobatchesUpperBound(kInt64Max, 1, 1, 1, 1), kInt64Max);
}

TEST(S11DeathTest, CaptureSeedCapacityOverflowIsAPrecondition) {
  EXPECT_DEATH(graphCaptureCuSeed(kWrapsTo32, 8, 6), "C\\*cp in int32");
  EXPECT_DEATH(graphCaptureCuSeed(8, 2, kInt64Max), "N <= int32 max");
}

TEST(S10, TargetOverflowIsAnError) {
  // target * cp = (2^61 + 4) * 8 wrapped to 32.
  EXPECT_ERROR(metadataOnlyGlobalTarget(0, 8, std::nullopt, kWrapsTo32),
               "target * cp = 2305843009213693956 * 8 overflows int64");
  // round_up(int64 max - 1, 2^62) = 2^63.
  EXPECT_ERROR(metadataOnlyGlobalTarget(kInt64Max - 1, 1, int64_t(1) << 62,
                                        std::nullopt),
               "rounded up to the alignment 4611686018427387904 overflows");
  TailPaddingConfig config;
  config.cp = 1;
  config.alignment = int64_t(1) << 62;
  config.policy = TailPolicy::None;
  EXPECT_ERROR(padTailMetadata({0}, {0}, 0, kInt64Max - 1, config),
               "local length 9223372036854775806 rounded up to the alignment "
               "4611686018427387904 overflows int64");
  // A cp past int32 (2*cp would overflow the zigzag checks).
  config.cp = int64_t(1) << 62;
  config.alignment = 2;
  config.policy = TailPolicy::ExtendLast;
  EXPECT_ERROR(padTailMetadata({0}, {0}, 0, 0, config),
               "cp = 4611686018427387904 is outside the int32 range");
  config.cp = 2;
  config.maxNumSeqs = kInt64Max;
  EXPECT_ERROR(padTailMetadata({0}, {0}, 0, 0, config),
               "thd_max_packed_sequences = 9223372036854775807 is outside the "
               "int32 range");
}

TEST(S7, HugeCpIsRefusedNotWrapped) {
  // 2*cp = 2*(int64 max) wrapped to -2, which divides everything: the slice
  // came out empty.
  EXPECT_ERROR(cpPartitionIndices({0, 8}, 8, kInt64Max, 0),
               "total_tokens = 8 is not divisible by 2*cp (cp = "
               "9223372036854775807): it is smaller");
  EXPECT_ERROR(cpPartitionIndices({0, 8}, 8, int64_t(1) << 62, 1),
               "(cp = 4611686018427387904)");
  EXPECT_ERROR(cpPartitionIndices({0, 8}, 8, 8, 0), "(cp = 8)");
  EXPECT_TRUE(cpPartitionIndices({0, 8}, 8, 4, 0));
}

TEST(S1, GranularityOverflowIsAnErrorNotAWrap) {
  // 2 * (2^61 + 1) * 4 = 2^64 + 8 would wrap to a valid looking G = 8.
  EXPECT_ERROR(padGranularity((int64_t(1) << 61) + 1, 1, false, 4, true),
               "overflows int64");
  EXPECT_ERROR(padGranularity(int64_t(1) << 62, 1, false), "overflows int64");
  EXPECT_ERROR(padGranularity(2, int64_t(1) << 62, true), "overflows int64");
  // The multiple's product with the ranks, and the lcm, are checked too.
  EXPECT_ERROR(padGranularity(2, 1, false, 1, false, int64_t(1) << 62),
               "multiple = 4611686018427387904 overflows int64");
  EXPECT_ERROR(padGranularity(3, 1, false, 1, false, (int64_t(1) << 62) + 1),
               "overflows int64");
  EXPECT_ERROR(
      padGranularity(1, int64_t(1) << 40, true, 1, false, int64_t(1) << 30),
      "overflows int64");
  EXPECT_VALUE(padGranularity(2, 2, true, 3, true), int64_t(24));
}

TEST(S1, GranularityRefusesValuesBelowOne) {
  EXPECT_ERROR(padGranularity(2, 1, false, 1, false, 0),
               "multiple >= 1 (cp = 2, tp = 1, dp = 1, multiple = 0)");
  EXPECT_ERROR(padGranularity(2, 1, false, 1, false, -16), "multiple = -16");
  EXPECT_ERROR(padGranularity(0, 1, false), "(cp = 0,");
  EXPECT_ERROR(padGranularity(2, kInt64Min, true),
               "tp = " + std::to_string(kInt64Min));
  EXPECT_ERROR(padGranularity(2, 1, false, 0, true), "dp = 0");
}

TEST(S1, GoldenLowPrecisionMultiples) {
  // Every rank's share of every sequence is a multiple of m:
  // G = tpPad * lcm(cpPad, share * m).
  EXPECT_VALUE(padGranularity(1, 1, false, 1, false, 16), int64_t(16));
  EXPECT_VALUE(padGranularity(2, 1, false, 1, false, 16), int64_t(32));
  EXPECT_VALUE(padGranularity(2, 2, true, 1, false, 16), int64_t(64));
  EXPECT_VALUE(padGranularity(1, 4, true, 1, false, 128), int64_t(512));
  // The multiple already divides 2*cp: nothing more than cpPad.
  EXPECT_VALUE(padGranularity(4, 1, false, 1, false, 2), int64_t(8));
  // An odd multiple: lcm(6, 3 * 5) = 30, each rank's share 10 = 2 * 5.
  EXPECT_VALUE(padGranularity(3, 1, false, 1, false, 5), int64_t(30));
  // Dynamic CP: cpPad = 2*cp*dp = 8, share 4, lcm(8, 4 * 32) = 128.
  EXPECT_VALUE(padGranularity(2, 1, false, 2, true, 32), int64_t(128));
  // m = 1 is the granularity without a multiple.
  for (int64_t cp : {1, 2, 3, 8})
    for (int64_t tp : {1, 2, 4})
      for (bool sp : {false, true})
        for (bool dynamicCp : {false, true}) {
          auto plain = padGranularity(cp, tp, sp, 3, dynamicCp);
          auto unit = padGranularity(cp, tp, sp, 3, dynamicCp, 1);
          ASSERT_TRUE(plain && unit);
          EXPECT_EQ(*plain, *unit);
        }
  EXPECT_VALUE(alignLengths({3, 40, 0}, 32), (I32{32, 64, 0}));
}

TEST(S1, LowPrecisionMultipleEveryRankShareIsAMultiple) {
  // p / (share * tpPad) is the tokens one rank holds of a sequence of p.
  for (int64_t cp : {1, 2, 3, 4, 6})
    for (int64_t tp : {1, 2, 3})
      for (bool sp : {false, true})
        for (int64_t m : {1, 2, 5, 16, 32, 128}) {
          Result<int64_t> g = padGranularity(cp, tp, sp, 1, false, m);
          ASSERT_TRUE(g) << g.status().message();
          const int64_t share = cp > 1 ? cp : 1, tpPad = sp ? tp : 1;
          EXPECT_EQ(*g % (share * tpPad * m), 0) << cp << " " << tp << " " << m;
          if (cp > 1) {
            EXPECT_EQ(*g % (2 * cp), 0);
          }
          // And G is the smallest such: no proper divisor of G qualifies.
          for (int64_t d = 1; d < *g; ++d) {
            if (*g % d == 0 && d % tpPad == 0 &&
                (d / tpPad) % (cp > 1 ? 2 * cp : 1) == 0) {
              EXPECT_NE((d / tpPad) % (share * m), 0)
                  << "G " << *g << " d " << d;
            }
          }
        }
}

TEST(S1, LowPrecisionRecipes) {
  std::vector<std::pair<std::string, int64_t>> table;
  for (const LowPrecisionMultiple &entry : lowPrecisionMultiples())
    table.emplace_back(entry.recipe, entry.multiple);
  // megatron-core's get_fp8_align_size: 32 for MXFP8, 16 for every other
  // FP8 recipe; HybridEP's per-rank alignment: 64.
  EXPECT_EQ(table, (std::vector<std::pair<std::string, int64_t>>{
                       {"fp8", 16},
                       {"delayed", 16},
                       {"tensorwise", 16},
                       {"blockwise", 16},
                       {"custom", 16},
                       {"mxfp8", 32},
                       {"hybridep", 64}}));
  EXPECT_VALUE(lowPrecisionMultiple("mxfp8"), int64_t(32));
  EXPECT_ERROR(lowPrecisionMultiple("fp4"),
               "unknown low-precision recipe 'fp4'; the recipes are 'fp8', "
               "'delayed', 'tensorwise', 'blockwise', 'custom', 'mxfp8', "
               "'hybridep'");
}

TEST(S1, CapacityAlignmentIsOnTheRowsARankFeedsItsGemms) {
  // Graph mode: every CP rank holds C rows, C/tp under SP.
  EXPECT_VALUE(capacityRowMultiple(4, true, 32), int64_t(128));
  EXPECT_VALUE(capacityRowMultiple(4, false, 32), int64_t(32));
  EXPECT_VALUE(checkCapacityAlignment(8192, 4, true, 32), int64_t(128));
  EXPECT_VALUE(checkCapacityAlignment(16, 8, false, 16), int64_t(16));
  EXPECT_ERROR(checkCapacityAlignment(8200, 4, true, 32),
               "C = 8200 is not a multiple of m * tp = 32 * 4 = 128");
  EXPECT_ERROR(checkCapacityAlignment(8200, 4, true, 32),
               "the nearest C that is: 8192 or 8320");
  EXPECT_ERROR(checkCapacityAlignment(100, 1, false, 64),
               "C = 100 is not a multiple of m = 64");
  // Below the multiple: only the one above is offered, never 0.
  Result<int64_t> small = checkCapacityAlignment(16, 1, false, 64);
  ASSERT_FALSE(small);
  EXPECT_NE(small.status().message().find("the nearest C that is: 64"),
            std::string::npos)
      << small.status().message();
  EXPECT_EQ(small.status().message().find("0 or"), std::string::npos)
      << small.status().message();
  EXPECT_ERROR(capacityRowMultiple(0, true, 16), "tp and the multiple >= 1");
  EXPECT_ERROR(capacityRowMultiple(1 << 20, true, 1 << 20),
               "outside the int32 range");
  // For every C, the check holds exactly when each TP rank's share of the
  // rank's C rows is a multiple of m.
  for (int64_t tp : {1, 2, 4})
    for (bool sp : {false, true})
      for (int64_t m : {16, 32, 64})
        for (int64_t C = 1; C <= 600; ++C) {
          const int64_t tpPad = sp ? tp : 1;
          const bool holds = C % tpPad == 0 && (C / tpPad) % m == 0;
          EXPECT_EQ(bool(checkCapacityAlignment(C, tp, sp, m)), holds)
              << C << " " << tp << " " << sp << " " << m;
        }
}

TEST(S8, SeqIdxTotalOutsideInt32IsAnError) {
  EXPECT_ERROR(seqIdx({0, 5}, -1),
               "total_tokens = -1 is outside [0, int32 max]");
  // int64 min - 5 wrapped to a count of about 2^63 rows.
  EXPECT_ERROR(seqIdx({0, 5}, kInt64Min), "is outside [0, int32 max]");
}

TEST(S12, SlotsNeededRefusesInt64Min) {
  // -(int64 min) overflows: it named chunk int64 min, and the backward
  // counted as a forward of nothing.
  EXPECT_ERROR(graphSlotsNeeded({1, kInt64Min}),
               "order[1] = -9223372036854775808 is not a (1-based) chunk id");
}

//===----------------------------------------------------------------------===//
// Randomized properties
//===----------------------------------------------------------------------===//

TEST(Randomized, PaddingMaskAndPositionsMatchDefinition) {
  std::mt19937 rng(1234);
  for (int iteration = 0; iteration < 300; ++iteration) {
    const int n = std::uniform_int_distribution<int>(0, 6)(rng);
    I32 valid, padded;
    for (int i = 0; i < n; ++i) {
      padded.push_back(std::uniform_int_distribution<int>(0, 9)(rng));
      valid.push_back(
          std::uniform_int_distribution<int>(0, padded.back())(rng));
    }
    Result<PackMetadata> metadata = packMetadata(valid, padded);
    ASSERT_TRUE(metadata) << metadata.status().message();
    const I32 &cu = metadata->cuSeqlens, &cup = metadata->cuSeqlensPadded;
    Mask expectedMask;
    I64 expectedPositions;
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < padded[i]; ++k) {
        expectedMask.push_back(k >= valid[i]);
        expectedPositions.push_back(k >= valid[i] ? 0 : k);
      }
    EXPECT_VALUE(paddingMask(cu, cup), expectedMask);
    EXPECT_VALUE(positionIds(cu, cup), expectedPositions);
  }
}

TEST(Randomized, GraphStepMicrobatches) {
  std::mt19937 rng(20260822);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t cpChoices[] = {1, 2, 4, 8};
  for (int iteration = 0; iteration < 500; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    const int64_t cp = cpChoices[uniform(0, 3)];
    const int64_t granularity = cp > 1 ? 2 * cp : 1;
    const int64_t n = uniform(1, 12);
    const int64_t numSeqs = uniform(0, n - 1);
    I32 valid, padded;
    for (int64_t i = 0; i < numSeqs; ++i) {
      padded.push_back(static_cast<int32_t>(granularity * uniform(0, 6)));
      valid.push_back(static_cast<int32_t>(uniform(0, padded.back())));
    }
    Result<PackMetadata> metadata = packMetadata(valid, padded);
    ASSERT_TRUE(metadata) << metadata.status().message();
    const I32 &cu = metadata->cuSeqlens, &cup = metadata->cuSeqlensPadded;
    const int64_t total = cup.back();
    int64_t c = std::max<int64_t>(1, (total + cp - 1) / cp);
    if (cp > 1)
      c = roundUp(c, 2);
    c += (cp > 1 ? 2 : 1) * uniform(0, 3);
    const int64_t rows = c * cp;

    // The union of the CP slices is a permutation of [0, T).
    if (total > 0 || cp == 1) {
      I32 all;
      for (int64_t rank = 0; rank < cp; ++rank) {
        Result<I32> indices = cpPartitionIndices(cup, total, cp, rank);
        ASSERT_TRUE(indices) << indices.status().message();
        EXPECT_EQ(static_cast<int64_t>(indices->size()), total / cp);
        all.insert(all.end(), indices->begin(), indices->end());
      }
      std::sort(all.begin(), all.end());
      I32 expected(total);
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(all, expected);
    }

    // Build the graph input: row content identifies the global row.
    GraphStepInput input;
    input.tokens.assign(rows, 77);
    input.labels.assign(rows, 77);
    input.positionIds.assign(rows, 7);
    input.lossMask.assign(rows, 0.75f);
    for (int64_t i = 0; i < numSeqs; ++i)
      for (int64_t k = 0; k < padded[i]; ++k) {
        const int64_t row = cup[i] + k;
        const bool isValid = k < valid[i];
        input.tokens[row] = isValid ? 1000 + row : 99;
        input.labels[row] = isValid ? 5000 + row : 99;
        input.positionIds[row] = k;
        input.lossMask[row] = isValid ? 1.0f : 0.25f;
      }
    input.cuSeqlens = cu;
    input.cuSeqlensPadded = cup;
    for (int64_t i = numSeqs + 1; i <= n; ++i) {
      input.cuSeqlens.push_back(static_cast<int32_t>(uniform(-50, 50)));
      input.cuSeqlensPadded.push_back(static_cast<int32_t>(uniform(-50, 50)));
    }
    input.numSeqs = static_cast<int32_t>(numSeqs);

    // Expected global metadata.
    I32 expectedCup = cup, expectedCu = cu;
    if (total < rows) {
      expectedCup.push_back(static_cast<int32_t>(rows));
      expectedCu.push_back(static_cast<int32_t>(cu.back() + rows - total));
    }
    expectedCup.resize(n + 1, expectedCup.back());
    expectedCu.resize(n + 1, expectedCu.back());

    std::vector<int> seen(static_cast<std::size_t>(total), 0);
    int64_t validRows = 0;
    for (int64_t rank = 0; rank < cp; ++rank) {
      input.cpRank = static_cast<int32_t>(rank);
      GraphStepOutput out = megatronGraphStep(input, c, cp, n);
      ASSERT_EQ(out.status, 0);
      ASSERT_EQ(static_cast<int64_t>(out.tokens.size()), c);
      ASSERT_EQ(static_cast<int64_t>(out.paddingMask.size()), c);
      EXPECT_EQ(out.cuSeqlensPadded, expectedCup);
      EXPECT_EQ(out.cuSeqlens, expectedCu);
      EXPECT_EQ(out.maxSeqlen, rows);
      for (int64_t t = 0; t < c; ++t) {
        if (out.paddingMask[t]) {
          EXPECT_EQ(out.tokens[t], 0);
          EXPECT_EQ(out.labels[t], 0);
          EXPECT_EQ(out.positionIds[t], 0);
          EXPECT_EQ(out.lossMask[t], 0.0f);
          continue;
        }
        ++validRows;
        ASSERT_LT(t, total / cp) << "tail rows must be padding";
        const int64_t row = out.tokens[t] - 1000;
        ASSERT_GE(row, 0);
        ASSERT_LT(row, total);
        ++seen[row];
        EXPECT_EQ(out.labels[t], 5000 + row);
        EXPECT_EQ(out.lossMask[t], 1.0f);
        const int64_t s =
            std::upper_bound(cup.begin(), cup.end(), row) - cup.begin() - 1;
        EXPECT_EQ(out.positionIds[t], row - cup[s]);
      }
      // TE assigns the local tail rows to the dummy: with the padded
      // metadata the first T/cp indices are unchanged and the rest lie in
      // [T, C*cp).
      Result<I32> paddedIndices =
          cpPartitionIndices(expectedCup, rows, cp, rank);
      ASSERT_TRUE(paddedIndices) << paddedIndices.status().message();
      for (int64_t t = 0; t < c; ++t) {
        if (t < total / cp)
          continue;
        EXPECT_GE((*paddedIndices)[t], total);
        EXPECT_LT((*paddedIndices)[t], rows);
      }
    }
    EXPECT_EQ(validRows, cu.back());
    for (int64_t i = 0; i < numSeqs; ++i)
      for (int64_t k = 0; k < padded[i]; ++k)
        EXPECT_EQ(seen[cup[i] + k], k < valid[i] ? 1 : 0);
  }
}

} // namespace

TEST(GraphStep, RowsStatusGolden) {
  const std::vector<int32_t> cup = {0, 16, 32};
  EXPECT_EQ(rowsStatus(cup, 2, 20), StatusRowsNotGiven);
  EXPECT_EQ(rowsStatus(cup, 2, 32), 0);
  EXPECT_EQ(rowsStatus(cup, 2, 40), 0);
  // The count clamped into the array: 7 reads cup[2], -1 reads cup[0].
  EXPECT_EQ(rowsStatus(cup, 7, 31), StatusRowsNotGiven);
  EXPECT_EQ(rowsStatus(cup, -1, 0), 0);
  EXPECT_EQ(rowsStatus(cup, 1, -1), StatusRowsNotGiven);
  EXPECT_EQ(rowsStatus({}, 3, 0), 0);
}

// The golden vector of Reference.h and docs/semantics.md: with tailSlot,
// max_seqs sequences are valid only without a tail.
TEST(GraphStep, NumSeqsStatusGolden) {
  const std::vector<int32_t> full = {0, 4, 8, 16}, tail = {0, 4, 8, 12};
  EXPECT_EQ(numSeqsStatus(full, 3, 3, 16, true), 0);
  EXPECT_EQ(numSeqsStatus(tail, 3, 3, 16, true), StatusNumSeqsOutOfRange);
  EXPECT_EQ(numSeqsStatus(tail, 2, 3, 16, true), 0);
  EXPECT_EQ(numSeqsStatus(full, 4, 3, 16, true), StatusNumSeqsOutOfRange);
  EXPECT_EQ(numSeqsStatus(full, -1, 3, 16, true), StatusNumSeqsOutOfRange);
  EXPECT_EQ(numSeqsStatus(tail, 3, 3, 16, false), 0);
  // A total above max_tokens is StatusTotalExceedsCapacity's, not this one.
  const std::vector<int32_t> over = {0, 4, 8, 20};
  EXPECT_EQ(numSeqsStatus(over, 3, 3, 16, true), 0);
}

TEST(GraphStep, RowsNotGivenEmptiesTheMicrobatch) {
  // cup [0, 16, 32] with 20 rows given: flagged, and the outputs are those
  // of an empty microbatch; with all 32 rows the same input is valid.
  GraphStepInput input;
  input.tokens.assign(64, 7);
  input.labels.assign(64, 7);
  input.positionIds.assign(64, 1);
  input.lossMask.assign(64, 1.0f);
  input.cuSeqlens = {0, 16, 32, 0, 0, 0, 0, 0, 0};
  input.cuSeqlensPadded = input.cuSeqlens;
  input.numSeqs = 2;
  input.rowsGiven = 20;
  GraphStepOutput out = megatronGraphStep(input, 64, 1, 8);
  EXPECT_EQ(out.status, StatusRowsNotGiven);
  for (float weight : out.lossMask)
    EXPECT_EQ(weight, 0.0f);
  input.rowsGiven = 32;
  EXPECT_EQ(megatronGraphStep(input, 64, 1, 8).status, 0);
  input.rowsGiven.reset();
  EXPECT_EQ(megatronGraphStep(input, 64, 1, 8).status, 0);
}

TEST(StatusBits, DescribeNamesEveryBitOnce) {
  EXPECT_EQ(describeStatus(0), "ok");
  EXPECT_EQ(describeStatus(StatusNotMonotonic | StatusValidExceedsPadded),
            "not_monotonic|valid_exceeds_padded");
  EXPECT_EQ(describeStatus(StatusSampleOutOfRange | 0x800),
            "sample_out_of_range|unknown bits 0x800");
  int32_t all = 0;
  for (const StatusBitName &entry : kStatusBitNames) {
    // One bit each, none repeated.
    EXPECT_EQ(entry.bit & (entry.bit - 1), 0) << entry.name;
    EXPECT_EQ(all & entry.bit, 0) << entry.name;
    all |= entry.bit;
    EXPECT_EQ(describeStatus(entry.bit), entry.name);
  }
  EXPECT_EQ(all, 2047);
}
