//===- DifferentialTest.cpp - compiled pipeline vs the reference ----------===//
//
// Differential tests of examples/megatron_graph_step.mlir compiled for the
// host CPU (thdc::HostPipeline) against the reference semantics
// (reference/Reference.h): randomized microbatches over cp in {1, 2, 4, 8},
// the three tail policies (extend_last without CP: see its tests), small
// and large capacities, zero-length
// sequences, empty batches and batches at exactly full capacity, every CP
// rank of each microbatch; every output element must match exactly. The
// BadData tests check the status bits of thd.validate and that a bad
// microbatch yields the outputs of an empty one, and run random garbage
// metadata through the compiled code.
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"
#include "test/unit/DifferentialHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace thdc;
using namespace thdc::reference;

namespace {
using thdc::testing::CompiledStep;
using thdc::testing::drawTotalUnits;
using thdc::testing::emptyMicrobatchOutput;
using thdc::testing::firstMismatch;
using thdc::testing::join;
using thdc::testing::kInt32Max;
using thdc::testing::kInt32Min;
using thdc::testing::uniform;

/// The `policy` keyword of thd.pad_tail_metadata.
const char *policyKeyword(TailPolicy policy) {
  switch (policy) {
  case TailPolicy::AppendDummySequence:
    return "append_dummy_sequence";
  case TailPolicy::ExtendLast:
    return "extend_last";
  case TailPolicy::None:
    return "none";
  case TailPolicy::SplitDummySequences:
    return "split_dummy_sequences";
  }
  return "?";
}

/// One compiled configuration of the example pipeline.
struct StepConfig {
  int64_t C = 0;  ///< tokens per CP rank
  int64_t cp = 1; ///< CP size
  int64_t N = 0;  ///< sequence capacity, the dummy included
  TailPolicy policy = TailPolicy::AppendDummySequence;
  /// split_dummy_sequences' dummy_length.
  std::optional<int64_t> dummyLength = std::nullopt;

  std::string str() const {
    std::ostringstream os;
    os << "C=" << C << " cp=" << cp << " N=" << N
       << " policy=" << policyKeyword(policy);
    if (dummyLength)
      os << " dummy_length=" << *dummyLength;
    return os.str();
  }
};

/// The example pipeline with its tail policy replaced by `policy` (and
/// dummy_length, for split_dummy_sequences).
std::string pipelineText(TailPolicy policy, std::optional<int64_t> dummyLength,
                         std::string &error) {
  const std::string path = "examples/megatron_graph_step.mlir";
  std::string text = thdc::testing::readSourceFile(path, error);
  if (text.empty())
    return "";
  const std::string original = "policy append_dummy_sequence";
  const std::size_t at = text.find(original);
  if (at == std::string::npos ||
      text.find(original, at + original.size()) != std::string::npos) {
    error = "expected exactly one '" + original + "' in " + path;
    return "";
  }
  std::string replacement = std::string("policy ") + policyKeyword(policy);
  if (dummyLength)
    replacement += " dummy_length " + std::to_string(*dummyLength);
  text.replace(at, original.size(), replacement);
  return text;
}

/// The example pipeline compiled for the host CPU for one configuration.
class CompiledGraphStep {
public:
  /// Compiles `config`; null with `error` set on failure.
  static std::unique_ptr<CompiledGraphStep> compile(const StepConfig &config,
                                                    std::string &error) {
    mlir::OwningOpRef<mlir::ModuleOp> module = load(config, error);
    if (!module)
      return nullptr;
    return fromModule(config, *module, error);
  }

  /// The example loaded (thdc::loadPipeline) for `config`, not compiled
  /// yet; null with `error` set on failure.
  static mlir::OwningOpRef<mlir::ModuleOp> load(const StepConfig &config,
                                                std::string &error) {
    std::string text = pipelineText(config.policy, config.dummyLength, error);
    if (text.empty())
      return nullptr;
    llvm::StringMap<int64_t> params{
        {"C", config.C}, {"cp", config.cp}, {"N", config.N}};
    mlir::OwningOpRef<mlir::ModuleOp> module = thdc::testing::loadForHost(
        text, "megatron_graph_step.mlir", params, error);
    if (!module)
      error = "loading for " + config.str() + ": " + error;
    return module;
  }

  /// Compiles `module`, loaded for `config`; null with `error` set on
  /// failure, or when its buffers are not those of `config`.
  static std::unique_ptr<CompiledGraphStep> fromModule(const StepConfig &config,
                                                       mlir::ModuleOp module,
                                                       std::string &error) {
    std::unique_ptr<thdc::HostPipeline> pipeline =
        thdc::testing::compileLoaded(module, error);
    if (!pipeline) {
      error = "compiling for " + config.str() + ": " + error;
      return nullptr;
    }
    const int64_t rows = config.C * config.cp, entries = config.N + 1;
    const thdc::testing::ExpectedBuffer inputs[] = {
        {"tokens", false, "i64", rows},
        {"labels", false, "i64", rows},
        {"position_ids", false, "i64", rows},
        {"loss_mask", false, "f32", rows},
        {"cu_seqlens", false, "i32", entries},
        {"cu_seqlens_padded", false, "i32", entries},
        {"num_seqs", false, "i32", 1},
        {"cp_rank", false, "i32", 1},
    };
    std::unique_ptr<CompiledStep> step = CompiledStep::create(
        std::move(pipeline), inputs, config.C, config.N, error);
    if (!step) {
      error += " for " + config.str();
      return nullptr;
    }
    return std::unique_ptr<CompiledGraphStep>(
        new CompiledGraphStep(config, std::move(step)));
  }

