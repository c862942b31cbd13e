//===- PackDifferentialTest.cpp - pack pipeline vs the reference ----------===//
//
// Differential tests of examples/pack_microbatch.mlir compiled for the host
// CPU (thdc::HostPipeline) against reference::packMicrobatchStep, the
// reference steps of reference/Reference.h composed exactly as the pipeline
// composes its ops (itself checked against megatronGraphStep on the packed
// buffer). Random pools of samples (zero-length samples, contiguous or with
// gaps, loss masks with zeros and fractions),
// random chosen ids (repeats allowed, garbage past num_seqs), num_seqs up to
// N-1 and totals up to exactly C*cp, cp in {1, 2, 4, 8}, every CP rank;
// every output element must match exactly. The BadData tests check the
// status bits of thd.validate and that a rejected microbatch yields the
// outputs of an empty one.
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"
#include "test/unit/DifferentialHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::reference;

namespace {
using thdc::testing::CompiledStep;
using thdc::testing::drawTotalUnits;
using thdc::testing::firstMismatch;
using thdc::testing::join;
using thdc::testing::kInt32Max;
using thdc::testing::kInt32Min;
using thdc::testing::uniform;

/// The parameters of examples/pack_microbatch.mlir.
struct PackConfig {
  int64_t C = 0;  ///< tokens per CP rank
  int64_t cp = 1; ///< CP size
  int64_t N = 0;  ///< sequence capacity, the dummy included
  int64_t P = 0;  ///< pool capacity in tokens
  int64_t S = 0;  ///< pool capacity in samples

  std::string str() const {
    std::ostringstream os;
    os << "C=" << C << " cp=" << cp << " N=" << N << " P=" << P << " S=" << S;
    return os.str();
  }
};

/// The example pipeline compiled for the host CPU for one configuration.
class CompiledPack {
public:
  /// Compiles `config`; null with `error` set on failure.
  static std::unique_ptr<CompiledPack> compile(const PackConfig &config,
                                               std::string &error) {
    std::string text =
        thdc::testing::readSourceFile("examples/pack_microbatch.mlir", error);
    if (text.empty())
      return nullptr;
    llvm::StringMap<int64_t> params{{"C", config.C},
                                    {"cp", config.cp},
                                    {"N", config.N},
                                    {"P", config.P},
                                    {"S", config.S}};
    std::unique_ptr<thdc::HostPipeline> pipeline =
        thdc::testing::compileForHost(text, "pack_microbatch.mlir", params,
                                      error);
    if (!pipeline) {
      error = "compiling for " + config.str() + ": " + error;
      return nullptr;
    }
    const thdc::testing::ExpectedBuffer inputs[] = {
        {"token_pool", false, "i64", config.P},
        {"label_pool", false, "i64", config.P},
        {"loss_mask_pool", false, "f32", config.P},
        {"sample_offsets", false, "i32", config.S},
        {"sample_lengths", false, "i32", config.S},
        {"sample_ids", false, "i32", config.N - 1},
        {"num_seqs", false, "i32", 1},
        {"cp_rank", false, "i32", 1},
    };
    std::unique_ptr<CompiledStep> step = CompiledStep::create(
        std::move(pipeline), inputs, config.C, config.N, error);
    if (!step) {
      error += " for " + config.str();
      return nullptr;
    }
    return std::unique_ptr<CompiledPack>(new CompiledPack(std::move(step)));
  }

  /// Runs one microbatch (CompiledStep::run).
  bool run(const PackStepInput &input, PackStepOutput &output,
           std::string &error) {
    in = input;
    return step->run({in.tokenPool.data(), in.labelPool.data(),
                      in.lossMaskPool.data(), in.sampleOffsets.data(),
                      in.sampleLengths.data(), in.sampleIds.data(), &in.numSeqs,
                      &in.cpRank},
                     output, error);
  }

private:
  explicit CompiledPack(std::unique_ptr<CompiledStep> step)
      : step(std::move(step)) {}

