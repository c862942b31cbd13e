//===- InterpreterDifferentialTest.cpp - compiled code vs the semantics ---===//
//
// One differential harness for every pipeline: each example and a small
// pipeline per thd op is compiled for the host and run on randomized inputs,
// and every output is compared exactly with the reference interpreter's
// (interpreter/), which evaluates the ops through reference/Reference.h.
// Inputs are valid microbatches (with garbage past the meaningful entries,
// zero-length sequences, totals past a capacity) and, for thd.validate and
// the examples, metadata that sets each status bit.
//
//===----------------------------------------------------------------------===//

#include "compiler/Targets.h"
#include "dialect/THDDialect.h"
#include "interpreter/Interpreter.h"
#include "reference/LinearChunks.h"
#include "test/runtime/CaseFile.h"
#include "test/unit/DifferentialHarness.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>

namespace {
using thdc::interpreter::Buffer;
using thdc::testing::chance;
using thdc::testing::uniform;

/// Values of one case, by buffer name (floats as doubles, masks as 0/1).
using Values = std::map<std::string, std::vector<double>>;

/// A pipeline compiled for the host together with its fused module, which
/// the interpreter runs.
struct Compiled {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<thdc::HostPipeline> host;
  mlir::func::FuncOp function;
};

std::unique_ptr<Compiled> compile(const std::string &text,
                                  const std::string &name,
                                  const llvm::StringMap<int64_t> &params,
                                  std::string &error) {
  auto compiled = std::make_unique<Compiled>();
  compiled->module = thdc::testing::loadForHost(text, name, params, error);
  if (!compiled->module)
    return nullptr;
  compiled->host = thdc::testing::compileLoaded(*compiled->module, error);
  if (!compiled->host)
    return nullptr;
  compiled->function = *compiled->module->getOps<mlir::func::FuncOp>().begin();
  return compiled;
}

/// Stores `value` as element `i` of `buffer`, converted to its type.
void store(Buffer &buffer, int64_t i, double value) {
  mlir::Type type = buffer.getElementType();
  if (auto floatType = llvm::dyn_cast<mlir::FloatType>(type)) {
    llvm::APFloat converted(value);
    bool losesInfo = false;
    converted.convert(floatType.getFloatSemantics(),
                      llvm::APFloat::rmNearestTiesToEven, &losesInfo);
    uint64_t bits = converted.bitcastToAPInt().getZExtValue();
    std::memcpy(static_cast<char *>(buffer.data()) + i * buffer.width(), &bits,
                buffer.width());
    return;
  }
  int64_t integer = int64_t(value);
  std::memcpy(static_cast<char *>(buffer.data()) + i * buffer.width(), &integer,
              buffer.width());
}

/// Element `i` of `buffer` for messages.
std::string show(const Buffer &buffer, int64_t i) {
  mlir::Type type = buffer.getElementType();
  std::ostringstream os;
  if (type.isF32())
    os << buffer.get<float>(i);
  else if (type.isF64())
    os << buffer.get<double>(i);
  else if (buffer.width() == 1)
    os << int(buffer.get<int8_t>(i));
  else if (buffer.width() == 4)
    os << buffer.get<int32_t>(i);
  else if (buffer.width() == 8)
    os << buffer.get<int64_t>(i);
  else
    os << "0x" << std::hex << buffer.get<uint16_t>(i);
  return os.str();
}

std::string showAll(const Buffer &buffer) {
  std::string text = "[";
  for (int64_t i = 0; i < buffer.size(); ++i)
    text += (i ? ", " : "") + show(buffer, i);
  return text + "]";
}

/// Runs `compiled` on `values` both ways; empty when every output agrees,
/// else a message naming the output, the element and the inputs. With
/// `record`, an agreeing case is appended to it (its buffers described on
/// the first case).
std::string runBothWays(Compiled &compiled, const Values &values,
                        thdc::testing::CaseFile *record = nullptr) {
  const thdc::PipelineSignature &signature = compiled.host->signature();
  std::vector<Buffer> inputs, outputs;
  std::vector<std::string> inputNames, outputNames;
  mlir::FunctionType type = compiled.function.getFunctionType();
  unsigned argument = 0, result = 0;
  for (const thdc::runtime::BufferDesc &info : signature.buffers) {
    mlir::Type element = mlir::getElementTypeOrSelf(
        info.isOutput ? type.getResult(result++) : type.getInput(argument++));
    Buffer buffer(element, info.elements);
    if (!info.isOutput) {
      auto found = values.find(info.name);
      if (found == values.end())
        return "the case has no values for input '" + info.name + "'";
      for (int64_t i = 0; i < info.elements; ++i)
        store(buffer, i,
              size_t(i) < found->second.size() ? found->second[size_t(i)] : 0);
      inputs.push_back(std::move(buffer));
      inputNames.push_back(info.name);
    } else {
      // Poison: outputs the code forgets to write show up.
      std::memset(buffer.data(), 0xA5, buffer.byteSize());
      outputs.push_back(std::move(buffer));
      outputNames.push_back(info.name);
    }
  }
  std::vector<void *> pointers;
  for (Buffer &buffer : inputs)
    pointers.push_back(buffer.data());
  for (Buffer &buffer : outputs)
    pointers.push_back(buffer.data());
  std::string error;
  std::string inputText;
  for (size_t i = 0; i < inputs.size(); ++i)
    inputText += "  " + inputNames[i] + " = " + showAll(inputs[i]) + "\n";
  if (!compiled.host->run(pointers, error))
    return "the compiled pipeline failed: " + error;
  std::string diagnostics;
  mlir::FailureOr<std::vector<Buffer>> expected = [&] {
    thdc::testing::DiagnosticCapture capture(compiled.function.getContext(),
                                             diagnostics);
    return thdc::interpreter::run(compiled.function, inputs);
  }();
  if (mlir::failed(expected))
    return "the interpreter failed:\n" + diagnostics + "inputs:\n" + inputText;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Buffer &actual = outputs[k], &want = (*expected)[k];
    if (actual.byteSize() != want.byteSize())
      return "output '" + outputNames[k] + "' sizes differ";
    if (std::memcmp(actual.data(), want.data(), actual.byteSize()) == 0)
      continue;
    int64_t i = 0;
    while (std::memcmp(
               static_cast<const char *>(actual.data()) + i * actual.width(),
               static_cast<const char *>(want.data()) + i * want.width(),
               actual.width()) == 0)
      ++i;
    return "output '" + outputNames[k] + "'[" + std::to_string(i) +
           "]: compiled " + show(actual, i) + ", interpreter " + show(want, i) +
           "\n  compiled    " + showAll(actual) + "\n  interpreter " +
           showAll(want) + "\ninputs:\n" + inputText;
  }
  if (record) {
    // Signature order: the inputs, then the outputs.
    std::vector<std::vector<uint8_t>> data;
    auto add = [&](const Buffer &buffer, const std::string &name,
                   bool isOutput) {
      const auto *bytes = static_cast<const uint8_t *>(buffer.data());
      data.emplace_back(bytes, bytes + buffer.byteSize());
      if (record->cases.empty())
        record->buffers.push_back({name, isOutput, buffer.byteSize()});
    };
    for (size_t k = 0; k < inputs.size(); ++k)
      add(inputs[k], inputNames[k], false);
    for (size_t k = 0; k < expected->size(); ++k)
      add((*expected)[k], outputNames[k], true);
    record->cases.push_back(std::move(data));
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Generators
//===----------------------------------------------------------------------===//

/// Metadata of a valid microbatch: cu and cup of `entries` entries, of which
/// the first n + 1 are meaningful and the rest garbage; padded lengths are
/// multiples of `multiple`, zero-length sequences included; the total stays
/// at most `maxTotal`. With `validAbovePadded`, a valid length may exceed its
/// padded one.
struct Microbatch {
  std::vector<double> cu, cup;
  int64_t n = 0;
};

Microbatch randomMicrobatch(std::mt19937 &rng, int64_t entries, int64_t maxSeqs,
                            int64_t maxTotal, int64_t multiple,
                            bool validAbovePadded = false) {
  Microbatch m;
  m.n = uniform(rng, 0, std::min(maxSeqs, entries - 1));
  m.cu.assign(size_t(entries), 0);
  m.cup.assign(size_t(entries), 0);
  int64_t cu = 0, cup = 0;
  for (int64_t i = 1; i <= m.n; ++i) {
    int64_t room = (maxTotal - cup) / multiple;
    // Up to 4 units, or twice a fair share of the total on large buffers.
    int64_t units = std::max<int64_t>(
        4, 2 * maxTotal / multiple / std::max<int64_t>(maxSeqs, 1));
    int64_t p = multiple * uniform(rng, 0, std::min<int64_t>(room, units));
    int64_t v = uniform(rng, 0, p);
    if (validAbovePadded && chance(rng, 15))
      v = p + uniform(rng, 1, 3);
    cu += v;
    cup += p;
    m.cu[size_t(i)] = double(cu);
    m.cup[size_t(i)] = double(cup);
  }
  for (int64_t i = m.n + 1; i < entries; ++i) {
    m.cu[size_t(i)] = double(uniform(rng, -50, 1000));
    m.cup[size_t(i)] = double(uniform(rng, -50, 1000));
  }
  return m;
}

std::vector<double> randomValues(std::mt19937 &rng, int64_t count, int64_t lo,
                                 int64_t hi) {
  std::vector<double> values(static_cast<size_t>(count));
  for (double &value : values)
    value = double(uniform(rng, lo, hi));
  return values;
}

std::vector<double> randomFloats(std::mt19937 &rng, int64_t count) {
  std::vector<double> values(static_cast<size_t>(count));
  for (double &value : values)
    value = double(uniform(rng, -1000, 1000)) / 8.0;
  return values;
}

/// One pipeline of the harness and how its inputs are drawn.
struct Pipeline {
  const char *name;
  std::string text;
  std::function<Values(std::mt19937 &, int)> generate;
  int cases = 100;
  llvm::StringMap<int64_t> params = {};
};

/// With THDC_RECORD_CASES=<dir>, the cases of every example (a pipeline
/// named by its file under examples/) are written to <dir>/<stem>.cases with
/// <dir>/<stem>.args, the example and its --param flags, so that
/// scripts/make-gpu-bundles.sh compiles the same pipeline for the GPU and
/// thdc-runtime-check replays the cases there.
void writeRecordedCases(const Pipeline &pipeline,
                        const thdc::testing::CaseFile &cases) {
  const char *dir = std::getenv("THDC_RECORD_CASES");
  std::string name = pipeline.name;
  std::string stem = name.substr(0, name.size() - 5), args = name;
  std::vector<std::string> keys;
  for (const auto &param : pipeline.params)
    keys.push_back(param.getKey().str());
  std::sort(keys.begin(), keys.end());
  for (const std::string &key : keys) {
    std::string value = std::to_string(pipeline.params.lookup(key));
    stem += "_" + key + value;
    args += " --param " + key + "=" + value;
  }
  std::string error;
  ASSERT_TRUE(thdc::testing::writeCaseFile(std::string(dir) + "/" + stem +
                                               ".cases",
                                           cases, error))
      << error;
  std::ofstream(std::string(dir) + "/" + stem + ".args") << args << "\n";
}

void runPipeline(const Pipeline &pipeline, uint32_t seed) {
  std::string error;
  std::unique_ptr<Compiled> compiled =
      compile(pipeline.text, pipeline.name, pipeline.params, error);
  ASSERT_TRUE(compiled) << error;
  std::string name = pipeline.name;
  bool record = std::getenv("THDC_RECORD_CASES") && name.size() > 5 &&
                name.compare(name.size() - 5, 5, ".mlir") == 0;
  thdc::testing::CaseFile cases;
  std::mt19937 rng(seed);
  for (int i = 0; i < pipeline.cases; ++i) {
    std::string mismatch = runBothWays(*compiled, pipeline.generate(rng, i),
                                       record ? &cases : nullptr);
    ASSERT_EQ(mismatch, "") << pipeline.name << ", case " << i;
  }
  if (record)
    writeRecordedCases(pipeline, cases);
}

//===----------------------------------------------------------------------===//
// Per-op pipelines
//===----------------------------------------------------------------------===//

TEST(InterpreterDifferential, AlignLengthsGatherCuSeqlens) {
  Pipeline pipeline{"lengths", R"mlir(
func.func @lengths(%pool_lengths: tensor<6xi32> {thd.name = "pool_lengths"},
                   %ids: tensor<5xi32> {thd.name = "ids"},
                   %lengths: tensor<6xi32> {thd.name = "lengths"},
                   %n: tensor<1xi32> {thd.name = "num_seqs"})
    -> (tensor<5xi32> {thd.name = "gathered"}, tensor<5xi32> {thd.name = "gathered_all"},
        tensor<6xi32> {thd.name = "aligned_cp2"}, tensor<6xi32> {thd.name = "aligned_sp"},
        tensor<6xi32> {thd.name = "aligned_cp1"}, tensor<7xi32> {thd.name = "cu"},
        tensor<7xi32> {thd.name = "cu_all"}, tensor<6xi32> {thd.name = "cu_of_gathered"},
        tensor<6xi32> {thd.name = "aligned_dynamic"}, tensor<6xi32> {thd.name = "aligned_dynamic_sp"}) {
  %g = thd.gather %pool_lengths[%ids] num_seqs %n : tensor<6xi32>, tensor<5xi32> -> tensor<5xi32>
  %ga = thd.gather %pool_lengths[%ids] : tensor<6xi32>, tensor<5xi32> -> tensor<5xi32>
  %a2 = thd.align_lengths %lengths cp 2 tp 1 : tensor<6xi32>
  %asp = thd.align_lengths %lengths cp 2 tp 3 sequence_parallel : tensor<6xi32>
  %a1 = thd.align_lengths %lengths cp 1 tp 4 : tensor<6xi32>
  %cu = thd.cu_seqlens %lengths num_seqs %n : tensor<6xi32> -> tensor<7xi32>
  %cua = thd.cu_seqlens %lengths : tensor<6xi32> -> tensor<7xi32>
  %cug = thd.cu_seqlens %g num_seqs %n : tensor<5xi32> -> tensor<6xi32>
  %ad = thd.align_lengths %lengths cp 1 tp 1 dynamic_cp dp 3 : tensor<6xi32>
  %ads = thd.align_lengths %lengths cp 2 tp 2 sequence_parallel dynamic_cp dp 2 : tensor<6xi32>
  return %g, %ga, %a2, %asp, %a1, %cu, %cua, %cug, %ad, %ads
      : tensor<5xi32>, tensor<5xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>,
        tensor<7xi32>, tensor<7xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      return Values{
                          {"pool_lengths", randomValues(rng, 6, 0, 40)},
                          {"ids", randomValues(rng, 5, -3, 8)},
                          {"lengths", randomValues(rng, 6, 0, 1000)},
                          {"num_seqs", {double(uniform(rng, -2, 8))}}};
                    }};
  runPipeline(pipeline, 1);
}

/// Padded lengths of negative valid lengths: p = ceil(v / G) * G (ODS of
/// thd.align_lengths). Bad pool samples reach thd.align_lengths in
/// examples/pack_microbatch.mlir before thd.validate flags them.
TEST(InterpreterDifferential, AlignLengthsNegative) {
  Pipeline pipeline{"align_negative", R"mlir(
func.func @align_negative(%lengths: tensor<6xi32> {thd.name = "lengths"})
    -> (tensor<6xi32> {thd.name = "aligned"}) {
  %a = thd.align_lengths %lengths cp 2 tp 1 : tensor<6xi32>
  return %a : tensor<6xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      return Values{{"lengths", randomValues(rng, 6, -20, 20)}};
                    }};
  runPipeline(pipeline, 2);
}

/// Low-precision multiples (S1: G = tpPad * lcm(cpPad, share * m)),
/// literal and from a parameter, on lengths of either sign.
TEST(InterpreterDifferential, AlignLengthsMultiple) {
  Pipeline pipeline{"align_multiple", R"mlir(
func.func @align_multiple(%lengths: tensor<6xi32> {thd.name = "lengths"})
    -> (tensor<6xi32> {thd.name = "fp8_cp2"}, tensor<6xi32> {thd.name = "fp8_cp2_sp"},
        tensor<6xi32> {thd.name = "mxfp8_dynamic"}, tensor<6xi32> {thd.name = "blockwise_sp"},
        tensor<6xi32> {thd.name = "odd"}) attributes {thd.params = {M = 16 : i64}} {
  %a = thd.align_lengths %lengths cp 2 tp 1 multiple 16 : tensor<6xi32>
  %b = thd.align_lengths %lengths cp 2 tp 2 sequence_parallel multiple 16 : tensor<6xi32>
  %c = thd.align_lengths %lengths cp 2 tp 1 dynamic_cp dp 2 multiple 32 : tensor<6xi32>
  %d = thd.align_lengths %lengths cp 1 tp 4 sequence_parallel multiple "M" : tensor<6xi32>
  %e = thd.align_lengths %lengths cp 3 tp 1 multiple 5 : tensor<6xi32>
  return %a, %b, %c, %d, %e
      : tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      return Values{
                          {"lengths", randomValues(rng, 6, -200, 3000)}};
                    }};
  pipeline.params = {{"M", 128}};
  runPipeline(pipeline, 21);
}

/// The row-wise ops over one microbatch's metadata.
TEST(InterpreterDifferential, MaskPositionsSeqIdxMaxSeqlenPadCu) {
  Pipeline pipeline{"rows", R"mlir(
func.func @rows(%cu: tensor<7xi32> {thd.name = "cu"},
                %cup: tensor<7xi32> {thd.name = "cup"},
                %n: tensor<1xi32> {thd.name = "num_seqs"},
                %cup_full: tensor<7xi32> {thd.name = "cup_full"})
    -> (tensor<24xi1> {thd.name = "mask"}, tensor<24xi64> {thd.name = "positions"},
        tensor<24xi32> {thd.name = "positions_i32"}, tensor<20xi32> {thd.name = "seq_idx"},
        tensor<32xi32> {thd.name = "seq_idx_all"}, tensor<1xi32> {thd.name = "max_seqlen"},
        tensor<1xi32> {thd.name = "max_seqlen_all"}, tensor<9xi32> {thd.name = "padded_cu"}) {
  %mask = thd.padding_mask %cu, %cup num_seqs %n capacity 24
      : tensor<7xi32>, tensor<7xi32> -> tensor<24xi1>
  %pos = thd.position_ids %cu, %cup num_seqs %n capacity 24
      : tensor<7xi32>, tensor<7xi32> -> tensor<24xi64>
  %pos32 = thd.position_ids %cu, %cup num_seqs %n capacity 24
      : tensor<7xi32>, tensor<7xi32> -> tensor<24xi32>
  %idx = thd.seq_idx %cup num_seqs %n length 20 : tensor<7xi32> -> tensor<20xi32>
  %idxa = thd.seq_idx %cup_full length 32 : tensor<7xi32> -> tensor<32xi32>
  %m = thd.max_seqlen %cup num_seqs %n : tensor<7xi32>
  %ma = thd.max_seqlen %cup_full : tensor<7xi32>
  %c = thd.pad_cu_seqlens %cup num_seqs %n entries 9 : tensor<7xi32> -> tensor<9xi32>
  return %mask, %pos, %pos32, %idx, %idxa, %m, %ma, %c
      : tensor<24xi1>, tensor<24xi64>, tensor<24xi32>, tensor<20xi32>, tensor<32xi32>,
        tensor<1xi32>, tensor<1xi32>, tensor<9xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      // Totals up to 30 rows: past the 24-row capacity and
                      // the 20-row seq_idx too. The ops without num_seqs
                      // read an array whose entries are all meaningful.
                      Microbatch m =
                          randomMicrobatch(rng, 7, 6, 30, 1,
                                           /*validAbovePadded=*/true);
                      Microbatch all = randomMicrobatch(rng, 7, 6, 30, 1);
                      while (all.n != 6)
                        all = randomMicrobatch(rng, 7, 6, 30, 1);
                      return Values{{"cu", m.cu},
                                    {"cup", m.cup},
                                    {"num_seqs", {double(m.n)}},
                                    {"cup_full", all.cup}};
                    }};
  runPipeline(pipeline, 3);
}

/// thd.max_seqlen saturates at int32 max as reference::maxSeqlenFromCu
/// does: offsets anywhere in int32 (garbage a bad microbatch can hold) are
/// up to 2^32 - 1 apart, which an i32 difference wraps to a negative or
/// small length.
TEST(InterpreterDifferential, MaxSeqlenSaturates) {
  Pipeline pipeline{
      "max_seqlen_range", R"mlir(
func.func @max_seqlen_range(%offsets: tensor<6xi32> {thd.name = "offsets"},
                            %n: tensor<1xi32> {thd.name = "num_seqs"})
    -> (tensor<1xi32> {thd.name = "max_seqlen"},
        tensor<1xi32> {thd.name = "max_seqlen_all"}) {
  %m = thd.max_seqlen %offsets num_seqs %n : tensor<6xi32>
  %ma = thd.max_seqlen %offsets : tensor<6xi32>
  return %m, %ma : tensor<1xi32>, tensor<1xi32>
}
)mlir",
      [](std::mt19937 &rng, int i) {
        constexpr double lo = std::numeric_limits<int32_t>::min();
        constexpr double hi = std::numeric_limits<int32_t>::max();
        // First the extremes: a length of 2^32 - 1 (wraps to
        // -1), of 2^31 (wraps to int32 min), of 2^32 - 2.
        if (i == 0)
          return Values{{"offsets", {0, lo, hi, 0, 0, 0}}, {"num_seqs", {5}}};
        if (i == 1)
          return Values{{"offsets", {0, 0, lo, 0, 0, 0}}, {"num_seqs", {3}}};
        if (i == 2)
          return Values{{"offsets", {0, lo + 1, hi, hi, hi, hi}},
                        {"num_seqs", {2}}};
        std::vector<double> offsets =
            randomValues(rng, 6, std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max());
        return Values{{"offsets", offsets},
                      {"num_seqs", {double(uniform(rng, -1, 7))}}};
      }};
  runPipeline(pipeline, 12);
}

TEST(InterpreterDifferential, PackFromPool) {
  Pipeline pipeline{"pack", R"mlir(
func.func @pack(%pool: tensor<40xi64> {thd.name = "pool"},
                %fpool: tensor<40xf32> {thd.name = "float_pool"},
                %offsets: tensor<6xi32> {thd.name = "offsets"},
                %ids: tensor<5xi32> {thd.name = "ids"},
                %cu: tensor<6xi32> {thd.name = "cu"},
                %cup: tensor<6xi32> {thd.name = "cup"},
                %n: tensor<1xi32> {thd.name = "num_seqs"})
    -> (tensor<24xi64> {thd.name = "packed"}, tensor<24xf32> {thd.name = "packed_f32"}) {
  %p = thd.pack %pool[%offsets, %ids], %cu, %cup num_seqs %n pad -1 capacity 24
      : tensor<40xi64>, tensor<6xi32>, tensor<5xi32>, tensor<6xi32>, tensor<6xi32> -> tensor<24xi64>
  %f = thd.pack %fpool[%offsets, %ids], %cu, %cup num_seqs %n pad 0.5 capacity 24
      : tensor<40xf32>, tensor<6xi32>, tensor<5xi32>, tensor<6xi32>, tensor<6xi32> -> tensor<24xf32>
  return %p, %f : tensor<24xi64>, tensor<24xf32>
}
)mlir",
                    [](std::mt19937 &rng, int i) {
                      Microbatch m = randomMicrobatch(rng, 6, 5, 28, 1);
                      std::vector<double> offsets(6), ids(5);
                      for (int s = 0; s < 6; ++s)
                        offsets[size_t(s)] = double(uniform(rng, 0, 30));
                      for (int s = 0; s < 5; ++s)
                        ids[size_t(s)] = double(uniform(rng, 0, 5));
                      // A third of the cases read out of range: ids outside
                      // the samples, offsets past the pool (clamped reads).
                      if (i % 3 == 2) {
                        ids[size_t(uniform(rng, 0, 4))] =
                            double(uniform(rng, -3, 9));
                        offsets[size_t(uniform(rng, 0, 5))] =
                            double(uniform(rng, -5, 45));
                      }
                      return Values{{"pool", randomValues(rng, 40, 1, 99)},
                                    {"float_pool", randomFloats(rng, 40)},
                                    {"offsets", offsets},
                                    {"ids", ids},
                                    {"cu", m.cu},
                                    {"cup", m.cup},
                                    {"num_seqs", {double(m.n)}}};
                    }};
  runPipeline(pipeline, 4);
}