  const StepConfig &config() const { return cfg; }

  /// Runs one microbatch (CompiledStep::run).
  bool run(const GraphStepInput &input, GraphStepOutput &output,
           std::string &error) {
    in = input;
    return step->run({in.tokens.data(), in.labels.data(), in.positionIds.data(),
                      in.lossMask.data(), in.cuSeqlens.data(),
                      in.cuSeqlensPadded.data(), &in.numSeqs, &in.cpRank},
                     output, error);
  }

private:
  CompiledGraphStep(const StepConfig &config,
                    std::unique_ptr<CompiledStep> step)
      : cfg(config), step(std::move(step)) {}

  StepConfig cfg;
  std::unique_ptr<CompiledStep> step;
  /// A copy of the inputs (the code only reads them).
  GraphStepInput in;
};

/// The reference of the example pipeline with tail policy `policy`,
/// composed from the reference steps exactly as the pipeline composes its
/// ops: thd.validate (graphStepStatus; bad metadata leaves no sequence),
/// S5 padding mask over the meaningful prefix, S6 sanitize (fill 0), S7
/// zigzag CP slice, S10 pad_tail to C (data 0, mask 1), thd.max_seqlen, and
/// padTailMetadata{cp, zigzag, target C, max_seqs N, policy}. For the
/// example's own policy it must agree with megatronGraphStep.
Result<GraphStepOutput> referenceGraphStep(const GraphStepInput &input,
                                           const StepConfig &config) {
  GraphStepOutput output;
  output.status = graphStepStatus(input, config.C, config.cp, config.N);
  const bool valid = output.status == 0;
  // thd.validate: bad metadata leaves no sequence for the steps below.
  std::vector<int32_t> cu = {0}, cup = {0};
  if (valid) {
    const std::size_t entries = std::size_t(input.numSeqs) + 1;
    cu.assign(input.cuSeqlens.begin(), input.cuSeqlens.begin() + entries);
    cup.assign(input.cuSeqlensPadded.begin(),
               input.cuSeqlensPadded.begin() + entries);
  }
  const int64_t rank = valid ? input.cpRank : 0;

  Result<std::vector<uint8_t>> mask = paddingMask(cu, cup);
  if (!mask)
    return Status::error("S5: " + mask.status().message());
  const std::size_t total = mask->size();
  // An empty microbatch has an empty slice (TE would reject T == 0 under CP).
  std::vector<int32_t> indices;
  if (config.cp == 1 || total > 0) {
    Result<std::vector<int32_t>> partition = cpPartitionIndices(
        cup, int64_t(total), config.cp, rank, CpMode::Zigzag);
    if (!partition)
      return Status::error("S7: " + partition.status().message());
    indices = std::move(*partition);
  }

  std::string error;
  auto prepare = [&](const auto &values, auto &out) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    if (!error.empty())
      return;
    const std::vector<T> prefix(values.begin(), values.begin() + total);
    Result<std::vector<T>> clean = sanitize(prefix, *mask, T(0));
    if (!clean) {
      error = "S6: " + clean.status().message();
      return;
    }
    Result<std::vector<T>> local = cpSlice(*clean, indices);
    if (!local) {
      error = "S7: " + local.status().message();
      return;
    }
    Result<std::vector<T>> padded = padTail(*local, config.C, T(0));
    if (!padded) {
      error = "S10: " + padded.status().message();
      return;
    }
    out = std::move(*padded);
  };
  prepare(input.tokens, output.tokens);
  prepare(input.labels, output.labels);
  prepare(input.positionIds, output.positionIds);
  prepare(input.lossMask, output.lossMask);
  if (!error.empty())
    return Status::error(error);
  Result<std::vector<uint8_t>> localMask = cpSlice(*mask, indices);
  if (!localMask)
    return Status::error("S7: " + localMask.status().message());
  Result<std::vector<uint8_t>> paddedMask =
      padTail(*localMask, config.C, uint8_t(1));
  if (!paddedMask)
    return Status::error("S10: " + paddedMask.status().message());
  output.paddingMask = std::move(*paddedMask);

  TailPaddingConfig tailConfig;
  tailConfig.cp = config.cp;
  tailConfig.mode = CpMode::Zigzag;
  tailConfig.alignment = std::nullopt;
  tailConfig.target = config.C;
  tailConfig.maxNumSeqs = config.N;
  tailConfig.policy = config.policy;
  tailConfig.dummyLength = config.dummyLength;
  Result<TailPaddingResult> tail = padTailMetadata(
      cu, cup, maxSeqlenFromCu(cup), int64_t(indices.size()), tailConfig);
  if (!tail)
    return Status::error("S10: " + tail.status().message());
  output.cuSeqlensPadded = std::move(tail->cuSeqlensPadded);
  output.cuSeqlens = std::move(tail->cuSeqlens);
  output.maxSeqlen = tail->maxSeqlen;
  return output;
}