  std::unique_ptr<CompiledStep> step;
  /// A copy of the inputs (the code only reads them).
  PackStepInput in;
};

/// The reference of examples/pack_microbatch.mlir for `config`
/// (reference::packMicrobatchStep): fails where the reference steps refuse
/// the data (a negative length, int32 overflow).
Result<PackStepOutput> referencePack(const PackStepInput &input,
                                     const PackConfig &config) {
  return packMicrobatchStep(input, config.C, config.cp, config.N);
}

/// The outputs of an empty microbatch of `config`.
PackStepOutput emptyMicrobatchOutput(const PackConfig &config, int32_t status) {
  return thdc::testing::emptyMicrobatchOutput(config.C, config.cp, config.N,
                                              status);
}

/// The metadata of a microbatch, for failure messages.
std::string describe(const PackConfig &config, const PackStepInput &input) {
  std::ostringstream os;
  os << config.str() << ", num_seqs=" << input.numSeqs
     << ", cp_rank=" << input.cpRank << ", sample_ids=" << join(input.sampleIds)
     << ", sample_lengths=" << join(input.sampleLengths)
     << ", sample_offsets=" << join(input.sampleOffsets);
  return os.str();
}

/// The composition agrees with the reference's own graph step fed with the
/// packed buffer: a check of the test's reference, not of the compiler.
std::string graphStepMismatch(const PackStepInput &input,
                              const PackConfig &config,
                              const PackStepOutput &expected) {
  const int64_t C = config.C, cp = config.cp, N = config.N;
  const int64_t granularity = cp > 1 ? 2 * cp : 1;
  GraphStepInput step;
  step.tokens.assign(std::size_t(C * cp), -3);
  step.labels = step.positionIds = step.tokens;
  step.lossMask.assign(std::size_t(C * cp), 0.75f);
  step.cuSeqlens.assign(std::size_t(N + 1), 0);
  step.cuSeqlensPadded.assign(std::size_t(N + 1), 0);
  step.numSeqs = input.numSeqs;
  step.cpRank = input.cpRank;
  int64_t row = 0;
  for (int32_t i = 0; i < input.numSeqs; ++i) {
    const int32_t id = input.sampleIds[std::size_t(i)];
    const int32_t v = input.sampleLengths[std::size_t(id)];
    const int64_t p = roundUp(v, granularity);
    for (int64_t k = 0; k < p; ++k, ++row) {
      const std::size_t source = std::size_t(input.sampleOffsets[id] + k);
      step.tokens[row] = k < v ? input.tokenPool[source] : 99;
      step.labels[row] = k < v ? input.labelPool[source] : -100;
      step.positionIds[row] = k;
      step.lossMask[row] = k < v ? input.lossMaskPool[source] : 0.5f;
    }
    step.cuSeqlens[i + 1] = step.cuSeqlens[i] + v;
    step.cuSeqlensPadded[i + 1] = int32_t(row);
  }
  for (int64_t i = input.numSeqs + 1; i <= N; ++i) {
    step.cuSeqlens[i] = -1; // never read
    step.cuSeqlensPadded[i] = -1;
  }
  return firstMismatch(expected, megatronGraphStep(step, C, cp, N));
}

//===----------------------------------------------------------------------===//
// Random microbatches
//===----------------------------------------------------------------------===//

/// Which edge cases the generated microbatches covered (zero-length: some
/// chosen sample of length 0).
struct Coverage : thdc::testing::MicrobatchCoverage {
  int repeatedIds = 0;    ///< some sample chosen twice
  int gaps = 0;           ///< samples laid out with gaps
  int badTrailingIds = 0; ///< an id past num_seqs outside [0, S)
  int maskFractions = 0;  ///< a chosen sample with a loss mask in (0, 1)
};

/// A valid random microbatch for `config` with cp_rank 0: a pool of S
/// samples (zero-length ones included, laid out contiguously or with gaps,
/// in a random order), n <= N-1 chosen ids (repeats allowed) whose aligned
/// lengths sum to at most C*cp (often exactly), garbage ids past n (out of
/// range ones included) and garbage pool rows outside the samples. The
/// loss masks are 0.0 where the label is ignored, else mostly 1.0 with some
/// 0.0 and some fractions.
PackStepInput randomPackInput(std::mt19937 &rng, const PackConfig &config,
                              Coverage &coverage) {
  const int64_t C = config.C, cp = config.cp, N = config.N, P = config.P,
                S = config.S;
  const int64_t granularity = cp > 1 ? 2 * cp : 1;
  const int64_t units = C * cp / granularity;

  int64_t n;
  switch (uniform(rng, 0, 9)) {
  case 0:
    n = 0;
    break;
  case 1:
  case 2:
    n = N - 1;
    break;
  default:
    n = uniform(rng, 0, N - 1);
  }

  // Sequence i is the sample of slot slotOf[i]; a slot may be chosen twice.
  std::vector<int64_t> slotOf(n), multiplicity;
  for (int64_t i = 0; i < n; ++i) {
    const bool reuse =
        !multiplicity.empty() &&
        (int64_t(multiplicity.size()) == S || uniform(rng, 0, 4) == 0);
    if (reuse) {
      slotOf[i] = uniform(rng, 0, int64_t(multiplicity.size()) - 1);
      ++multiplicity[slotOf[i]];
    } else {
      slotOf[i] = int64_t(multiplicity.size());
      multiplicity.push_back(1);
    }
  }
  const int64_t slots = int64_t(multiplicity.size());

  const int64_t targetUnits = n > 0 ? drawTotalUnits(rng, units) : 0;

  // Aligned lengths (in units of G) of the slots: the units are shared out
  // among the slots that may be non-empty, each taking multiplicity * units.
  std::vector<int64_t> slotUnits(slots, 0);
  std::vector<bool> mayBeNonEmpty(slots);
  for (int64_t s = 0; s < slots; ++s)
    mayBeNonEmpty[s] = uniform(rng, 0, 5) != 0;
  for (int64_t remaining = targetUnits; remaining > 0;) {
    std::vector<int64_t> candidates;
    for (int64_t s = 0; s < slots; ++s)
      if (mayBeNonEmpty[s] && multiplicity[s] <= remaining)
        candidates.push_back(s);
    if (candidates.empty())
      for (int64_t s = 0; s < slots; ++s)
        if (multiplicity[s] <= remaining)
          candidates.push_back(s);
    if (candidates.empty())
      break;
    const int64_t s = candidates[uniform(rng, 0, candidates.size() - 1)];
    const int64_t most = remaining / multiplicity[s];
    const int64_t chunk =
        uniform(rng, 1, std::max<int64_t>(1, most / uniform(rng, 1, 3)));
    slotUnits[s] += chunk;
    remaining -= chunk * multiplicity[s];
  }

  // Sample lengths: aligning them gives exactly slotUnits * G.
  std::vector<int64_t> sampleOf(S);
  std::iota(sampleOf.begin(), sampleOf.end(), 0);
  std::shuffle(sampleOf.begin(), sampleOf.end(), rng);
  PackStepInput input;
  input.sampleLengths.assign(S, 0);
  input.sampleOffsets.assign(S, 0);
  const bool exactLengths = uniform(rng, 0, 3) == 0;
  int64_t used = 0;
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t p = slotUnits[s] * granularity;
    const int64_t v =
        p == 0 || exactLengths ? p : uniform(rng, p - granularity + 1, p);
    input.sampleLengths[sampleOf[s]] = int32_t(v);
    used += v;
  }
  // The other samples, never chosen, take some of the room left.
  int64_t room = P - used;
  for (int64_t s = slots; s < S; ++s) {
    const int64_t length =
        uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 0, std::min(room, 2 * C));
    input.sampleLengths[sampleOf[s]] = int32_t(length);
    room -= length;
  }

  // Layout: samples in a random order, contiguous or with gaps.
  std::vector<int64_t> order(S);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const bool withGaps = uniform(rng, 0, 1) == 0 && room > 0;
  input.tokenPool.resize(P);
  input.labelPool.resize(P);
  input.lossMaskPool.resize(P);
  for (int64_t row = 0; row < P; ++row) {
    input.tokenPool[row] = uniform(rng, std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max());
    input.labelPool[row] = -7;
    input.lossMaskPool[row] = -2.5f;
  }
  std::vector<bool> chosen(S, false), fraction(S, false);
  for (int64_t s = 0; s < slots; ++s)
    chosen[sampleOf[s]] = true;
  int64_t next = 0;
  for (int64_t sample : order) {
    if (withGaps) {
      const int64_t gap = uniform(rng, 0, std::min<int64_t>(room, 5));
      next += gap;
      room -= gap;
    }
    input.sampleOffsets[sample] = int32_t(next);
    for (int64_t k = 0; k < input.sampleLengths[sample]; ++k) {
      input.tokenPool[next + k] = uniform(rng, 1, 151935);
      input.labelPool[next + k] =
          uniform(rng, 0, 9) == 0 ? -100 : uniform(rng, 1, 151935);
      const int64_t weight = uniform(rng, 0, 7);
      float mask = 1.0f;
      if (input.labelPool[next + k] == -100 || weight == 0)
        mask = 0.0f;
      else if (weight == 1)
        mask = float(uniform(rng, 1, 1023)) / 1024.0f;
      input.lossMaskPool[next + k] = mask;
      fraction[sample] = fraction[sample] || (mask > 0.0f && mask < 1.0f);
    }
    next += input.sampleLengths[sample];
  }

  // Ids: the chosen ones, then garbage that must be ignored.
  input.sampleIds.assign(N - 1, 0);
  for (int64_t i = 0; i < n; ++i)
    input.sampleIds[i] = int32_t(sampleOf[slotOf[i]]);
  const int64_t garbageMode = uniform(rng, 0, 3);
  bool badTrailingId = false;
  for (int64_t i = n; i < N - 1; ++i) {
    int32_t id;
    switch (garbageMode) {
    case 0:
      id = -1;
      break;
    case 1:
      id = int32_t(uniform(rng, -3 * S, 3 * S));
      break;
    case 2:
      id = i % 2 ? kInt32Max : kInt32Min;
      break;
    default:
      id = int32_t(uniform(rng, 0, S - 1)); // in range, still ignored
    }
    input.sampleIds[i] = id;
    badTrailingId |= id < 0 || id >= S;
  }
  input.numSeqs = int32_t(n);
  input.cpRank = 0;

  int64_t total = 0;
  bool zeroLength = false, maskFraction = false;
  for (int64_t i = 0; i < n; ++i) {
    total += slotUnits[slotOf[i]] * granularity;
    zeroLength |= slotUnits[slotOf[i]] == 0;
    maskFraction |= fraction[sampleOf[slotOf[i]]];
  }
  coverage.count(n, N, total, C * cp, zeroLength);
  coverage.repeatedIds += slots < n;
  coverage.gaps += withGaps;
  coverage.badTrailingIds += badTrailingId;
  coverage.maskFractions += maskFraction;
  return input;
}