TEST(InterpreterDifferential, SanitizeAndPadTail) {
  Pipeline pipeline{"sanitize_pad", R"mlir(
func.func @sanitize_pad(%tokens: tensor<12xi64> {thd.name = "tokens"},
                        %loss: tensor<12xf32> {thd.name = "loss"},
                        %mask: tensor<12xi1> {thd.name = "mask"},
                        %cu: tensor<5xi32> {thd.name = "cu"},
                        %cup: tensor<5xi32> {thd.name = "cup"},
                        %n: tensor<1xi32> {thd.name = "num_seqs"},
                        %half: tensor<12xbf16> {thd.name = "half"})
    -> (tensor<16xbf16> {thd.name = "half_out"},
        tensor<12xi64> {thd.name = "tokens_out"}, tensor<12xf32> {thd.name = "loss_out"},
        tensor<12xi64> {thd.name = "by_mask_op"}, tensor<16xi64> {thd.name = "padded"},
        tensor<16xi1> {thd.name = "mask_padded"}, tensor<20xf32> {thd.name = "loss_padded"},
        tensor<16xi64> {thd.name = "sanitized_padded"}) {
  %t = thd.sanitize %tokens, %mask fill 7 : tensor<12xi64>, tensor<12xi1>
  %l = thd.sanitize %loss, %mask fill 0.25 : tensor<12xf32>, tensor<12xi1>
  %m = thd.padding_mask %cu, %cup num_seqs %n capacity 12
      : tensor<5xi32>, tensor<5xi32> -> tensor<12xi1>
  %s = thd.sanitize %tokens, %m : tensor<12xi64>, tensor<12xi1>
  %p = thd.pad_tail %tokens target 16 fill 5 : tensor<12xi64> -> tensor<16xi64>
  %mp = thd.pad_tail %mask target 16 fill true : tensor<12xi1> -> tensor<16xi1>
  %lp = thd.pad_tail %loss target 20 fill -1.5 : tensor<12xf32> -> tensor<20xf32>
  %sp = thd.pad_tail %s target 16 fill 9 : tensor<12xi64> -> tensor<16xi64>
  %h = thd.sanitize %half, %m fill 0.5 : tensor<12xbf16>, tensor<12xi1>
  %hp = thd.pad_tail %h target 16 fill -1.5 : tensor<12xbf16> -> tensor<16xbf16>
  return %hp, %t, %l, %s, %p, %mp, %lp, %sp
      : tensor<16xbf16>, tensor<12xi64>, tensor<12xf32>, tensor<12xi64>, tensor<16xi64>,
        tensor<16xi1>, tensor<20xf32>, tensor<16xi64>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      Microbatch m = randomMicrobatch(rng, 5, 4, 16, 1);
                      return Values{{"tokens", randomValues(rng, 12, -99, 99)},
                                    {"loss", randomFloats(rng, 12)},
                                    {"half", randomFloats(rng, 12)},
                                    {"mask", randomValues(rng, 12, 0, 1)},
                                    {"cu", m.cu},
                                    {"cup", m.cup},
                                    {"num_seqs", {double(m.n)}}};
                    }};
  runPipeline(pipeline, 5);
}