/// The metadata of a microbatch, for failure messages.
std::string describe(const StepConfig &config, const GraphStepInput &input) {
  std::ostringstream os;
  os << config.str() << ", num_seqs=" << input.numSeqs
     << ", cp_rank=" << input.cpRank << ", cu_seqlens=" << join(input.cuSeqlens)
     << ", cu_seqlens_padded=" << join(input.cuSeqlensPadded);
  return os.str();
}

//===----------------------------------------------------------------------===//
// Random microbatches
//===----------------------------------------------------------------------===//

/// Which edge cases the generated microbatches covered.
struct Coverage : thdc::testing::MicrobatchCoverage {
  int allSlots = 0;          ///< num_seqs == N, no tail (no dummy needed)
  int validEqualsPadded = 0; ///< some v_i == p_i > 0
};

/// A valid random microbatch for `config` with cp_rank 0: n real sequences
/// whose padded lengths are multiples of 2*cp (cp > 1) summing to at most
/// C*cp, valid lengths in [0, p_i], garbage in every cu entry past n and in
/// every row past cu_seqlens_padded[n], and dataset-like padding rows inside
/// sequences (overwritten by S6). n is at most N-1, or N when the lengths
/// fill all C*cp rows (no tail, so no dummy sequence needs a slot).
GraphStepInput randomMicrobatch(std::mt19937 &rng, const StepConfig &config,
                                bool allowNoSequence, Coverage &coverage) {
  const int64_t C = config.C, cp = config.cp, N = config.N;
  const int64_t granularity = cp > 1 ? 2 * cp : 1;
  const int64_t units = C * cp / granularity;

  int64_t n;
  bool allSlots = false;
  switch (uniform(rng, 0, 11)) {
  case 0:
    n = 0;
    break;
  case 1:
  case 2:
    n = N - 1;
    break;
  case 3:
  case 4:
    n = N;
    allSlots = true;
    break;
  default:
    n = uniform(rng, 0, N - 1);
  }
  if (!allowNoSequence)
    n = std::max<int64_t>(n, 1);

  int64_t totalUnits = 0;
  if (allSlots)
    totalUnits = units;
  else if (n > 0)
    totalUnits = drawTotalUnits(rng, units);

  // Padded lengths: some sequences are empty, the others share the units.
  std::vector<int64_t> padded(n, 0), valid(n, 0);
  std::vector<int64_t> nonEmpty;
  for (int64_t i = 0; i < n; ++i)
    if (uniform(rng, 0, 5) != 0)
      nonEmpty.push_back(i);
  if (totalUnits > 0 && nonEmpty.empty())
    nonEmpty.push_back(uniform(rng, 0, n - 1));
  if (!nonEmpty.empty()) {
    std::vector<int64_t> cuts;
    for (std::size_t i = 0; i + 1 < nonEmpty.size(); ++i)
      cuts.push_back(uniform(rng, 0, totalUnits));
    cuts.push_back(0);
    cuts.push_back(totalUnits);
    std::sort(cuts.begin(), cuts.end());
    for (std::size_t i = 0; i < nonEmpty.size(); ++i)
      padded[nonEmpty[i]] = (cuts[i + 1] - cuts[i]) * granularity;
  }

  // Valid lengths: aligned (p = round_up(v, 2cp), or a little padding for
  // cp == 1), exact (v == p) or loose (any v in [0, p]).
  const int64_t validMode = uniform(rng, 0, 3);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = padded[i];
    if (p == 0)
      valid[i] = 0;
    else if (validMode == 0)
      valid[i] = p;
    else if (validMode == 1)
      valid[i] = uniform(rng, 0, p);
    else
      valid[i] = p - uniform(rng, 0, std::min<int64_t>(p, granularity) - 1);
  }

  GraphStepInput input;
  const int64_t rows = C * cp;
  input.tokens.resize(rows);
  input.labels.resize(rows);
  input.positionIds.resize(rows);
  input.lossMask.resize(rows);
  input.cuSeqlens.assign(N + 1, 0);
  input.cuSeqlensPadded.assign(N + 1, 0);
  input.numSeqs = int32_t(n);
  for (int64_t i = 0; i < n; ++i) {
    input.cuSeqlens[i + 1] = int32_t(input.cuSeqlens[i] + valid[i]);
    input.cuSeqlensPadded[i + 1] =
        int32_t(input.cuSeqlensPadded[i] + padded[i]);
  }
  const int64_t total = input.cuSeqlensPadded[n];

  // Entries past n are never read: fill them with garbage.
  const int64_t garbageMode = uniform(rng, 0, 3);
  for (int64_t i = n + 1; i <= N; ++i) {
    int32_t a, b;
    switch (garbageMode) {
    case 0:
      a = b = -1;
      break;
    case 1:
      a = int32_t(uniform(rng, kInt32Min, kInt32Max));
      b = int32_t(uniform(rng, kInt32Min, kInt32Max));
      break;
    case 2:
      a = int32_t(uniform(rng, -3 * rows, 3 * rows));
      b = int32_t(uniform(rng, -3 * rows, 3 * rows));
      break;
    default:
      a = i % 2 ? kInt32Max : kInt32Min;
      b = i % 2 ? kInt32Min : kInt32Max;
    }
    input.cuSeqlens[i] = a;
    input.cuSeqlensPadded[i] = b;
  }

  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < padded[i]; ++k) {
      const int64_t row = input.cuSeqlensPadded[i] + k;
      input.positionIds[row] = k;
      if (k < valid[i]) {
        input.tokens[row] = uniform(rng, 1, 151935);
        input.labels[row] =
            uniform(rng, 0, 9) == 0 ? -100 : uniform(rng, 1, 151935);
        input.lossMask[row] = uniform(rng, 0, 4) == 0 ? 0.0f : 1.0f;
      } else {
        input.tokens[row] = 99; // the dataset's pad id
        input.labels[row] = uniform(rng, 0, 1) ? 99 : -100;
        input.lossMask[row] = uniform(rng, 0, 1) ? 0.0f : 0.75f;
      }
    }
  for (int64_t row = total; row < rows; ++row) {
    input.tokens[row] = uniform(rng, std::numeric_limits<int64_t>::min(),
                                std::numeric_limits<int64_t>::max());
    input.labels[row] = -7;
    input.positionIds[row] = uniform(rng, -1000000, 1000000);
    input.lossMask[row] = uniform(rng, 0, 1)
                              ? std::numeric_limits<float>::quiet_NaN()
                              : float(uniform(rng, -1000, 1000)) * 0.5f;
  }

  coverage.count(
      n, N, total, rows,
      std::any_of(valid.begin(), valid.end(), [](int64_t v) { return !v; }));
  if (total == rows && n == N)
    ++coverage.allSlots;
  for (int64_t i = 0; i < n; ++i)
    if (valid[i] == padded[i] && padded[i] > 0) {
      ++coverage.validEqualsPadded;
      break;
    }
  return input;
}