/// Compares the compiled pipeline with the reference on `count` random
/// microbatches of `config`, every CP rank of each. Returns false after the
/// first mismatch (reported as a test failure).
bool differential(const PackConfig &config, int count, uint32_t seed,
                  Coverage &coverage) {
  std::string error;
  std::unique_ptr<CompiledPack> compiled = CompiledPack::compile(config, error);
  if (!compiled) {
    ADD_FAILURE() << error;
    return false;
  }
  thdc::testing::StepDifferential<PackStepInput> suite;
  suite.generate = [&](std::mt19937 &rng) {
    return randomPackInput(rng, config, coverage);
  };
  suite.reference = [&](const PackStepInput &input) {
    return referencePack(input, config);
  };
  suite.checkReference = [&](const PackStepInput &input,
                             const PackStepOutput &expected) {
    return graphStepMismatch(input, config, expected);
  };
  suite.run = [&](const PackStepInput &input, PackStepOutput &output,
                  std::string &error) {
    return compiled->run(input, output, error);
  };
  suite.describe = [&](const PackStepInput &input) {
    return describe(config, input);
  };
  return thdc::testing::compareRandomMicrobatches(suite, count, seed, config.cp,
                                                  coverage.rankRuns);
}

/// Runs the differential comparison for one CP size over several pool and
/// sequence capacities.
void runDifferentialSuite(int64_t cp) {
  struct Shape {
    int64_t C, N;
    int64_t extraPool; ///< P = C*cp + extraPool
    int64_t S;
    int count;
  };
  const Shape shapes[] = {
      {8, 2, 0, 1, 30},    // one sequence at most; pool exactly C*cp
      {16, 4, 13, 2, 40},  // fewer samples than sequences: repeats forced
      {16, 8, 40, 16, 40}, // a pool of many short samples
      {24, 33, 100, 40, 30}, {256, 17, 300, 64, 12}, {1024, 9, 2000, 12, 6},
  };
  Coverage coverage;
  uint32_t seed = 0x9ac40000u + uint32_t(cp);
  for (const Shape &shape : shapes) {
    const PackConfig config{shape.C, cp, shape.N,
                            shape.C * cp + shape.extraPool, shape.S};
    if (!differential(config, shape.count, seed++, coverage))
      return;
  }
  std::printf("[pack differential] cp=%lld: %s, repeated ids %d, gaps %d, "
              "bad trailing ids %d, loss-mask fractions %d)\n",
              (long long)cp, coverage.summary().c_str(), coverage.repeatedIds,
              coverage.gaps, coverage.badTrailingIds, coverage.maskFractions);
  coverage.expectEachCase();
  EXPECT_GT(coverage.repeatedIds, 0);
  EXPECT_GT(coverage.gaps, 0);
  EXPECT_GT(coverage.badTrailingIds, 0);
  EXPECT_GT(coverage.maskFractions, 0);
}