TEST(InterpreterDifferential, CpSliceAndRopePositions) {
  Pipeline pipeline{"slices", R"mlir(
func.func @slices(%tokens: tensor<48xi64> {thd.name = "tokens"},
                  %cup: tensor<7xi32> {thd.name = "cup"},
                  %cup_full: tensor<7xi32> {thd.name = "cup_full"},
                  %rank2: tensor<1xi32> {thd.name = "rank2"},
                  %rank3: tensor<1xi32> {thd.name = "rank3"},
                  %n: tensor<1xi32> {thd.name = "num_seqs"},
                  %max_seqlen: tensor<1xi32> {thd.name = "max_seqlen"})
    -> (tensor<24xi64> {thd.name = "zigzag2"}, tensor<16xi64> {thd.name = "contiguous3"},
        tensor<48xi64> {thd.name = "cp1"}, tensor<24xi32> {thd.name = "rope2"},
        tensor<30xi32> {thd.name = "rope1"}, tensor<24xi32> {thd.name = "rope_table2"}) {
  %z = thd.cp_slice %tokens, %cup, %rank2 num_seqs %n cp 2 mode zigzag
      : tensor<48xi64>, tensor<7xi32> -> tensor<24xi64>
  %zp = thd.pad_tail %z target 24 fill -1 : tensor<24xi64> -> tensor<24xi64>
  %c = thd.cp_slice %tokens, %cup_full, %rank3 num_seqs %n cp 3 mode contiguous
      : tensor<48xi64>, tensor<7xi32> -> tensor<16xi64>
  %one = thd.cp_slice %tokens, %cup, %rank2 num_seqs %n cp 1 mode zigzag
      : tensor<48xi64>, tensor<7xi32> -> tensor<48xi64>
  %r2 = thd.rope_positions %cup, %rank2 num_seqs %n max_seqlen %max_seqlen cp 2 length 24
      table_rows 24 : tensor<7xi32> -> tensor<24xi32>
  %r1 = thd.rope_positions %cup, %rank2 num_seqs %n max_seqlen %max_seqlen cp 1 length 30
      table_rows 30 : tensor<7xi32> -> tensor<30xi32>
  %rt = thd.rope_positions %cup, %rank2 num_seqs %n max_seqlen %max_seqlen cp 2 length 24
      table_rows 40 : tensor<7xi32> -> tensor<24xi32>
  return %zp, %c, %one, %r2, %r1, %rt
      : tensor<24xi64>, tensor<16xi64>, tensor<48xi64>, tensor<24xi32>, tensor<30xi32>,
        tensor<24xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      // Offsets divisible by 12 serve zigzag cp 2 (4) and
                      // contiguous cp 3 (3); rope positions need a sequence.
                      Microbatch m = randomMicrobatch(rng, 7, 6, 48, 12);
                      while (m.n == 0)
                        m = randomMicrobatch(rng, 7, 6, 48, 12);
                      // Contiguous CP slices a buffer padded to all 48 rows
                      // first: its last sequence ends at 48.
                      std::vector<double> full = m.cup;
                      full[size_t(m.n)] = 48;
                      // max_seqlen below, at and above the tables' rows:
                      // positions shifted or not, then clamped.
                      return Values{{"tokens", randomValues(rng, 48, 1, 999)},
                                    {"cup", m.cup},
                                    {"cup_full", full},
                                    {"rank2", {double(uniform(rng, 0, 1))}},
                                    {"rank3", {double(uniform(rng, 0, 2))}},
                                    {"num_seqs", {double(m.n)}},
                                    {"max_seqlen", {double(uniform(rng, 0, 50))}}};
                    }};
  runPipeline(pipeline, 6);
}