/// Compares the compiled pipeline with the reference on `count` random
/// microbatches of `config`, every CP rank of each. Returns false after the
/// first mismatch (reported as a test failure).
bool differential(CompiledGraphStep &step, int count, uint32_t seed,
                  Coverage &coverage) {
  const StepConfig &config = step.config();
  const bool allowNoSequence = config.policy != TailPolicy::ExtendLast;
  thdc::testing::StepDifferential<GraphStepInput> suite;
  suite.generate = [&](std::mt19937 &rng) {
    return randomMicrobatch(rng, config, allowNoSequence, coverage);
  };
  suite.reference = [&](const GraphStepInput &input) {
    return referenceGraphStep(input, config);
  };
  suite.checkReference = [&](const GraphStepInput &input,
                             const GraphStepOutput &expected) {
    if (config.policy != TailPolicy::AppendDummySequence &&
        config.policy != TailPolicy::SplitDummySequences)
      return std::string();
    // The composition must be the reference's own graph step.
    return firstMismatch(expected,
                         megatronGraphStep(input, config.C, config.cp, config.N,
                                           config.dummyLength));
  };
  suite.run = [&](const GraphStepInput &input, GraphStepOutput &output,
                  std::string &error) {
    return step.run(input, output, error);
  };
  suite.describe = [&](const GraphStepInput &input) {
    return describe(config, input);
  };
  return thdc::testing::compareRandomMicrobatches(suite, count, seed, config.cp,
                                                  coverage.rankRuns);
}

/// The same, after compiling `config`.
bool differential(const StepConfig &config, int count, uint32_t seed,
                  Coverage &coverage) {
  std::string error;
  std::unique_ptr<CompiledGraphStep> step =
      CompiledGraphStep::compile(config, error);
  if (!step) {
    ADD_FAILURE() << error;
    return false;
  }
  return differential(*step, count, seed, coverage);
}

/// Runs the differential comparison for one CP size and tail policy over
/// small and large capacities and several sequence capacities.
void runDifferentialSuite(int64_t cp, TailPolicy policy) {
  struct Shape {
    int64_t C, N;
    int count;
  };
  // Small capacities get many microbatches, large ones fewer (each is up to
  // C*cp = 32768 rows).
  const Shape shapes[] = {
      {8, 2, 40},     {16, 3, 40},    {16, 8, 40},  {24, 33, 40},
      {256, 128, 16}, {1024, 33, 10}, {4096, 8, 6},
  };
  Coverage coverage;
  uint32_t seed = 0x7d1f0000u + uint32_t(cp) * 16 + uint32_t(policy);
  for (const Shape &shape : shapes) {
    StepConfig config{shape.C, cp, shape.N, policy};
    if (policy == TailPolicy::SplitDummySequences) {
      // About 8 pieces over a whole buffer: small N leaves fewer spare
      // entries than pieces, so the last dummy takes the rest.
      const int64_t granule = cp > 1 ? 2 * cp : 1;
      config.dummyLength =
          granule * std::max<int64_t>(1, shape.C * cp / 8 / granule);
    }
    if (!differential(config, shape.count, seed++, coverage))
      return;
  }
  std::printf("[differential] cp=%lld policy=%s: %s, full and N %d, v==p "
              "%d)\n",
              (long long)cp, policyKeyword(policy), coverage.summary().c_str(),
              coverage.allSlots, coverage.validEqualsPadded);
  coverage.expectEachCase();
  EXPECT_GT(coverage.allSlots, 0);
  EXPECT_GT(coverage.validEqualsPadded, 0);
}