TEST(PackDifferential, Zigzag_cp1) { runDifferentialSuite(1); }
TEST(PackDifferential, Zigzag_cp2) { runDifferentialSuite(2); }
TEST(PackDifferential, Zigzag_cp4) { runDifferentialSuite(4); }
TEST(PackDifferential, Zigzag_cp8) { runDifferentialSuite(8); }

//===----------------------------------------------------------------------===//
// Golden vectors and bad data
//===----------------------------------------------------------------------===//

/// The example's default parameters: C = 8, cp = 2, N = 6, P = 64, S = 8.
class PackBadData : public thdc::testing::SharedPipelineTest<CompiledPack> {
protected:
  static constexpr PackConfig config{8, 2, 6, 64, 8};

  static void SetUpTestSuite() {
    compileShared([](std::string &error) {
      return CompiledPack::compile(config, error);
    });
  }

  /// The running example of docs/semantics.md A = [11,12,13], B = [21,22], C =
  /// [31,32,33,34] (labels +100) stored out of order with gaps (B at 0, A at
  /// 5, C at 20), five more samples of lengths 0, 1, 5, 8, 2, loss masks
  /// all 1.0, and the ids of A, B, C chosen, then garbage ids.
  static PackStepInput spec() {
    PackStepInput input;
    input.tokenPool.assign(config.P, -1);
    input.labelPool.assign(config.P, -1);
    input.lossMaskPool.assign(config.P, -1.0f);
    input.sampleLengths = {3, 2, 4, 0, 1, 5, 8, 2};
    input.sampleOffsets = {5, 0, 20, 30, 30, 31, 36, 44};
    for (int64_t s = 0; s < config.S; ++s)
      for (int64_t k = 0; k < input.sampleLengths[s]; ++k) {
        input.tokenPool[input.sampleOffsets[s] + k] = 10 * (s + 1) + k + 1;
        input.labelPool[input.sampleOffsets[s] + k] = 10 * (s + 1) + k + 101;
        input.lossMaskPool[input.sampleOffsets[s] + k] = 1.0f;
      }
    input.sampleIds = {0, 1, 2, -1, 99};
    input.numSeqs = 3;
    input.cpRank = 0;
    return input;
  }