/// The gathered slices of every rank back in sequence order: zigzag over
/// 2 and 4 ranks, contiguous over 3, cp = 1, and an unslice feeding a
/// sanitize (fused). Every fourth case has offsets that validation would
/// reject (not divisible by 2*cp or cp, totals past cp*R).
TEST(InterpreterDifferential, CpUnslice) {
  Pipeline pipeline{"unslices", R"mlir(
func.func @unslices(%gathered: tensor<24xi64> {thd.name = "gathered"},
                    %loss: tensor<18xf32> {thd.name = "loss"},
                    %mask: tensor<16xi1> {thd.name = "mask"},
                    %cu: tensor<7xi32> {thd.name = "cu"},
                    %cup: tensor<7xi32> {thd.name = "cup"},
                    %cup3: tensor<7xi32> {thd.name = "cup3"},
                    %n: tensor<1xi32> {thd.name = "num_seqs"},
                    %n3: tensor<1xi32> {thd.name = "num_seqs3"})
    -> (tensor<24xi64> {thd.name = "zigzag2"}, tensor<18xf32> {thd.name = "contiguous3"},
        tensor<16xi1> {thd.name = "zigzag4"}, tensor<24xi64> {thd.name = "cp1"},
        tensor<24xi64> {thd.name = "sanitized"}) {
  %z = thd.cp_unslice %gathered, %cup num_seqs %n cp 2 mode zigzag rows_per_rank 12
      : tensor<24xi64>, tensor<7xi32> -> tensor<24xi64>
  %c = thd.cp_unslice %loss, %cup3 num_seqs %n3 cp 3 mode contiguous rows_per_rank 6
      : tensor<18xf32>, tensor<7xi32> -> tensor<18xf32>
  %z4 = thd.cp_unslice %mask, %cup num_seqs %n cp 4 mode zigzag rows_per_rank 4
      : tensor<16xi1>, tensor<7xi32> -> tensor<16xi1>
  %one = thd.cp_unslice %gathered, %cup num_seqs %n cp 1 mode zigzag rows_per_rank 24
      : tensor<24xi64>, tensor<7xi32> -> tensor<24xi64>
  %m = thd.padding_mask %cu, %cup num_seqs %n capacity 24
      : tensor<7xi32>, tensor<7xi32> -> tensor<24xi1>
  %s = thd.sanitize %z, %m fill -1 : tensor<24xi64>, tensor<24xi1>
  return %z, %c, %z4, %one, %s
      : tensor<24xi64>, tensor<18xf32>, tensor<16xi1>, tensor<24xi64>, tensor<24xi64>
}
)mlir",
                    [](std::mt19937 &rng, int i) {
                      // Offsets divisible by 8 serve zigzag over 2 and 4
                      // ranks, by 3 contiguous over 3; up to the smallest
                      // capacity (16) or, when faulty, any offsets up to 40.
                      bool faulty = i % 4 == 3;
                      Microbatch m = randomMicrobatch(
                          rng, 7, 6, faulty ? 40 : 16, faulty ? 1 : 8);
                      Microbatch m3 = randomMicrobatch(
                          rng, 7, 6, faulty ? 40 : 18, faulty ? 1 : 3);
                      return Values{{"gathered", randomValues(rng, 24, 1, 999)},
                                    {"loss", randomFloats(rng, 18)},
                                    {"mask", randomValues(rng, 16, 0, 1)},
                                    {"cu", m.cu},
                                    {"cup", m.cup},
                                    {"cup3", m3.cup},
                                    {"num_seqs", {double(m.n)}},
                                    {"num_seqs3", {double(m3.n)}}};
                    },
                    200};
  runPipeline(pipeline, 12);
}