/// runDifferentialSuite for a tail policy and CP size.
class DifferentialSuite
    : public ::testing::TestWithParam<std::tuple<TailPolicy, int64_t>> {};

TEST_P(DifferentialSuite, GraphStepZigzag) {
  const auto [policy, cp] = GetParam();
  runDifferentialSuite(cp, policy);
}

std::string suiteCaseName(
    const ::testing::TestParamInfo<DifferentialSuite::ParamType> &info) {
  const auto [policy, cp] = info.param;
  return std::string(policyKeyword(policy)) + "_cp" + std::to_string(cp);
}

INSTANTIATE_TEST_SUITE_P(
    Differential, DifferentialSuite,
    ::testing::Combine(::testing::Values(TailPolicy::AppendDummySequence,
                                         TailPolicy::None,
                                         TailPolicy::SplitDummySequences),
                       ::testing::Values(1, 2, 4, 8)),
    suiteCaseName);
// extend_last only without CP here: under CP the example's order (slice,
// then pad each rank) gives the last sequence's chunks at its old length,
// which thd.pad_tail rejects. examples/graph_step_extend_last.mlir pads
// first and slices with the extended offsets; the differential harness
// (InterpreterDifferential.GraphStepExamples) and the GPU suite check it.
INSTANTIATE_TEST_SUITE_P(
    DifferentialExtendLast, DifferentialSuite,
    ::testing::Combine(::testing::Values(TailPolicy::ExtendLast),
                       ::testing::Values(1)),
    suiteCaseName);

// The parameters are part of the IR: a process (a JIT in a training job)
// loads and compiles several shapes in one MLIR context, and each compile
// must have its own. The shapes are loaded first, then a pipeline with
// parameters of other names, then compiled in another order: a compile's
// parameters left in the context would change the signature, the
// verification or the code of the others.
TEST(Differential, ShapesInterleavedInOneContext) {
  const StepConfig configs[] = {
      {16, 2, 8}, {64, 4, 17}, {24, 1, 5}, {32, 8, 33}};
  std::string error;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  for (const StepConfig &config : configs) {
    modules.push_back(CompiledGraphStep::load(config, error));
    ASSERT_TRUE(modules.back()) << error;
  }
  std::string packText =
      thdc::testing::readSourceFile("examples/pack_microbatch.mlir", error);
  ASSERT_FALSE(packText.empty()) << error;
  mlir::OwningOpRef<mlir::ModuleOp> pack = thdc::testing::loadForHost(
      packText, "pack_microbatch.mlir",
      {{"C", 4096}, {"N", 64}, {"P", 65536}, {"S", 256}}, error);
  ASSERT_TRUE(pack) << error;

  Coverage coverage;
  uint32_t seed = 0x5eed0000u;
  for (size_t index : {2, 0, 3, 1, 2}) {
    const StepConfig &config = configs[index];
    mlir::FailureOr<thdc::PipelineSignature> signature =
        thdc::describePipeline(*modules[index]);
    ASSERT_TRUE(mlir::succeeded(signature)) << config.str();
    EXPECT_EQ(signature->params.size(), 3u) << config.str();
    EXPECT_EQ(signature->params.lookup("C"), config.C) << config.str();
    EXPECT_EQ(signature->params.lookup("cp"), config.cp) << config.str();
    EXPECT_EQ(signature->params.lookup("N"), config.N) << config.str();
    // Checks every buffer's length against `config`.
    std::unique_ptr<CompiledGraphStep> step =
        CompiledGraphStep::fromModule(config, *modules[index], error);
    ASSERT_TRUE(step) << error;
    ASSERT_TRUE(differential(*step, 6, seed++, coverage)) << config.str();
    // A fresh load of another shape between two compiles.
    StepConfig other = configs[(index + 1) % std::size(configs)];
    ASSERT_TRUE(CompiledGraphStep::load(other, error)) << error;
  }
}

// extend_last needs a real sequence to extend: the reference rejects an
// empty microbatch, which is why the extend_last suites never generate one.
TEST(Differential, ExtendLastRejectsEmptyMicrobatchInReference) {
  const StepConfig config{16, 2, 6, TailPolicy::ExtendLast};
  GraphStepInput input;
  input.tokens.assign(32, 1);
  input.labels.assign(32, 1);
  input.positionIds.assign(32, 1);
  input.lossMask.assign(32, 1.0f);
  input.cuSeqlens.assign(7, -1);
  input.cuSeqlensPadded.assign(7, -1);
  input.cuSeqlens[0] = input.cuSeqlensPadded[0] = 0;
  input.numSeqs = 0;
  Result<GraphStepOutput> expected = referenceGraphStep(input, config);
  ASSERT_FALSE(expected);
  EXPECT_NE(expected.status().message().find("extend_last needs at least one"),
            std::string::npos)
      << expected.status().message();
}

//===----------------------------------------------------------------------===//
// Bad data
//===----------------------------------------------------------------------===//

/// C = 16, cp = 2, N = 6 with the example's policy (append_dummy_sequence).
class BadData : public thdc::testing::SharedPipelineTest<CompiledGraphStep> {
protected:
  static constexpr int64_t C = 16, cp = 2, N = 6;

