//===- DifferentialHarness.h - compiled code vs a reference -----*- C++ -*-===//
//
// What the differential tests share: the source text of an example, one MLIR
// context per test process, a compile for the host CPU with diagnostics in
// the error, the check that a signature is the example's interface, random
// draws, the exact comparison of outputs with a message naming the first
// difference, and, for the pipelines with the graph step's outputs
// (megatron_graph_step.mlir, pack_microbatch.mlir), a compiled step with
// poisoned outputs, its empty microbatch, the coverage of random
// microbatches and the loop that compares them with a reference on every
// CP rank. Defined in test/unit/DifferentialHarness.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_UNIT_DIFFERENTIALHARNESS_H
#define THDC_TEST_UNIT_DIFFERENTIALHARNESS_H

#include "compiler/Context.h"
#include "compiler/Targets.h"
#include "reference/Reference.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace thdc::testing {

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

//===----------------------------------------------------------------------===//
// Compiling for the host
//===----------------------------------------------------------------------===//

/// The text of `relative` under the source tree; empty with `error` set if
/// it cannot be read.
std::string readSourceFile(const std::string &relative, std::string &error);

/// The MLIR context shared by every compilation of a test process.
mlir::MLIRContext &compilerContext();

/// Appends every diagnostic of a context to a string while it lives.
class DiagnosticCapture {
public:
  DiagnosticCapture(mlir::MLIRContext *context, std::string &text);

private:
  mlir::ScopedDiagnosticHandler handler;
};

/// `text` (named `name` in diagnostics) loaded with `params`
/// (thdc::loadPipeline) in the shared context; null with `error` set,
/// diagnostics included, on failure.
mlir::OwningOpRef<mlir::ModuleOp>
loadForHost(const std::string &text, const std::string &name,
            const llvm::StringMap<int64_t> &params, std::string &error);

/// A loaded `module` compiled for the host CPU; null with `error` set,
/// diagnostics included, on failure.
std::unique_ptr<thdc::HostPipeline> compileLoaded(mlir::ModuleOp module,
                                                  std::string &error);

/// `text` (named `name` in diagnostics) compiled for the host CPU with
/// `params`; null with `error` set, diagnostics included, on failure.
std::unique_ptr<thdc::HostPipeline>
compileForHost(const std::string &text, const std::string &name,
               const llvm::StringMap<int64_t> &params, std::string &error);

/// One buffer of an example's interface.
struct ExpectedBuffer {
  const char *name;
  bool isOutput;
  const char *type;
  int64_t elements;
};

/// For each buffer of `signature`, its index in `expected` (matched by name
/// and direction, then checked for element type and length). False with
/// `error` set when the signature is not exactly `expected`.
bool matchSignature(const thdc::PipelineSignature &signature,
                    llvm::ArrayRef<ExpectedBuffer> expected,
                    std::vector<size_t> &order, std::string &error);

//===----------------------------------------------------------------------===//
// Random draws and exact comparison
//===----------------------------------------------------------------------===//

/// A uniform draw from [lo, hi].
inline int64_t uniform(std::mt19937 &rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

/// True in `percent` of the draws.
inline bool chance(std::mt19937 &rng, int percent) {
  return uniform(rng, 0, 99) < percent;
}

/// A random microbatch's total, in units of its alignment, out of `units`:
/// all of them (a full buffer) in 3 draws of 10, none in 1, else uniform.
inline int64_t drawTotalUnits(std::mt19937 &rng, int64_t units) {
  switch (uniform(rng, 0, 9)) {
  case 0:
  case 1:
  case 2:
    return units;
  case 3:
    return 0;
  default:
    return uniform(rng, 0, units);
  }
}

/// "[1, 2, 3]"; bytes print as numbers.
template <typename T> std::string join(const std::vector<T> &values) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    os << (i ? ", " : "") << +values[i];
  return os.str() + "]";
}