TEST(InterpreterDifferential, PadTailMetadata) {
  Pipeline pipeline{"tail", R"mlir(
func.func @tail(%cu: tensor<7xi32> {thd.name = "cu"},
                %cup: tensor<7xi32> {thd.name = "cup"},
                %ms: tensor<1xi32> {thd.name = "max_seqlen"},
                %n: tensor<1xi32> {thd.name = "num_seqs"})
    -> (tensor<8xi32> {thd.name = "append_cu"}, tensor<8xi32> {thd.name = "append_cup"},
        tensor<1xi32> {thd.name = "append_max"}, tensor<1xi32> {thd.name = "append_n"},
        tensor<8xi32> {thd.name = "extend_cu"}, tensor<8xi32> {thd.name = "extend_cup"},
        tensor<1xi32> {thd.name = "extend_max"}, tensor<1xi32> {thd.name = "extend_n"},
        tensor<8xi32> {thd.name = "none_cu"}, tensor<8xi32> {thd.name = "none_cup"},
        tensor<1xi32> {thd.name = "none_max"}, tensor<1xi32> {thd.name = "none_n"},
        tensor<8xi32> {thd.name = "aligned_cu"}, tensor<8xi32> {thd.name = "aligned_cup"},
        tensor<1xi32> {thd.name = "aligned_max"}, tensor<1xi32> {thd.name = "aligned_n"}) {
  %a:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag target 12
      max_seqs 7 policy append_dummy_sequence : tensor<7xi32>, tensor<7xi32> -> tensor<8xi32>, tensor<8xi32>
  %e:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag target 12
      max_seqs 7 policy extend_last : tensor<7xi32>, tensor<7xi32> -> tensor<8xi32>, tensor<8xi32>
  %o:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag target 12
      max_seqs 7 policy none : tensor<7xi32>, tensor<7xi32> -> tensor<8xi32>, tensor<8xi32>
  %g:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp 2 mode zigzag alignment 8
      max_seqs 7 policy append_dummy_sequence : tensor<7xi32>, tensor<7xi32> -> tensor<8xi32>, tensor<8xi32>
  return %a#0, %a#1, %a#2, %a#3, %e#0, %e#1, %e#2, %e#3, %o#0, %o#1, %o#2, %o#3,
         %g#0, %g#1, %g#2, %g#3
      : tensor<8xi32>, tensor<8xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<8xi32>, tensor<8xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<8xi32>, tensor<8xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<8xi32>, tensor<8xi32>, tensor<1xi32>, tensor<1xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      // Totals up to 24 = target * cp, offsets divisible by
                      // 2cp; extend_last needs a sequence.
                      Microbatch m = randomMicrobatch(rng, 7, 6, 24, 4);
                      while (m.n == 0)
                        m = randomMicrobatch(rng, 7, 6, 24, 4);
                      return Values{
                          {"cu", m.cu},
                          {"cup", m.cup},
                          {"max_seqlen", {double(uniform(rng, 0, 30))}},
                          {"num_seqs", {double(m.n)}}};
                    }};
  runPipeline(pipeline, 7);
}

/// Offsets of `entries` entries, every one meaningful: lengths from 0 up,
/// a third of them zero-length, summing to at most `maxTotal`.
std::vector<double> monotoneOffsets(std::mt19937 &rng, int64_t entries,
                                    int64_t maxTotal) {
  std::vector<double> cu(size_t(entries), 0);
  int64_t total = 0;
  for (int64_t i = 1; i < entries; ++i) {
    int64_t room = maxTotal - total;
    int64_t length =
        chance(rng, 33) ? 0 : uniform(rng, 0, std::min<int64_t>(room, 24));
    total += length;
    cu[size_t(i)] = double(total);
  }
  return cu;
}

TEST(InterpreterDifferential, LinearChunks) {
  Pipeline pipeline{"linear_chunks", R"mlir(
func.func @linear_chunks(%cup: tensor<9xi32> {thd.name = "cup"})
    -> (tensor<96xi32> {thd.name = "indices_1"}, tensor<9xi32> {thd.name = "offsets_1"},
        tensor<1xi32> {thd.name = "count_1"},
        tensor<36xi32> {thd.name = "indices_4"}, tensor<9xi32> {thd.name = "offsets_4"},
        tensor<1xi32> {thd.name = "count_4"},
        tensor<18xi32> {thd.name = "indices_64"}, tensor<9xi32> {thd.name = "offsets_64"},
        tensor<1xi32> {thd.name = "count_64"}) {
  %a:3 = thd.linear_chunks %cup chunk_size 1 rows 40 : tensor<9xi32> -> tensor<96xi32>, tensor<9xi32>
  %b:3 = thd.linear_chunks %cup chunk_size 4 rows 40 : tensor<9xi32> -> tensor<36xi32>, tensor<9xi32>
  %c:3 = thd.linear_chunks %cup chunk_size 64 rows 40 : tensor<9xi32> -> tensor<18xi32>, tensor<9xi32>
  return %a#0, %a#1, %a#2, %b#0, %b#1, %b#2, %c#0, %c#1, %c#2
      : tensor<96xi32>, tensor<9xi32>, tensor<1xi32>,
        tensor<36xi32>, tensor<9xi32>, tensor<1xi32>,
        tensor<18xi32>, tensor<9xi32>, tensor<1xi32>
}
)mlir",
                    [](std::mt19937 &rng, int) {
                      // Up to the 40 rows, zero-length entries anywhere
                      // (the last one included).
                      return Values{{"cup", monotoneOffsets(rng, 9, 40)}};
                    }};
  runPipeline(pipeline, 11);
}