  static void SetUpTestSuite() {
    compileShared([](std::string &error) {
      return CompiledGraphStep::compile(
          StepConfig{C, cp, N, TailPolicy::AppendDummySequence}, error);
    });
  }

  /// The running example of docs/semantics.md (v = [3, 2, 4], p = [4, 4, 4]) with the cu
  /// arrays padded by repeats, so that every entry up to N is well formed
  /// and each test introduces exactly the faults it names.
  static GraphStepInput validInput() {
    GraphStepInput input;
    const int64_t rows = C * cp;
    for (int64_t row = 0; row < rows; ++row) {
      input.tokens.push_back(1000 + row);
      input.labels.push_back(2000 + row);
      input.positionIds.push_back(row % 4);
      input.lossMask.push_back(1.0f);
    }
    input.cuSeqlens = {0, 3, 5, 9, 9, 9, 9};
    input.cuSeqlensPadded = {0, 4, 8, 12, 12, 12, 12};
    input.numSeqs = 3;
    input.cpRank = 1;
    return input;
  }

  /// Checks the status bits and the empty-microbatch outputs of `input`,
  /// against both the literal definition and megatronGraphStep.
  static void expectEmptyMicrobatch(const GraphStepInput &input,
                                    int32_t expectedStatus) {
    const StepConfig config{C, cp, N, TailPolicy::AppendDummySequence};
    GraphStepOutput actual;
    std::string error;
    ASSERT_TRUE(compiled->run(input, actual, error)) << error;
    EXPECT_EQ(actual.status, expectedStatus) << describe(config, input);
    GraphStepOutput reference = megatronGraphStep(input, C, cp, N);
    EXPECT_EQ(reference.status, expectedStatus)
        << "the reference disagrees with the test's expectation; "
        << describe(config, input);
    std::string mismatch =
        firstMismatch(actual, emptyMicrobatchOutput(C, cp, N, expectedStatus));
    EXPECT_TRUE(mismatch.empty())
        << "not the empty-microbatch outputs: " << mismatch << "; "
        << describe(config, input);
    mismatch = firstMismatch(actual, reference);
    EXPECT_TRUE(mismatch.empty())
        << "differs from megatronGraphStep: " << mismatch << "; "
        << describe(config, input);
  }
};

TEST_F(BadData, BaselineIsValid) {
  GraphStepInput input = validInput();
  GraphStepOutput actual;
  std::string error;
  ASSERT_TRUE(compiled->run(input, actual, error)) << error;
  EXPECT_EQ(actual.status, 0);
  std::string mismatch =
      firstMismatch(actual, megatronGraphStep(input, C, cp, N));
  EXPECT_TRUE(mismatch.empty()) << mismatch;
  // The tail is covered by a dummy sequence [12, 32).
  EXPECT_EQ(actual.cuSeqlensPadded,
            (std::vector<int32_t>{0, 4, 8, 12, 32, 32, 32}));
  EXPECT_EQ(actual.cuSeqlens, (std::vector<int32_t>{0, 3, 5, 9, 29, 29, 29}));
}

// N leaves no room for the dummy.
TEST_F(BadData, NumSeqsAboveCapacity) {
  GraphStepInput input = validInput();
  for (int32_t numSeqs : {int32_t(N), int32_t(N + 1), kInt32Max}) {
    input.numSeqs = numSeqs;
    expectEmptyMicrobatch(input, StatusNumSeqsOutOfRange);
  }
}

// N real sequences fill every slot: valid exactly when they fill all C*cp
// rows (no tail, no dummy), as megatron-core dev d48bd6be0a trains them
// (packed_seq_params.py:446-700 appends the dummy only for a tail). The cu
// arrays are the input's N+1 entries.
TEST_F(BadData, AllSlotsWithoutTailIsValid) {
  GraphStepInput input = validInput();
  input.cuSeqlens = {0, 3, 5, 9, 13, 17, 29};
  input.cuSeqlensPadded = {0, 4, 8, 12, 16, 20, 32};
  input.numSeqs = N;
  GraphStepOutput actual;
  std::string error;
  ASSERT_TRUE(compiled->run(input, actual, error)) << error;
  EXPECT_EQ(actual.status, 0);
  EXPECT_EQ(megatronGraphStep(input, C, cp, N).status, 0);
  std::string mismatch =
      firstMismatch(actual, megatronGraphStep(input, C, cp, N));
  EXPECT_TRUE(mismatch.empty()) << mismatch;
  EXPECT_EQ(actual.cuSeqlensPadded, input.cuSeqlensPadded);
  EXPECT_EQ(actual.cuSeqlens, input.cuSeqlens);
  EXPECT_EQ(actual.maxSeqlen, C * cp);
  // One row short of C*cp leaves a tail and no slot for its dummy.
  input.cuSeqlensPadded = {0, 4, 8, 12, 16, 20, 28};
  input.cuSeqlens = {0, 3, 5, 9, 13, 17, 25};
  expectEmptyMicrobatch(input, StatusNumSeqsOutOfRange);
}