/// Exact, bitwise for floats (so 0.0 vs -0.0 and NaN count as different).
template <typename T> bool sameValue(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Unless `mismatch` already names one, names the first element where
/// `actual` differs from `expected` (with both arrays when they are short).
template <typename T>
void findMismatch(const char *name, const std::vector<T> &actual,
                  const std::vector<T> &expected, std::string &mismatch) {
  if (!mismatch.empty())
    return;
  if (actual.size() != expected.size()) {
    mismatch = std::string(name) + " has " + std::to_string(actual.size()) +
               " elements, the reference " + std::to_string(expected.size());
    return;
  }
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (!sameValue(actual[i], expected[i])) {
      std::ostringstream os;
      os.precision(9);
      os << name << "[" << i << "] = " << +actual[i] << ", reference "
         << +expected[i];
      if (actual.size() <= 64)
        os << " (" << name << " = " << join(actual) << ", reference "
           << join(expected) << ")";
      mismatch = os.str();
      return;
    }
}

//===----------------------------------------------------------------------===//
// Steps with the graph step's outputs
//===----------------------------------------------------------------------===//

/// A compiled pipeline whose outputs are the graph step's nine (tokens,
/// labels, position_ids, loss_mask, padding_mask of C rows; cu_seqlens_padded,
/// cu_seqlens of N+1 entries; max_seqlen; status), after inputs the caller
/// names. Its signature is checked once; each run poisons every output
/// element first, so that an element the code does not write shows up as a
/// mismatch.
class CompiledStep {
public:
  /// `pipeline` bound to `inputs` and the step outputs for `C` and `N`; null
  /// with `error` set when its signature is anything else.
  static std::unique_ptr<CompiledStep>
  create(std::unique_ptr<thdc::HostPipeline> pipeline,
         llvm::ArrayRef<ExpectedBuffer> inputs, int64_t C, int64_t N,
         std::string &error);

  /// Runs on `inputs`, the addresses of the buffers named at creation in
  /// that order (the code only reads them), into `output`.
  bool run(llvm::ArrayRef<const void *> inputs,
           reference::GraphStepOutput &output, std::string &error);

  static constexpr int64_t kPoison64 = 0x5a5a5a5a5a5a5a5a;
  static constexpr int32_t kPoison32 = 0x5a5a5a5a;
  static constexpr uint8_t kPoison8 = 0x5a;
  static constexpr float kPoisonF32 = -12345.5f;

private:
  CompiledStep(std::unique_ptr<thdc::HostPipeline> pipeline, int64_t C,
               int64_t N, std::vector<size_t> order, size_t inputCount);

  std::unique_ptr<thdc::HostPipeline> pipeline;
  int64_t C, N;
  /// For each signature buffer, its index in the inputs then the outputs.
  std::vector<size_t> order;
  size_t inputCount;
};

/// The outputs of an empty microbatch, which a step gives for a rejected
/// one: data 0, padding mask all 1, both cu arrays [0, C*cp, ..., C*cp],
/// max_seqlen C*cp, and `status`.
reference::GraphStepOutput emptyMicrobatchOutput(int64_t C, int64_t cp,
                                                 int64_t N, int32_t status);

/// The first output element where `actual` and `expected` differ, or "".
/// With `checkMetadata` false only the status and the per-row outputs are
/// compared.
std::string firstMismatch(const reference::GraphStepOutput &actual,
                          const reference::GraphStepOutput &expected,
                          bool checkMetadata = true);

/// The edge cases that the random microbatches of a suite covered; each
/// suite counts more of its own beside these.
struct MicrobatchCoverage {
  int microbatches = 0;
  int rankRuns = 0;
  int empty = 0;          ///< num_seqs == 0 or total length 0
  int zeroLength = 0;     ///< some real sequence of length 0
  int fullCapacity = 0;   ///< cu_seqlens_padded[n] == C*cp
  int atMaxSeqs = 0;      ///< num_seqs == N-1
  int fullAndMaxSeqs = 0; ///< both at once

  /// Counts a microbatch of `n` sequences (capacity `N`) whose padded
  /// lengths sum to `total` of its `rows` = C*cp rows.
  void count(int64_t n, int64_t N, int64_t total, int64_t rows,
             bool someZeroLength);
  /// "M microbatches, R rank runs, 0 mismatches (empty ..., full and N-1 k";
  /// the suite closes the parenthesis after its own counts.
  std::string summary() const;
  /// Fails the test unless each edge case above came up.
  void expectEachCase() const;
};

/// How a suite draws, checks and runs microbatches of type `Input` (which
/// has a `cpRank`).
template <typename Input> struct StepDifferential {
  /// A valid random microbatch (drawn from `rng` only, in order).
  std::function<Input(std::mt19937 &)> generate;
  /// The reference outputs; an error where the reference refuses the data.
  std::function<Result<reference::GraphStepOutput>(const Input &)> reference;
  /// Where the test's reference differs from reference::megatronGraphStep
  /// (a check of the test, not of the compiler), or "".
  std::function<std::string(const Input &, const reference::GraphStepOutput &)>
      checkReference;
  /// Runs the compiled pipeline.
  std::function<bool(const Input &, reference::GraphStepOutput &,
                     std::string &)>
      run;
  /// The configuration and the microbatch's metadata, for failure messages.
  std::function<std::string(const Input &)> describe;
};

/// Compares the compiled pipeline with the reference on `count` random
/// microbatches drawn with `seed`, every CP rank of each (`cp` ranks,
/// counted in `rankRuns`). Returns false after the first mismatch (reported
/// as a test failure).
template <typename Input>
bool compareRandomMicrobatches(const StepDifferential<Input> &suite, int count,
                               uint32_t seed, int64_t cp, int &rankRuns) {
  std::string error;
  std::mt19937 rng(seed);
  for (int m = 0; m < count; ++m) {
    Input input = suite.generate(rng);
    for (int32_t rank = 0; rank < cp; ++rank) {
      input.cpRank = rank;
      ++rankRuns;
      auto where = [&] {
        return "seed " + std::to_string(seed) + ", microbatch " +
               std::to_string(m) + ", " + suite.describe(input);
      };
      Result<reference::GraphStepOutput> expected = suite.reference(input);
      if (!expected) {
        ADD_FAILURE() << "the reference rejects a valid microbatch ("
                      << expected.status().message() << "): " << where();
        return false;
      }
      if (expected->status != 0) {
        ADD_FAILURE() << "generated an invalid microbatch (status "
                      << expected->status << "): " << where();
        return false;
      }
      std::string mismatch = suite.checkReference(input, *expected);
      if (!mismatch.empty()) {
        ADD_FAILURE() << "the test's reference differs from "
                         "megatronGraphStep: "
                      << mismatch << "; " << where();
        return false;
      }
      reference::GraphStepOutput actual;
      if (!suite.run(input, actual, error)) {
        ADD_FAILURE() << "run failed: " << error << "; "
                      << suite.describe(input);
        return false;
      }
      mismatch = firstMismatch(actual, *expected);
      if (!mismatch.empty()) {
        ADD_FAILURE() << "compiled pipeline differs from the reference: "
                      << mismatch << "; " << where();
        return false;
      }
    }
  }
  return true;
}

/// A fixture whose tests share one compiled pipeline, compiled once for the
/// suite (compileShared in the fixture's SetUpTestSuite); each test is
/// skipped with the compiler's error when that failed.
template <typename Compiled> class SharedPipelineTest : public ::testing::Test {
protected:
  static void compileShared(
      const std::function<std::unique_ptr<Compiled>(std::string &)> &compile) {
    std::string error;
    compiled = compile(error).release();
    if (!compiled)
      compileError = new std::string(error);
  }
  static void TearDownTestSuite() {
    delete compiled;
    compiled = nullptr;
  }
  void SetUp() override {
    if (!compiled)
      GTEST_SKIP() << "cannot compile: " << *compileError;
  }

  static Compiled *compiled;
  static std::string *compileError;
};

template <typename Compiled>
Compiled *SharedPipelineTest<Compiled>::compiled = nullptr;
template <typename Compiled>
std::string *SharedPipelineTest<Compiled>::compileError = nullptr;

} // namespace thdc::testing

#endif // THDC_TEST_UNIT_DIFFERENTIALHARNESS_H