/// The chunks of a step's padded offsets, at cp 1, 2, 4 and 8: the offsets
/// of thd.pad_tail_metadata (a dummy over the tail, N+1 entries) read with
/// the step's C*cp rows.
TEST(InterpreterDifferential, LinearChunksOfStep) {
  for (int64_t cp : {1, 2, 4, 8}) {
    const int64_t C = 8, N = 6;
    Pipeline pipeline{"linear_chunks_step", R"mlir(
module attributes {thd.params = {C = 8 : i64, cp = 1 : i64, N = 6 : i64}} {
func.func @linear_chunks_step(
    %cu: tensor<?xi32> {thd.name = "cu", thd.capacity = #thd.expr<"N+1">},
    %cup: tensor<?xi32> {thd.name = "cup", thd.capacity = #thd.expr<"N+1">},
    %ms: tensor<1xi32> {thd.name = "max_seqlen"},
    %n: tensor<1xi32> {thd.name = "num_seqs"})
    -> (tensor<?xi32> {thd.name = "cup_out"},
        tensor<?xi32> {thd.name = "indices_16"}, tensor<?xi32> {thd.name = "offsets_16"},
        tensor<1xi32> {thd.name = "count_16"},
        tensor<?xi32> {thd.name = "indices_4"}, tensor<?xi32> {thd.name = "offsets_4"},
        tensor<1xi32> {thd.name = "count_4"}) {
  %t:4 = thd.pad_tail_metadata %cu, %cup, %ms num_seqs %n cp "cp" mode zigzag target "C"
      max_seqs "N" policy append_dummy_sequence
      : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  %a:3 = thd.linear_chunks %t#1 chunk_size 16 rows "C*cp" : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  %b:3 = thd.linear_chunks %t#1 chunk_size 4 rows "C*cp" : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>
  return %t#1, %a#0, %a#1, %a#2, %b#0, %b#1, %b#2
      : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
}
)mlir",
                      [C = C, cp = cp, N = N](std::mt19937 &rng, int) {
                        // At most N-1 sequences, so the dummy has a slot.
                        int64_t multiple = cp > 1 ? 2 * cp : 1;
                        Microbatch m =
                            randomMicrobatch(rng, N + 1, N - 1, C * cp, multiple);
                        return Values{
                            {"cu", m.cu},
                            {"cup", m.cup},
                            {"max_seqlen", {double(uniform(rng, 0, C * cp))}},
                            {"num_seqs", {double(m.n)}}};
                      },
                      60,
                      {{"C", C}, {"cp", cp}, {"N", N}}};
    runPipeline(pipeline, uint32_t(70 + cp));
  }
}

/// The compiled code against reference::linearChunks directly, on the
/// golden rows of docs/semantics.md S15.
TEST(InterpreterDifferential, LinearChunksGolden) {
  struct Golden {
    std::vector<int32_t> cu;
    int64_t chunkSize, rows;
  };
  for (const Golden &golden : {Golden{{0, 5, 64, 200, 200, 200}, 64, 200},
                               Golden{{0, 6, 10, 16, 16}, 4, 16},
                               Golden{{0, 3, 8}, 4, 8},
                               Golden{{0, 8, 8, 8}, 4, 8}}) {
    int64_t entries = int64_t(golden.cu.size());
    int64_t capacity = thdc::reference::linearChunkCapacity(
        golden.rows, entries - 1, golden.chunkSize);
    thdc::Result<thdc::reference::LinearChunks> want =
        thdc::reference::linearChunks(golden.cu, golden.chunkSize, capacity);
    ASSERT_TRUE(want) << want.status().message();
    std::string cu = "tensor<" + std::to_string(entries) + "xi32>";
    std::string indices = "tensor<" + std::to_string(2 * capacity) + "xi32>";
    std::string text = "func.func @golden(%cup: " + cu +
                       " {thd.name = \"cup\"}) -> (" + indices + ", " + cu +
                       ", tensor<1xi32>) {\n  %c:3 = thd.linear_chunks %cup "
                       "chunk_size " +
                       std::to_string(golden.chunkSize) + " rows " +
                       std::to_string(golden.rows) + " : " + cu + " -> " +
                       indices + ", " + cu + "\n  return %c#0, %c#1, %c#2 : " +
                       indices + ", " + cu + ", tensor<1xi32>\n}\n";
    std::string error;
    std::unique_ptr<Compiled> compiled = compile(text, "golden", {}, error);
    ASSERT_TRUE(compiled) << error;
    std::vector<int32_t> input = golden.cu;
    std::vector<int32_t> gotIndices(static_cast<size_t>(2 * capacity));
    std::vector<int32_t> gotOffsets(static_cast<size_t>(entries));
    std::vector<int32_t> gotCount(1);
    std::vector<void *> pointers = {input.data(), gotIndices.data(),
                                    gotOffsets.data(), gotCount.data()};
    ASSERT_TRUE(compiled->host->run(pointers, error)) << error;
    EXPECT_EQ(gotIndices, want->chunkIndices);
    EXPECT_EQ(gotOffsets, want->chunkOffsets);
    EXPECT_EQ(gotCount[0], want->chunkCount);
  }
}

/// A microbatch of `entries - 1` sequences (every slot of the cu arrays)
/// whose padded lengths, multiples of `multiple`, sum to `total`.
Microbatch allSlotsMicrobatch(std::mt19937 &rng, int64_t entries,
                              int64_t total, int64_t multiple) {
  Microbatch m;
  m.n = entries - 1;
  std::vector<int64_t> cuts{0, total / multiple};
  for (int64_t i = 1; i < m.n; ++i)
    cuts.push_back(uniform(rng, 0, total / multiple));
  std::sort(cuts.begin(), cuts.end());
  m.cu.assign(size_t(entries), 0);
  m.cup.assign(size_t(entries), 0);
  for (int64_t i = 1; i <= m.n; ++i) {
    int64_t p = (cuts[size_t(i)] - cuts[size_t(i - 1)]) * multiple;
    m.cup[size_t(i)] = m.cup[size_t(i - 1)] + double(p);
    m.cu[size_t(i)] = m.cu[size_t(i - 1)] + double(uniform(rng, 0, p));
  }
  return m;
}

/// Metadata with one or more faults drawn at random, for thd.validate.
Values faultyMetadata(std::mt19937 &rng, int64_t entries, int64_t maxSeqs,
                      int64_t maxTotal, int64_t multiple, int64_t cp) {
  Microbatch m = randomMicrobatch(rng, entries, entries - 1, maxTotal + 8,
                                  multiple, /*validAbovePadded=*/true);
  double n = double(m.n), rank = double(uniform(rng, 0, cp - 1));
  if (chance(rng, 15))
    n = double(uniform(rng, -3, entries + 2)); // bit 1 (and beyond the array)
  if (chance(rng, 10))
    rank = double(chance(rng, 50) ? -1 : cp + uniform(rng, 0, 2)); // bit 32
  int64_t meaningful = std::clamp<int64_t>(int64_t(n), 0, entries - 1);
  if (chance(rng, 15)) // bit 8: a decrease or a nonzero start
    (chance(rng, 50) ? m.cu : m.cup)[size_t(uniform(rng, 0, meaningful))] -=
        double(uniform(rng, 1, 5));
  if (chance(rng, 15)) // bit 4
    m.cup[size_t(uniform(rng, 0, meaningful))] += double(uniform(rng, 1, 3));
  (void)maxSeqs;
  return Values{
      {"cu", m.cu}, {"cup", m.cup}, {"num_seqs", {n}}, {"cp_rank", {rank}}};
}

TEST(InterpreterDifferential, ValidateStatusBits) {
  Pipeline pipeline{
      "validate", R"mlir(
func.func @validate(%cu: tensor<7xi32> {thd.name = "cu"},
                    %cup: tensor<7xi32> {thd.name = "cup"},
                    %rank: tensor<1xi32> {thd.name = "cp_rank"},
                    %n: tensor<1xi32> {thd.name = "num_seqs"},
                    %offsets: tensor<6xi32> {thd.name = "offsets"},
                    %lengths: tensor<6xi32> {thd.name = "lengths"},
                    %ids: tensor<5xi32> {thd.name = "ids"},
                    %rows: tensor<1xi32> {thd.name = "rows"})
    -> (tensor<1xi32> {thd.name = "zigzag_status"}, tensor<1xi32> {thd.name = "zigzag_n"},
        tensor<1xi32> {thd.name = "contiguous_status"}, tensor<1xi32> {thd.name = "contiguous_n"},
        tensor<1xi32> {thd.name = "cp1_status"}, tensor<1xi32> {thd.name = "cp1_n"},
        tensor<1xi32> {thd.name = "samples_status"}, tensor<1xi32> {thd.name = "samples_n"},
        tensor<1xi32> {thd.name = "all_status"}, tensor<1xi32> {thd.name = "all_n"},
        tensor<1xi32> {thd.name = "rows_status"}, tensor<1xi32> {thd.name = "rows_n"},
        tensor<1xi32> {thd.name = "slot_status"}, tensor<1xi32> {thd.name = "slot_n"},
        tensor<1xi32> {thd.name = "contiguous3_status"},
        tensor<1xi32> {thd.name = "contiguous3_n"}) {
  %s0, %n0 = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode zigzag
      max_tokens 24 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  %s1, %n1 = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode contiguous
      max_tokens 24 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  %s2, %n2 = thd.validate %cu, %cup, %rank num_seqs %n cp 1 mode zigzag
      max_tokens 24 max_seqs 6 : tensor<7xi32>, tensor<7xi32>
  %s3, %n3 = thd.validate %cu, %cup, %rank num_seqs %n
      samples(%offsets, %lengths, %ids : tensor<6xi32>, tensor<6xi32>, tensor<5xi32>)
      pool_rows 40 cp 2 mode zigzag max_tokens 24 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  %s4, %n4 = thd.validate %cu, %cup, %rank cp 2 mode zigzag
      max_tokens 24 max_seqs 6 : tensor<7xi32>, tensor<7xi32>
  %s5, %n5 = thd.validate %cu, %cup, %rank num_seqs %n rows %rows cp 2 mode zigzag
      max_tokens 24 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  %s6, %n6 = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode zigzag
      max_tokens 24 max_seqs 6 tail_slot : tensor<7xi32>, tensor<7xi32>
  %s7, %n7 = thd.validate %cu, %cup, %rank num_seqs %n cp 3 mode contiguous
      max_tokens 24 max_seqs 6 tail_slot : tensor<7xi32>, tensor<7xi32>
  return %s0, %n0, %s1, %n1, %s2, %n2, %s3, %n3, %s4, %n4, %s5, %n5, %s6, %n6, %s7, %n7
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<1xi32>
}
)mlir",
      [](std::mt19937 &rng, int) {
        Values values = faultyMetadata(rng, 7, 5, 24, 4, 2);
        if (chance(rng, 20)) { // six sequences, with or without a tail
          Microbatch m = allSlotsMicrobatch(
              rng, 7, chance(rng, 50) ? 24 : 20, chance(rng, 50) ? 4 : 1);
          values["cu"] = m.cu;
          values["cup"] = m.cup;
          values["num_seqs"] = {double(m.n)};
        }
        std::vector<double> offsets(6), lengths(6), ids(5);
        for (int s = 0; s < 6; ++s) {
          lengths[size_t(s)] = double(uniform(rng, 0, 10));
          offsets[size_t(s)] = double(uniform(rng, 0, 30));
        }
        for (int s = 0; s < 5; ++s)
          ids[size_t(s)] = double(uniform(rng, 0, 5));
        if (chance(rng, 25)) // bit 64
          ids[size_t(uniform(rng, 0, 4))] = double(uniform(rng, -2, 8));
        if (chance(rng, 25))
          offsets[size_t(uniform(rng, 0, 5))] = double(uniform(rng, -3, 40));
        if (chance(rng, 15))
          lengths[size_t(uniform(rng, 0, 5))] = double(uniform(rng, -3, 2));
        values["offsets"] = offsets;
        values["lengths"] = lengths;
        values["ids"] = ids;
        // The rows given (bit 128): around the packed total, negative too.
        values["rows"] = {double(uniform(rng, -2, 26))};
        return values;
      },
      300};
  runPipeline(pipeline, 8);
}

/// thd.dropped after thd.validate, and on a status given directly. Case i
/// of every 3: i % 3 == 0 valid metadata (nothing dropped), 1 faults drawn
/// at random, 2 valid metadata with a cp_rank out of range, so at least a
/// third of the cases are certainly invalid and drop a nonzero count of
/// sequences and tokens whenever their num_seqs is. The direct status is
/// nonzero in half the cases, on cu arrays with garbage (negative entries
/// included) and num_seqs outside the array.
TEST(InterpreterDifferential, DroppedAfterValidate) {
  Pipeline pipeline{"dropped", R"mlir(
func.func @dropped(%cu: tensor<7xi32> {thd.name = "cu"},
                   %cup: tensor<7xi32> {thd.name = "cup"},
                   %rank: tensor<1xi32> {thd.name = "cp_rank"},
                   %n: tensor<1xi32> {thd.name = "num_seqs"},
                   %raw_status: tensor<1xi32> {thd.name = "raw_status"},
                   %raw_cu: tensor<5xi32> {thd.name = "raw_cu"},
                   %raw_n: tensor<1xi32> {thd.name = "raw_num_seqs"})
    -> (tensor<1xi32> {thd.name = "status"}, tensor<1xi32> {thd.name = "checked_num_seqs"},
        tensor<1xi32> {thd.name = "dropped_seqs"}, tensor<1xi32> {thd.name = "dropped_tokens"},
        tensor<1xi32> {thd.name = "raw_dropped_seqs"},
        tensor<1xi32> {thd.name = "raw_dropped_tokens"}) {
  %status, %checked = thd.validate %cu, %cup, %rank num_seqs %n cp 2 mode zigzag
      max_tokens 24 max_seqs 5 : tensor<7xi32>, tensor<7xi32>
  %seqs, %tokens = thd.dropped %status, %cu num_seqs %n : tensor<7xi32>
  %raw_seqs, %raw_tokens = thd.dropped %raw_status, %raw_cu num_seqs %raw_n : tensor<5xi32>
  return %status, %checked, %seqs, %tokens, %raw_seqs, %raw_tokens
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<1xi32>
}
)mlir",
                    [](std::mt19937 &rng, int i) {
                      Values values;
                      if (i % 3 == 1) {
                        values = faultyMetadata(rng, 7, 5, 24, 4, 2);
                      } else {
                        Microbatch m = randomMicrobatch(rng, 7, 5, 24, 4);
                        double rank = double(uniform(rng, 0, 1));
                        if (i % 3 == 2)
                          rank = chance(rng, 50) ? -1 : 2 + uniform(rng, 0, 3);
                        values = Values{{"cu", m.cu},
                                        {"cup", m.cup},
                                        {"num_seqs", {double(m.n)}},
                                        {"cp_rank", {rank}}};
                      }
                      values["raw_status"] = {
                          chance(rng, 50) ? 0.0
                                          : double(uniform(rng, -5, 127))};
                      values["raw_cu"] = randomValues(rng, 5, -20, 100);
                      values["raw_num_seqs"] = {double(uniform(rng, -3, 8))};
                      return values;
                    },
                    300};
  runPipeline(pipeline, 13);
}