TEST_F(BadData, NumSeqsNegative) {
  GraphStepInput input = validInput();
  for (int32_t numSeqs : {-1, kInt32Min}) {
    input.numSeqs = numSeqs;
    expectEmptyMicrobatch(input, StatusNumSeqsOutOfRange);
  }
}

TEST_F(BadData, TotalAboveCapacity) {
  GraphStepInput input = validInput();
  input.cuSeqlensPadded = {0, 4, 8, 36, 36, 36, 36}; // 36 > C*cp = 32
  expectEmptyMicrobatch(input, StatusTotalExceedsCapacity);
}

TEST_F(BadData, PaddedOffsetNotDivisibleBy2Cp) {
  GraphStepInput input = validInput();
  input.cuSeqlensPadded = {0, 4, 6, 12, 12, 12, 12}; // 6 % 4 != 0
  input.cuSeqlens = {0, 3, 5, 9, 9, 9, 9};
  expectEmptyMicrobatch(input, StatusNotDivisibleBy2Cp);
}

TEST_F(BadData, DecreasingOffsets) {
  GraphStepInput input = validInput();
  // Padded lengths 8, -4, 8; valid lengths 3, -4, 4 (none above its padded
  // length), so only the order is wrong.
  input.cuSeqlensPadded = {0, 8, 4, 12, 12, 12, 12};
  input.cuSeqlens = {0, 3, -1, 3, 3, 3, 3};
  expectEmptyMicrobatch(input, StatusNotMonotonic);
}

TEST_F(BadData, DecreasingValidOffsets) {
  GraphStepInput input = validInput();
  input.cuSeqlens = {0, 3, 2, 6, 6, 6, 6};
  expectEmptyMicrobatch(input, StatusNotMonotonic);
}

TEST_F(BadData, CuSeqlensNotStartingAtZero) {
  GraphStepInput input = validInput();
  input.cuSeqlens = {1, 3, 5, 9, 9, 9, 9};
  expectEmptyMicrobatch(input, StatusNotMonotonic);
}

TEST_F(BadData, CuSeqlensPaddedNotStartingAtZero) {
  GraphStepInput input = validInput();
  input.cuSeqlensPadded = {-4, 4, 8, 12, 12, 12, 12}; // divisible by 2*cp
  expectEmptyMicrobatch(input, StatusNotMonotonic);
}

TEST_F(BadData, ValidAbovePadded) {
  GraphStepInput input = validInput();
  input.cuSeqlens = {0, 3, 5, 10, 10, 10, 10}; // v2 = 5 > p2 = 4
  expectEmptyMicrobatch(input, StatusValidExceedsPadded);
}

TEST_F(BadData, CpRankEqualsCp) {
  GraphStepInput input = validInput();
  input.cpRank = cp;
  expectEmptyMicrobatch(input, StatusCpRankOutOfRange);
}

TEST_F(BadData, CpRankNegative) {
  GraphStepInput input = validInput();
  input.cpRank = -1;
  expectEmptyMicrobatch(input, StatusCpRankOutOfRange);
}

TEST_F(BadData, TwoFaults) {
  GraphStepInput input = validInput();
  input.cpRank = cp;
  input.cuSeqlensPadded = {0, 4, 8, 36, 36, 36, 36};
  expectEmptyMicrobatch(input,
                        StatusCpRankOutOfRange | StatusTotalExceedsCapacity);

  input = validInput();
  input.cuSeqlensPadded = {0, 4, 6, 12, 12, 12, 12};
  input.cuSeqlens = {0, 3, 6, 9, 9, 9, 9}; // v1 = 3 > p1 = 2
  expectEmptyMicrobatch(input,
                        StatusNotDivisibleBy2Cp | StatusValidExceedsPadded);

  input = validInput();
  input.numSeqs = -1;
  input.cpRank = -1;
  expectEmptyMicrobatch(input,
                        StatusNumSeqsOutOfRange | StatusCpRankOutOfRange);
}

// Entry 0 is checked for divisibility by 2*cp too, not only entries 1..n.
TEST_F(BadData, FirstPaddedOffsetNotDivisibleBy2Cp) {
  GraphStepInput input = validInput();
  input.cuSeqlensPadded = {2, 4, 8, 12, 12, 12, 12};
  input.cuSeqlens = {0, 2, 5, 9, 9, 9, 9}; // v0 = 2 <= p0 = 2
  expectEmptyMicrobatch(input, StatusNotMonotonic | StatusNotDivisibleBy2Cp);
}

// Lengths of extreme offsets are computed without wrapping around: with
// cu_seqlens_padded = [INT32_MIN, 4, ...] the padded length 4 - INT32_MIN is
// large (no bit 16); with cu_seqlens = [INT32_MIN, 4, ...] the valid length is.
TEST_F(BadData, LengthsOfExtremeOffsetsDoNotWrap) {
  GraphStepInput input = validInput();
  input.numSeqs = 1;
  input.cuSeqlens = {0, 4, 4, 4, 4, 4, 4};
  input.cuSeqlensPadded = {kInt32Min, 4, 4, 4, 4, 4, 4};
  expectEmptyMicrobatch(input, StatusNotMonotonic);

  input.cuSeqlens = {kInt32Min, 4, 4, 4, 4, 4, 4};
  input.cuSeqlensPadded = {0, 4, 4, 4, 4, 4, 4};
  expectEmptyMicrobatch(input, StatusNotMonotonic | StatusValidExceedsPadded);
}