  static PackStepOutput run(const PackStepInput &input) {
    PackStepOutput output;
    std::string error;
    EXPECT_TRUE(compiled->run(input, output, error)) << error;
    return output;
  }

  /// Checks the status bits and the empty-microbatch outputs of `input`,
  /// and, where the reference steps accept the data, the composition.
  static void expectEmptyMicrobatch(const PackStepInput &input,
                                    int32_t expectedStatus) {
    const PackStepOutput actual = run(input);
    std::string mismatch =
        firstMismatch(actual, emptyMicrobatchOutput(config, expectedStatus));
    EXPECT_TRUE(mismatch.empty())
        << "not the empty-microbatch outputs: " << mismatch << "; "
        << describe(config, input);
    Result<PackStepOutput> reference = referencePack(input, config);
    if (reference) {
      mismatch = firstMismatch(actual, *reference);
      EXPECT_TRUE(mismatch.empty())
          << "differs from the reference: " << mismatch << "; "
          << describe(config, input);
    }
  }

  /// Checks `actual`, the outputs of `input`, against the reference.
  static void expectReference(const PackStepOutput &actual,
                              const PackStepInput &input) {
    Result<PackStepOutput> reference = referencePack(input, config);
    ASSERT_TRUE(reference) << reference.status().message();
    std::string mismatch = firstMismatch(actual, *reference);
    EXPECT_TRUE(mismatch.empty()) << mismatch;
  }
};

