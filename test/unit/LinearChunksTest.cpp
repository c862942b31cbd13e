//===- LinearChunksTest.cpp - S15 linear-attention chunk metadata ---------===//
//
// The golden vectors of docs/semantics.md S15, the errors, and randomized
// properties: every row of the chunk indices is the chunk its offsets name,
// the capacity ceil(rows/BT) + N holds every cu array over at most `rows`
// rows and leaves at least one sentinel row (fla's own bound is one less).
//
//===----------------------------------------------------------------------===//

#include "reference/LinearChunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::reference;

namespace {

using I32 = std::vector<int32_t>;

/// Flattened (sequence, chunk) pairs.
I32 pairs(std::initializer_list<std::pair<int32_t, int32_t>> rows) {
  I32 flat;
  for (auto [i, t] : rows) {
    flat.push_back(i);
    flat.push_back(t);
  }
  return flat;
}

void expectError(const Result<LinearChunks> &result,
                 const std::string &substring) {
  ASSERT_FALSE(result) << "expected an error naming: " << substring;
  EXPECT_NE(result.status().message().find(substring), std::string::npos)
      << "error was: " << result.status().message();
}

} // namespace

TEST(S15, GoldenMixedLengthsWithZeroLengthTail) {
  auto out = linearChunks({0, 5, 64, 200, 200, 200}, 64, 8);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(out->chunkIndices, pairs({{0, 0}, {1, 0}, {2, 0}, {2, 1}, {2, 2},
                                      {4, 0}, {4, 0}, {4, 0}}));
  EXPECT_EQ(out->chunkOffsets, (I32{0, 1, 2, 5, 5, 5}));
  EXPECT_EQ(out->chunkCount, 5);
}

TEST(S15, GoldenStepWithDummyTail) {
  // The step's cu_seqlens_padded for C*cp = 16, N = 4: two real sequences
  // of 6 and 4 rows, the dummy over the last 6, one zero-length entry. BT 4:
  // capacity ceil(16/4) + 4 = 8.
  EXPECT_EQ(linearChunkCapacity(16, 4, 4), 8);
  auto out = linearChunks({0, 6, 10, 16, 16}, 4, 8);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(out->chunkIndices, pairs({{0, 0}, {0, 1}, {1, 0}, {2, 0}, {2, 1},
                                      {3, 0}, {3, 0}, {3, 0}}));
  EXPECT_EQ(out->chunkOffsets, (I32{0, 2, 3, 5, 5}));
  EXPECT_EQ(out->chunkCount, 5);
}

TEST(S15, GoldenLastSequenceFullGivesAChunkPastItsEnd) {
  // No zero-length entry: the sentinel is the chunk after the last one of
  // the last sequence, which holds no row.
  auto out = linearChunks({0, 3, 8}, 4, linearChunkCapacity(8, 2, 4));
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(out->chunkIndices,
            pairs({{0, 0}, {1, 0}, {1, 1}, {1, 2}}));
  EXPECT_EQ(out->chunkOffsets, (I32{0, 1, 3}));
  EXPECT_EQ(out->chunkCount, 3);
}

TEST(S15, GoldenEmptiedMicrobatchIsTheDummyAlone) {
  // The step empties an invalid microbatch to one dummy over every row.
  auto out = linearChunks({0, 8, 8, 8}, 4, linearChunkCapacity(8, 3, 4));
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(out->chunkIndices,
            pairs({{0, 0}, {0, 1}, {2, 0}, {2, 0}, {2, 0}}));
  EXPECT_EQ(out->chunkOffsets, (I32{0, 2, 2, 2}));
}

TEST(S15, Errors) {
  expectError(linearChunks({0, 4}, 48, 4), "BT = 48 is not a power of two");
  expectError(linearChunks({0, 4}, 0, 4), "BT = 0 is not a power of two");
  expectError(linearChunks({0}, 4, 4), "it needs N+1 >= 2");
  expectError(linearChunks({1, 4}, 4, 4), "cu[0] = 1 must be 0");
  expectError(linearChunks({0, 4, 3}, 4, 4), "cu decreases");
  expectError(linearChunks({0, 9, 9}, 4, 2),
              "more than the 2 rows of the chunk capacity");
  expectError(linearChunks({0, 4}, 4, int64_t(1) << 31),
              "outside [0, int32 max / 2]");
}

TEST(S15, RandomizedRowsNameTheirChunksAndTheCapacityHolds) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t chunkSize = int64_t(1) << (rng() % 8);
    const int64_t rows = rng() % 600;
    const int64_t n = 1 + rng() % 12;
    // n sequences over at most `rows` rows, zero lengths included.
    I32 cu{0};
    std::vector<int64_t> cuts;
    for (int64_t i = 0; i < n; ++i)
      cuts.push_back(rows ? rng() % (rows + 1) : 0);
    std::sort(cuts.begin(), cuts.end());
    for (int64_t cut : cuts)
      cu.push_back(int32_t(cut));
    const int64_t capacity = linearChunkCapacity(rows, n, chunkSize);
    auto out = linearChunks(cu, chunkSize, capacity);
    ASSERT_TRUE(out) << out.status().message();
    ASSERT_EQ(int64_t(out->chunkIndices.size()), 2 * capacity);
    // fla's own bound (ceil(T/BT) + N - 1) holds: one sentinel row at least.
    EXPECT_LT(out->chunkCount, capacity);
    for (int64_t r = 0; r < capacity; ++r) {
      const int32_t i = out->chunkIndices[2 * r], t = out->chunkIndices[2 * r + 1];
      ASSERT_GE(i, 0);
      ASSERT_LT(i, n);
      const int64_t length = int64_t(cu[i + 1]) - cu[i];
      const int64_t chunks = (length + chunkSize - 1) / chunkSize;
      if (r < out->chunkCount) {
        // Row r is chunk r - offsets[i] of sequence i, which it lies in.
        EXPECT_LE(out->chunkOffsets[i], r);
        EXPECT_LT(r, out->chunkOffsets[i + 1]);
        EXPECT_EQ(t, r - out->chunkOffsets[i]);
        EXPECT_LT(t * chunkSize, length);
      } else {
        // The sentinel: the last sequence, a chunk holding none of its rows.
        EXPECT_EQ(i, n - 1);
        EXPECT_EQ(t, chunks);
        EXPECT_GE(t * chunkSize, length);
      }
    }
  }
}