//===----------------------------------------------------------------------===//
// Random garbage metadata
//===----------------------------------------------------------------------===//

/// A value that tends to break index arithmetic.
int32_t nastyValue(std::mt19937 &rng, int64_t C, int64_t cp) {
  const int32_t rows = int32_t(C * cp);
  const int32_t values[] = {
      kInt32Min, kInt32Min + 1,   -2 * rows, -1,   0,
      1,         int32_t(2 * cp), rows - 1,  rows, rows + 1,
      2 * rows,  kInt32Max - 1,   kInt32Max};
  if (uniform(rng, 0, 2) == 0)
    return int32_t(uniform(rng, kInt32Min, kInt32Max));
  if (uniform(rng, 0, 1) == 0)
    return int32_t(uniform(rng, -rows, 2 * rows));
  return values[uniform(rng, 0, std::size(values) - 1)];
}

/// Garbage metadata: a random valid microbatch whose cu arrays are replaced
/// by random values or get a few random mutations, with random num_seqs and
/// cp_rank (huge and negative values included).
GraphStepInput garbageInput(std::mt19937 &rng, const StepConfig &config) {
  Coverage ignored;
  GraphStepInput input = randomMicrobatch(rng, config, true, ignored);
  const int64_t N = config.N;
  if (uniform(rng, 0, 3) == 0) {
    for (int64_t i = 0; i <= N; ++i) {
      input.cuSeqlens[i] = nastyValue(rng, config.C, config.cp);
      input.cuSeqlensPadded[i] = nastyValue(rng, config.C, config.cp);
    }
  } else {
    for (int64_t mutations = uniform(rng, 1, 3); mutations > 0; --mutations) {
      std::vector<int32_t> &array =
          uniform(rng, 0, 1) ? input.cuSeqlens : input.cuSeqlensPadded;
      array[uniform(rng, 0, N)] = nastyValue(rng, config.C, config.cp);
    }
  }
  switch (uniform(rng, 0, 4)) {
  case 0:
    input.numSeqs = nastyValue(rng, config.C, config.cp);
    break;
  case 1:
    input.numSeqs = int32_t(uniform(rng, -2, N + 2));
    break;
  default:
    break;
  }
  if (uniform(rng, 0, 3) == 0)
    input.cpRank = nastyValue(rng, config.C, config.cp);
  else
    input.cpRank = int32_t(uniform(rng, 0, config.cp - 1));
  return input;
}

/// The configurations the garbage tests run.
const StepConfig kGarbageConfigs[] = {
    {16, 2, 6, TailPolicy::AppendDummySequence},
    {8, 1, 3, TailPolicy::AppendDummySequence},
    {24, 4, 8, TailPolicy::None},
    {16, 1, 5, TailPolicy::ExtendLast},
    {32, 2, 2, TailPolicy::AppendDummySequence},
};
constexpr int kGarbageTrials = 80;

/// Garbage metadata must never crash the compiled code (every access is
/// clamped); a microbatch the reference accepts must give its outputs, and a
/// rejected one exactly the reference's status bits and the outputs of an
/// empty microbatch.
TEST_F(BadData, RandomGarbageNeverCrashes) {
  std::mt19937 rng(20240917);
  int runs = 0, rejected = 0, accepted = 0;
  for (const StepConfig &config : kGarbageConfigs) {
    std::string error;
    std::unique_ptr<CompiledGraphStep> step =
        CompiledGraphStep::compile(config, error);
    ASSERT_TRUE(step) << error;
    for (int trial = 0; trial < kGarbageTrials; ++trial) {
      GraphStepInput input = garbageInput(rng, config);
      GraphStepOutput actual;
      ASSERT_TRUE(step->run(input, actual, error)) << error;
      ++runs;
      const int32_t referenceStatus =
          graphStepStatus(input, config.C, config.cp, config.N);
      (referenceStatus == 0 ? accepted : rejected) += 1;
      ASSERT_EQ(actual.status, referenceStatus)
          << "compiled status " << actual.status << ", reference "
          << referenceStatus << "; " << describe(config, input);
      GraphStepOutput comparable = actual;
      Result<GraphStepOutput> expected = referenceGraphStep(input, config);
      std::string mismatch;
      if (expected) {
        mismatch = firstMismatch(comparable, *expected);
      } else {
        // Only extend_last without a sequence has no reference (nothing to
        // extend); its data and mask are still those of an empty microbatch.
        ASSERT_EQ(config.policy, TailPolicy::ExtendLast)
            << expected.status().message();
        ASSERT_TRUE(referenceStatus != 0 || input.numSeqs == 0)
            << expected.status().message();
        mismatch =
            firstMismatch(comparable,
                          emptyMicrobatchOutput(config.C, config.cp, config.N,
                                                referenceStatus),
                          /*checkMetadata=*/false);
      }
      ASSERT_TRUE(mismatch.empty())
          << mismatch << "; " << describe(config, input);
    }
  }
  std::printf("[garbage] %d runs: %d accepted, %d rejected\n", runs, accepted,
              rejected);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

} // namespace