//===----------------------------------------------------------------------===//
// The examples
//===----------------------------------------------------------------------===//

std::string example(const char *name) {
  std::string error;
  std::string text =
      thdc::testing::readSourceFile(std::string("examples/") + name, error);
  EXPECT_EQ(error, "");
  return text;
}

/// Inputs of a graph-mode step (megatron_graph_step.mlir's interface; an
/// example ignores what it does not read): every third case has faulty
/// metadata, the others valid metadata whose padded lengths are multiples
/// of `multiple` with at most `maxSeqs` sequences in C*cp rows.
Values graphStepValues(std::mt19937 &rng, int i, int64_t C, int64_t cp,
                       int64_t N, int64_t multiple, int64_t maxSeqs,
                       bool allSlots = false) {
  Values values;
  if (i % 3 == 2) {
    values = faultyMetadata(rng, N + 1, maxSeqs, C * cp, multiple, cp);
  } else if (allSlots && i % 6 == 1) {
    // Every slot a real sequence: valid when they fill the C*cp rows (no
    // tail, no dummy), invalid with a tail (no slot for its dummy).
    int64_t tail = chance(rng, 30) ? multiple * uniform(rng, 1, 2) : 0;
    Microbatch m = allSlotsMicrobatch(rng, N + 1,
                                      std::max<int64_t>(C * cp - tail, 0),
                                      multiple);
    values = Values{{"cu", m.cu},
                    {"cup", m.cup},
                    {"num_seqs", {double(m.n)}},
                    {"cp_rank", {double(uniform(rng, 0, cp - 1))}}};
  } else {
    Microbatch m = randomMicrobatch(rng, N + 1, maxSeqs, C * cp, multiple);
    values = Values{{"cu", m.cu},
                    {"cup", m.cup},
                    {"num_seqs", {double(m.n)}},
                    {"cp_rank", {double(uniform(rng, 0, cp - 1))}}};
  }
  values["cu_seqlens"] = values["cu"];
  values["cu_seqlens_padded"] = values["cup"];
  values["tokens"] = randomValues(rng, C * cp, 1, 999);
  values["labels"] = randomValues(rng, C * cp, 1, 999);
  values["position_ids"] = randomValues(rng, C * cp, 0, 99);
  values["loss_mask"] = randomFloats(rng, C * cp);
  return values;
}

/// The graph-mode steps: the dummy, extend_last and no tail policies,
/// contiguous CP, and the middle pipeline stage (mask and metadata only).
TEST(InterpreterDifferential, GraphStepExamples) {
  struct Example {
    const char *file;
    bool contiguous;  ///< offsets need be multiples of nothing
    bool dummySlot;   ///< a tail keeps one of the N slots for the dummy
  };
  for (Example example_ : {Example{"megatron_graph_step.mlir", false, true},
                           Example{"graph_step_no_dummy.mlir", false, false},
                           Example{"graph_step_extend_last.mlir", false, false},
                           Example{"contiguous_cp_step.mlir", true, true},
                           Example{"middle_stage_step.mlir", false, true}}) {
    // The last shape spans several thread blocks on the GPU.
    for (auto [C, cp, N] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 6},
                            {12, 3, 5},
                            {8, 4, 6},
                            {16, 1, 4},
                            {1024, 2, 40}}) {
      // Contiguous CP: offsets of any length (megatron-core dev checks only
      // the padded total, data_schedule_utils.py:26-100).
      int64_t multiple = cp == 1 || example_.contiguous ? 1 : 2 * cp;
      int64_t maxSeqs = example_.dummySlot ? N - 1 : N;
      bool allSlots = example_.dummySlot;
      Pipeline pipeline{example_.file, example(example_.file),
                        [C = C, cp = cp, N = N, multiple, maxSeqs,
                         allSlots](std::mt19937 &rng, int i) {
                          return graphStepValues(rng, i, C, cp, N, multiple,
                                                 maxSeqs, allSlots);
                        },
                        C > 100 ? 20 : 60,
                        {{"C", C}, {"cp", cp}, {"N", N}}};
      SCOPED_TRACE(std::string(example_.file) + " C=" + std::to_string(C) +
                   " cp=" + std::to_string(cp));
      runPipeline(pipeline, uint32_t(10 + C));
    }
  }
}

/// The ranks' rows gathered back into sequence order (examples/
/// cp_unslice.mlir) with the graph step's metadata: valid microbatches and,
/// every third case, faulty metadata (which validation turns into an empty
/// microbatch, so the gathered rows come back as they are).
TEST(InterpreterDifferential, CpUnsliceExample) {
  for (auto [C, cp, N] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 6},
                          {12, 3, 5},
                          {8, 4, 6},
                          {16, 1, 4},
                          {1024, 2, 40}}) {
    Pipeline pipeline{"cp_unslice.mlir",
                      example("cp_unslice.mlir"),
                      [C = C, cp = cp, N = N](std::mt19937 &rng, int i) {
                        Values values = graphStepValues(
                            rng, i, C, cp, N, cp > 1 ? 2 * cp : 1, N - 1,
                            /*allSlots=*/true);
                        values["gathered_tokens"] = values["tokens"];
                        values["gathered_loss"] = values["loss_mask"];
                        return values;
                      },
                      C > 100 ? 20 : 60,
                      {{"C", C}, {"cp", cp}, {"N", N}}};
    SCOPED_TRACE("cp_unslice.mlir C=" + std::to_string(C) +
                 " cp=" + std::to_string(cp));
    runPipeline(pipeline, uint32_t(70 + C + cp));
  }
}

/// cu arrays padded to a static count of entries (the graphs' inputs), on
/// valid and on faulty metadata (counts out of range included).
TEST(InterpreterDifferential, StaticCuSeqlens) {
  for (auto [C, cp, N] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 6},
                          {16, 1, 4},
                          {1024, 2, 40}}) {
    Pipeline pipeline{"static_cu_seqlens.mlir", example("static_cu_seqlens.mlir"),
                      [C = C, cp = cp, N = N](std::mt19937 &rng, int i) {
                        return graphStepValues(rng, i, C, cp, N,
                                               cp > 1 ? 2 * cp : 1, N);
                      },
                      60,
                      {{"N", N}}};
    runPipeline(pipeline, uint32_t(50 + N));
  }
}

/// RoPE rows and seq_idx from a step's metadata: at least one sequence (the
/// semantics continues the last one), tables shorter and longer than
/// max_seqlen.
TEST(InterpreterDifferential, ModelPositions) {
  for (auto [C, cp, N, R] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{8, 2, 6, 16},
        {12, 3, 5, 100},
        {16, 1, 4, 9}}) {
    Pipeline pipeline{
        "model_positions.mlir", example("model_positions.mlir"),
        [C = C, cp = cp, N = N](std::mt19937 &rng, int) {
          int64_t multiple = cp > 1 ? 2 * cp : 1;
          Microbatch m = randomMicrobatch(rng, N + 1, N, C * cp, multiple);
          while (m.n == 0)
            m = randomMicrobatch(rng, N + 1, N, C * cp, multiple);
          return Values{
              {"cu_seqlens_padded", m.cup},
              {"num_seqs", {double(m.n)}},
              {"max_seqlen", {double(uniform(rng, 0, 2 * C * cp))}},
              {"cp_rank", {double(uniform(rng, 0, cp - 1))}}};
        },
        60,
        {{"C", C}, {"cp", cp}, {"N", N}, {"R", R}}};
    runPipeline(pipeline, uint32_t(30 + C));
  }
}