// Golden: S10 "graph: cp=2, target 8, N=6" from a pool.
TEST_F(PackBadData, SpecExampleBothRanks) {
  PackStepInput input = spec();
  PackStepOutput rank0 = run(input);
  EXPECT_EQ(rank0.status, 0);
  EXPECT_EQ(rank0.tokens, (std::vector<int64_t>{11, 0, 21, 0, 31, 34, 0, 0}));
  EXPECT_EQ(rank0.labels,
            (std::vector<int64_t>{111, 0, 121, 0, 131, 134, 0, 0}));
  EXPECT_EQ(rank0.positionIds, (std::vector<int64_t>{0, 0, 0, 0, 0, 3, 0, 0}));
  EXPECT_EQ(rank0.lossMask, (std::vector<float>{1, 0, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(rank0.paddingMask, (std::vector<uint8_t>{0, 1, 0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(rank0.cuSeqlensPadded,
            (std::vector<int32_t>{0, 4, 8, 12, 16, 16, 16}));
  EXPECT_EQ(rank0.cuSeqlens, (std::vector<int32_t>{0, 3, 5, 9, 13, 13, 13}));
  EXPECT_EQ(rank0.maxSeqlen, 16);

  input.cpRank = 1;
  PackStepOutput rank1 = run(input);
  EXPECT_EQ(rank1.status, 0);
  EXPECT_EQ(rank1.tokens, (std::vector<int64_t>{12, 13, 22, 0, 32, 33, 0, 0}));
  EXPECT_EQ(rank1.positionIds, (std::vector<int64_t>{1, 2, 1, 0, 1, 2, 0, 0}));
  EXPECT_EQ(rank1.lossMask, (std::vector<float>{1, 1, 1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(rank1.paddingMask, (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(rank1.cuSeqlensPadded, rank0.cuSeqlensPadded);
  EXPECT_EQ(rank1.cuSeqlens, rank0.cuSeqlens);

  for (int32_t rank : {0, 1}) {
    input.cpRank = rank;
    expectReference(rank == 0 ? rank0 : rank1, input);
  }
}

// The loss mask is packed from its pool, 0.0 on padding rows and in the
// tail, and sliced like the tokens: zeros and fractions pass unchanged.
TEST_F(PackBadData, LossMaskFromThePool) {
  PackStepInput input = spec();
  const float a[] = {1.0f, 0.0f, 0.5f}, b[] = {0.25f, 1.0f},
              c[] = {1.0f, 1.0f, 0.0f, 0.125f};
  std::copy(std::begin(a), std::end(a), input.lossMaskPool.begin() + 5);
  std::copy(std::begin(b), std::end(b), input.lossMaskPool.begin() + 0);
  std::copy(std::begin(c), std::end(c), input.lossMaskPool.begin() + 20);
  const std::vector<float> expected[] = {
      {1.0f, 0.0f, 0.25f, 0.0f, 1.0f, 0.125f, 0.0f, 0.0f},
      {0.0f, 0.5f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f}};
  for (int32_t rank : {0, 1}) {
    input.cpRank = rank;
    const PackStepOutput actual = run(input);
    EXPECT_EQ(actual.status, 0);
    EXPECT_EQ(actual.lossMask, expected[rank]) << "rank " << rank;
    expectReference(actual, input);
  }
}

// Exactly C*cp = 16 tokens is valid: A, C, C, A align to 4 + 4 + 4 + 4.
TEST_F(PackBadData, TotalAtCapacityIsValid) {
  PackStepInput input = spec();
  input.sampleIds = {0, 2, 2, 0, kInt32Min};
  input.numSeqs = 4;
  for (int32_t rank : {0, 1}) {
    input.cpRank = rank;
    PackStepOutput actual = run(input);
    EXPECT_EQ(actual.status, 0);
    EXPECT_EQ(actual.cuSeqlensPadded,
              (std::vector<int32_t>{0, 4, 8, 12, 16, 16, 16}));
    EXPECT_EQ(actual.cuSeqlens,
              (std::vector<int32_t>{0, 3, 7, 11, 14, 14, 14}));
    expectReference(actual, input);
  }
}

TEST_F(PackBadData, NumSeqsAboveCapacity) {
  PackStepInput input = spec();
  input.sampleIds = {0, 1, 3, 4, 7}; // aligned 4 + 4 + 0 + 4 + 4 = 16 fits
  // N leaves no room for the dummy.
  for (int32_t numSeqs :
       {int32_t(config.N), int32_t(config.N + 1), kInt32Max}) {
    input.numSeqs = numSeqs;
    expectEmptyMicrobatch(input, StatusNumSeqsOutOfRange);
  }
}

TEST_F(PackBadData, NumSeqsNegative) {
  PackStepInput input = spec();
  for (int32_t numSeqs : {-1, kInt32Min}) {
    input.numSeqs = numSeqs;
    expectEmptyMicrobatch(input, StatusNumSeqsOutOfRange);
  }
}

TEST_F(PackBadData, TooManyTokens) {
  PackStepInput input = spec();
  input.sampleIds = {0, 1, 2, 5, 99}; // aligned 4 + 4 + 4 + 8 = 20 > 16
  input.numSeqs = 4;
  expectEmptyMicrobatch(input, StatusTotalExceedsCapacity);
  input.sampleIds = {6, 4, -1, -1, -1}; // aligned 8 + 4 = 12 fits
  input.numSeqs = 2;
  EXPECT_EQ(run(input).status, 0);
  input.sampleLengths[6] = 17; // one sample longer than C*cp
  input.numSeqs = 1;
  expectEmptyMicrobatch(input, StatusTotalExceedsCapacity);
  input.cpRank = 1;
  expectEmptyMicrobatch(input, StatusTotalExceedsCapacity);
}

TEST_F(PackBadData, CpRankOutOfRange) {
  PackStepInput input = spec();
  for (int32_t cpRank : {int32_t(config.cp), -1, kInt32Max}) {
    input.cpRank = cpRank;
    expectEmptyMicrobatch(input, StatusCpRankOutOfRange);
  }
}

TEST_F(PackBadData, SeveralFaults) {
  PackStepInput input = spec();
  input.sampleIds = {5, 6, 0, 1, 2}; // aligned 8 + 8 + 4 + 4 + 4 = 28 > 16
  input.numSeqs = config.N;
  input.cpRank = int32_t(config.cp);
  expectEmptyMicrobatch(input, StatusNumSeqsOutOfRange |
                                   StatusTotalExceedsCapacity |
                                   StatusCpRankOutOfRange);
}

// A negative sample length makes cu_seqlens decrease (bit 8); the reference
// steps refuse negative lengths, so only the literal outputs are checked.
TEST_F(PackBadData, NegativeSampleLength) {
  PackStepInput input = spec();
  for (int32_t length : {-1, -4, -5, kInt32Min}) {
    input.sampleLengths[1] = length;
    expectEmptyMicrobatch(input, StatusNotMonotonic | StatusSampleOutOfRange);
  }
}

// Lengths near INT32_MAX overflow int32 when aligned or summed; the wrapped
// arrays decrease, so the microbatch is rejected rather than read out of
// bounds. The exact bits depend on how the values wrapped.
TEST_F(PackBadData, OverflowingSampleLengthsAreRejected) {
  PackStepInput input = spec();
  for (int32_t length : {kInt32Max, kInt32Max - 2, kInt32Max / 2 + 1}) {
    input.sampleLengths = {length, length, length, 0, 1, 5, 8, 2};
    for (int32_t numSeqs : {1, 2, 3}) {
      input.numSeqs = numSeqs;
      const PackStepOutput actual = run(input);
      EXPECT_NE(actual.status, 0) << describe(config, input);
      EXPECT_NE(actual.status, CompiledStep::kPoison32);
      std::string mismatch =
          firstMismatch(actual, emptyMicrobatchOutput(config, actual.status));
      EXPECT_TRUE(mismatch.empty())
          << mismatch << "; " << describe(config, input);
    }
  }
}

// A chosen id outside [0, S) must not crash. The compiled code clamps it
// into [0, S-1] (thd.gather clamps ids into the values; thd.pack clamps its
// offset loads and pool reads likewise): with the running example of
// docs/semantics.md, id -1 or INT32_MIN reads sample 0 (A) and id S or
// INT32_MAX sample S-1 (length 2), with status 0. The reference steps refuse
// such ids, so only the absence of a crash and a fully written output are
// asserted. Ids outside the pool's samples used to be clamped with status 0, so
// rows came from another sample and nobody was told; now they are a status bit
// and an empty microbatch.
TEST_F(PackBadData, ChosenIdOutOfRangeIsAStatusBit) {
  for (int32_t badId : {-1, int32_t(config.S), kInt32Min, kInt32Max}) {
    for (int32_t position : {0, 2}) {
      PackStepInput input = spec();
      input.sampleIds[position] = badId;
      const PackStepOutput actual = run(input);
      EXPECT_TRUE(actual.status & StatusSampleOutOfRange)
          << "status " << actual.status << "; " << describe(config, input);
      std::string mismatch =
          firstMismatch(actual, emptyMicrobatchOutput(config, actual.status));
      EXPECT_TRUE(mismatch.empty()) << mismatch;
      expectReference(actual, input);
    }
  }
}

// A chosen sample whose rows leave the pool (offset past it, or offset +
// length beyond it, or a negative offset) is refused the same way.
TEST_F(PackBadData, SampleRowsOutsideThePoolAreAStatusBit) {
  for (int32_t offset :
       {int32_t(config.P) - 1, int32_t(config.P), -1, kInt32Max, kInt32Min}) {
    PackStepInput input = spec();
    input.sampleOffsets[2] = offset; // the third chosen sample, 4 rows long
    expectEmptyMicrobatch(input, StatusSampleOutOfRange);
  }
  // A sample that is not chosen may point anywhere.
  PackStepInput input = spec();
  input.sampleOffsets[7] = kInt32Max;
  const PackStepOutput actual = run(input);
  EXPECT_EQ(actual.status, 0);
}

} // namespace

namespace {

// The reference refuses, with a message, the configurations and buffer
// sizes no compiled pipeline can have.
TEST(PackReference, RefusesShapesThePipelineCannotHave) {
  PackStepInput input;
  input.tokenPool.assign(16, 0);
  input.labelPool.assign(16, 0);
  input.lossMaskPool.assign(16, 1.0f);
  input.sampleOffsets = {0, 4};
  input.sampleLengths = {3, 4};
  input.sampleIds = {1, 0, 0, 0, 0};
  input.numSeqs = 2;
  ASSERT_TRUE(packMicrobatchStep(input, 8, 2, 6));
  auto refused = [](const PackStepInput &in, int64_t c, int64_t cp, int64_t n,
                    const char *expected) {
    Result<PackStepOutput> result = packMicrobatchStep(in, c, cp, n);
    ASSERT_FALSE(result) << "accepted; expected: " << expected;
    EXPECT_NE(result.status().message().find(expected), std::string::npos)
        << result.status().message();
  };
  refused(input, 0, 2, 6, "needs C >= 1, cp >= 1 and N >= 1");
  refused(input, 7, 2, 6, "C = 7 must be even");
  refused(input, 8, 2, 5, "sample_ids has 5 entries; it must have N-1 = 4");
  PackStepInput shortMask = input;
  shortMask.lossMaskPool.pop_back();
  refused(shortMask, 8, 2, 6,
          "token_pool/label_pool/loss_mask_pool have "
          "16/16/15 rows");
  PackStepInput noSamples = input;
  noSamples.sampleOffsets.clear();
  noSamples.sampleLengths.clear();
  refused(noSamples, 8, 2, 6, "both must have the pool's S >= 1 entries");
}

} // namespace