/// Inputs of pack_microbatch.mlir and its variants: a pool of S samples in
/// P rows, chosen ids whose padded lengths (multiples of `multiple`) fit
/// C*cp in most cases; every fifth case has faults (counts, ids, rows).
Values packValues(std::mt19937 &rng, int i, int64_t C, int64_t cp, int64_t N,
                  int64_t P, int64_t S, int64_t multiple) {
  std::vector<double> offsets(static_cast<size_t>(S)),
      lengths(static_cast<size_t>(S)), ids(size_t(N - 1));
  for (int64_t s = 0; s < S; ++s) {
    lengths[size_t(s)] = double(uniform(rng, 0, C * cp / 3));
    offsets[size_t(s)] =
        double(uniform(rng, 0, P - int64_t(lengths[size_t(s)])));
  }
  int64_t n = uniform(rng, 0, N - 1), total = 0, chosen = 0;
  for (; chosen < n; ++chosen) {
    int64_t id = uniform(rng, 0, S - 1);
    int64_t padded =
        (int64_t(lengths[size_t(id)]) + multiple - 1) / multiple * multiple;
    if (total + padded > C * cp && i % 4 != 3)
      break;
    total += padded;
    ids[size_t(chosen)] = double(id);
  }
  for (int64_t k = chosen; k < N - 1; ++k)
    ids[size_t(k)] = double(uniform(rng, -2, S + 2));
  double numSeqs = double(chosen);
  if (i % 5 == 4) { // faults: counts, ids and rows out of range
    if (chance(rng, 40))
      numSeqs = double(uniform(rng, -2, N + 2));
    if (chance(rng, 50))
      ids[size_t(uniform(rng, 0, N - 2))] = double(uniform(rng, -3, S + 3));
    if (chance(rng, 50))
      offsets[size_t(uniform(rng, 0, S - 1))] =
          double(uniform(rng, P - 3, P + 9));
  }
  return Values{{"token_pool", randomValues(rng, P, 1, 999)},
                {"label_pool", randomValues(rng, P, 1, 999)},
                {"loss_mask_pool", randomFloats(rng, P)},
                {"sample_offsets", offsets},
                {"sample_lengths", lengths},
                {"sample_ids", ids},
                {"num_seqs", {numSeqs}},
                {"cp_rank", {double(uniform(rng, 0, cp - 1))}}};
}

TEST(InterpreterDifferential, PackMicrobatch) {
  for (auto [C, cp, N] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 6},
                          {12, 3, 5},
                          {16, 1, 4}}) {
    const int64_t P = 64, S = 8;
    Pipeline pipeline{"pack_microbatch.mlir", example("pack_microbatch.mlir"),
                      [C = C, cp = cp, N = N, P, S](std::mt19937 &rng, int i) {
                        return packValues(rng, i, C, cp, N, P, S,
                                          cp > 1 ? 2 * cp : 1);
                      },
                      60,
                      {{"C", C}, {"cp", cp}, {"N", N}, {"P", P}, {"S", S}}};
    runPipeline(pipeline, uint32_t(20 + C));
  }
}

/// Dynamic CP: lengths padded to multiples of 2*cp*dp, whatever cp is.
TEST(InterpreterDifferential, PackMicrobatchDynamicCp) {
  for (auto [C, cp, dp, N] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{16, 2, 2, 6},
        {24, 1, 3, 5},
        {12, 3, 1, 4}}) {
    const int64_t P = 64, S = 8;
    Pipeline pipeline{
        "pack_microbatch_dynamic_cp.mlir",
        example("pack_microbatch_dynamic_cp.mlir"),
        [C = C, cp = cp, dp = dp, N = N, P, S](std::mt19937 &rng, int i) {
          return packValues(rng, i, C, cp, N, P, S, 2 * cp * dp);
        },
        60,
        {{"C", C}, {"cp", cp}, {"dp", dp}, {"N", N}, {"P", P}, {"S", S}}};
    runPipeline(pipeline, uint32_t(40 + C));
  }
}

//===----------------------------------------------------------------------===//
// The interpreter on its own: unfused pipelines, diagnostics
//===----------------------------------------------------------------------===//

/// Parses `text` (no pass run), interprets its function on `inputs` and
/// returns the diagnostics; `results` gets the outputs on success.
std::string interpretText(const std::string &text,
                          const std::vector<Values::mapped_type> &inputs,
                          std::vector<Buffer> *results = nullptr) {
  mlir::MLIRContext &context = thdc::testing::compilerContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module)
    return "parse error: " + diagnostics;
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  std::vector<Buffer> buffers;
  for (auto [argument, values] :
       llvm::zip(function.getArgumentTypes(), inputs)) {
    auto type = llvm::cast<mlir::RankedTensorType>(argument);
    Buffer buffer(type.getElementType(), type.hasStaticShape()
                                             ? type.getDimSize(0)
                                             : int64_t(values.size()));
    for (int64_t i = 0; i < buffer.size(); ++i)
      store(buffer, i, values[size_t(i)]);
    buffers.push_back(std::move(buffer));
  }
  mlir::FailureOr<std::vector<Buffer>> outputs =
      thdc::interpreter::run(function, buffers);
  if (succeeded(outputs) && results)
    *results = std::move(*outputs);
  return diagnostics;
}

TEST(Interpreter, UnfusedStaticPipeline) {
  // The running example of docs/semantics.md, S5 + S6 + S7 + S10 for rank 0, unfused.
  std::vector<Buffer> results;
  std::string diagnostics = interpretText(
      R"mlir(
func.func @step(%tokens: tensor<16xi64>, %cu: tensor<7xi32>, %cup: tensor<7xi32>,
                %n: tensor<1xi32>, %rank: tensor<1xi32>) -> (tensor<8xi64>, tensor<8xi1>) {
  %mask = thd.padding_mask %cu, %cup num_seqs %n capacity 16
      : tensor<7xi32>, tensor<7xi32> -> tensor<16xi1>
  %tok = thd.sanitize %tokens, %mask : tensor<16xi64>, tensor<16xi1>
  %tok_r = thd.cp_slice %tok, %cup, %rank num_seqs %n cp 2 mode zigzag
      : tensor<16xi64>, tensor<7xi32> -> tensor<8xi64>
  %mask_r = thd.cp_slice %mask, %cup, %rank num_seqs %n cp 2 mode zigzag
      : tensor<16xi1>, tensor<7xi32> -> tensor<8xi1>
  %tok_out = thd.pad_tail %tok_r target 8 : tensor<8xi64> -> tensor<8xi64>
  %mask_out = thd.pad_tail %mask_r target 8 fill true : tensor<8xi1> -> tensor<8xi1>
  return %tok_out, %mask_out : tensor<8xi64>, tensor<8xi1>
}
)mlir",
      {{11, 12, 13, -1, 21, 22, -1, -1, 31, 32, 33, 34, 7, 7, 7, 7},
       {0, 3, 5, 9, 50, 60, 70},
       {0, 4, 8, 12, 90, 99, 99},
       {3},
       {0}},
      &results);
  ASSERT_EQ(diagnostics, "");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].values<int64_t>(),
            (std::vector<int64_t>{11, 0, 21, 0, 31, 34, 0, 0}));
  EXPECT_EQ(results[1].values<uint8_t>(),
            (std::vector<uint8_t>{0, 1, 0, 1, 0, 0, 1, 1}));
}

TEST(Interpreter, Diagnostics) {
  // A dynamic shape: thd-force-static-shapes has not run.
  EXPECT_NE(interpretText(R"mlir(
func.func @f(%v: tensor<?xi32>) -> tensor<?xi32> {
  %p = thd.align_lengths %v cp 2 tp 1 : tensor<?xi32>
  return %p : tensor<?xi32>
}
)mlir",
                          {{1, 2, 3}})
                .find("run thd-force-static-shapes first"),
            std::string::npos);
  // A parameter expression: thd-bind-params has not run.
  EXPECT_NE(interpretText(R"mlir(
module attributes {thd.params = {cp = 2 : i64}} {
  func.func @f(%v: tensor<3xi32>) -> tensor<3xi32> {
    %p = thd.align_lengths %v cp "cp" tp 1 : tensor<3xi32>
    return %p : tensor<3xi32>
  }
}
)mlir",
                          {{1, 2, 3}})
                .find("'cp' is the parameter expression \"cp\"; run "
                      "thd-bind-params first"),
            std::string::npos);
  // Values the semantics has none for: a decreasing cu_seqlens_padded read
  // row by row.
  EXPECT_NE(interpretText(R"mlir(
func.func @f(%cu: tensor<4xi32>, %cup: tensor<4xi32>) -> tensor<8xi1> {
  %m = thd.padding_mask %cu, %cup capacity 8 : tensor<4xi32>, tensor<4xi32> -> tensor<8xi1>
  return %m : tensor<8xi1>
}
)mlir",
                          {{0, 1, 2, 3}, {0, 4, 2, 6}})
                .find("'thd.padding_mask' op cannot be evaluated: "
                      "cu_seqlens_padded[2] = 2 is below cu_seqlens_padded[1] "
                      "= 4"),
            std::string::npos);
}

} // namespace
