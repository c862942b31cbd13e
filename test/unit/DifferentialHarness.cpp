//===- DifferentialHarness.cpp - compiled pipelines vs a reference --------===//
//
// Defines what test/unit/DifferentialHarness.h declares.
//
//===----------------------------------------------------------------------===//

#include "test/unit/DifferentialHarness.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fstream>

using namespace thdc::testing;
using thdc::reference::GraphStepOutput;

std::string thdc::testing::readSourceFile(const std::string &relative,
                                          std::string &error) {
  const std::string path = std::string(THDC_SOURCE_DIR) + "/" + relative;
  std::ifstream file(path);
  if (!file) {
    error = "cannot read " + path;
    return "";
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

mlir::MLIRContext &thdc::testing::compilerContext() {
  static mlir::MLIRContext *context = thdc::createCompilerContext().release();
  return *context;
}

DiagnosticCapture::DiagnosticCapture(mlir::MLIRContext *context,
                                     std::string &text)
    : handler(context, [&text](mlir::Diagnostic &diagnostic) {
        llvm::raw_string_ostream(text)
            << diagnostic.getLocation() << ": " << diagnostic << "\n";
        return mlir::success();
      }) {}

mlir::OwningOpRef<mlir::ModuleOp>
thdc::testing::loadForHost(const std::string &text, const std::string &name,
                           const llvm::StringMap<int64_t> &params,
                           std::string &error) {
  mlir::MLIRContext &context = compilerContext();
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context,
                                           diagnosticStream);
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                               llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      thdc::loadPipeline(context, sourceMgr, params);
  if (!module)
    error = "loadPipeline failed:\n" + diagnostics;
  return module;
}

std::unique_ptr<thdc::HostPipeline>
thdc::testing::compileLoaded(mlir::ModuleOp module, std::string &error) {
  std::string diagnostics;
  DiagnosticCapture capture(module.getContext(), diagnostics);
  mlir::FailureOr<std::unique_ptr<thdc::HostPipeline>> pipeline =
      thdc::HostPipeline::compile(module);
  if (mlir::failed(pipeline)) {
    error = "HostPipeline::compile failed:\n" + diagnostics;
    return nullptr;
  }
  return std::move(*pipeline);
}

std::unique_ptr<thdc::HostPipeline>
thdc::testing::compileForHost(const std::string &text, const std::string &name,
                              const llvm::StringMap<int64_t> &params,
                              std::string &error) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      loadForHost(text, name, params, error);
  if (!module)
    return nullptr;
  return compileLoaded(*module, error);
}

bool thdc::testing::matchSignature(const thdc::PipelineSignature &signature,
                                   llvm::ArrayRef<ExpectedBuffer> expected,
                                   std::vector<size_t> &order,
                                   std::string &error) {
  order.clear();
  for (const thdc::runtime::BufferDesc &buffer : signature.buffers) {
    const ExpectedBuffer *match = nullptr;
    for (const ExpectedBuffer &candidate : expected)
      if (buffer.name == candidate.name &&
          buffer.isOutput == candidate.isOutput)
        match = &candidate;
    if (!match || buffer.type != match->type ||
        buffer.elements != match->elements) {
      error = "unexpected buffer " + buffer.name + " (" +
              (buffer.isOutput ? "output" : "input") + ", " + buffer.type +
              "[" + std::to_string(buffer.elements) + "]) in the signature";
      return false;
    }
    order.push_back(size_t(match - expected.data()));
  }
  if (order.size() != expected.size()) {
    error = "the signature has " + std::to_string(order.size()) +
            " buffers, expected " + std::to_string(expected.size());
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// CompiledStep
//===----------------------------------------------------------------------===//

std::unique_ptr<CompiledStep>
CompiledStep::create(std::unique_ptr<thdc::HostPipeline> pipeline,
                     llvm::ArrayRef<ExpectedBuffer> inputs, int64_t C,
                     int64_t N, std::string &error) {
  std::vector<ExpectedBuffer> expected(inputs.begin(), inputs.end());
  expected.insert(expected.end(), {
                                      {"tokens", true, "i64", C},
                                      {"labels", true, "i64", C},
                                      {"position_ids", true, "i64", C},
                                      {"loss_mask", true, "f32", C},
                                      {"padding_mask", true, "i1", C},
                                      {"cu_seqlens_padded", true, "i32", N + 1},
                                      {"cu_seqlens", true, "i32", N + 1},
                                      {"max_seqlen", true, "i32", 1},
                                      {"status", true, "i32", 1},
                                  });
  std::vector<size_t> order;
  if (!matchSignature(pipeline->signature(), expected, order, error))
    return nullptr;
  return std::unique_ptr<CompiledStep>(new CompiledStep(
      std::move(pipeline), C, N, std::move(order), inputs.size()));
}

CompiledStep::CompiledStep(std::unique_ptr<thdc::HostPipeline> pipeline,
                           int64_t C, int64_t N, std::vector<size_t> order,
                           size_t inputCount)
    : pipeline(std::move(pipeline)), C(C), N(N), order(std::move(order)),
      inputCount(inputCount) {}

bool CompiledStep::run(llvm::ArrayRef<const void *> inputs,
                       GraphStepOutput &output, std::string &error) {
  if (inputs.size() != inputCount) {
    error = "run with " + std::to_string(inputs.size()) + " inputs, expected " +
            std::to_string(inputCount);
    return false;
  }
  output.tokens.assign(C, kPoison64);
  output.labels.assign(C, kPoison64);
  output.positionIds.assign(C, kPoison64);
  output.lossMask.assign(C, kPoisonF32);
  output.paddingMask.assign(C, kPoison8);
  output.cuSeqlensPadded.assign(N + 1, kPoison32);
  output.cuSeqlens.assign(N + 1, kPoison32);
  output.maxSeqlen = kPoison32;
  output.status = kPoison32;

  // The inputs, then the outputs in the order CompiledStep::create lists.
  std::vector<void *> addresses;
  for (const void *input : inputs)
    addresses.push_back(const_cast<void *>(input));
  addresses.insert(addresses.end(),
                   {output.tokens.data(), output.labels.data(),
                    output.positionIds.data(), output.lossMask.data(),
                    output.paddingMask.data(), output.cuSeqlensPadded.data(),
                    output.cuSeqlens.data(), &output.maxSeqlen,
                    &output.status});
  std::vector<void *> pointers;
  for (size_t index : order)
    pointers.push_back(addresses[index]);
  return pipeline->run(pointers, error);
}

//===----------------------------------------------------------------------===//
// Outputs and coverage
//===----------------------------------------------------------------------===//

GraphStepOutput thdc::testing::emptyMicrobatchOutput(int64_t C, int64_t cp,
                                                     int64_t N,
                                                     int32_t status) {
  GraphStepOutput output;
  output.tokens.assign(C, 0);
  output.labels.assign(C, 0);
  output.positionIds.assign(C, 0);
  output.lossMask.assign(C, 0.0f);
  output.paddingMask.assign(C, 1);
  output.cuSeqlensPadded.assign(N + 1, int32_t(C * cp));
  output.cuSeqlensPadded[0] = 0;
  output.cuSeqlens = output.cuSeqlensPadded;
  output.maxSeqlen = int32_t(C * cp);
  output.status = status;
  return output;
}

std::string thdc::testing::firstMismatch(const GraphStepOutput &actual,
                                         const GraphStepOutput &expected,
                                         bool checkMetadata) {
  std::string mismatch;
  findMismatch("status", std::vector<int32_t>{actual.status},
               std::vector<int32_t>{expected.status}, mismatch);
  findMismatch("tokens", actual.tokens, expected.tokens, mismatch);
  findMismatch("labels", actual.labels, expected.labels, mismatch);
  findMismatch("position_ids", actual.positionIds, expected.positionIds,
               mismatch);
  findMismatch("loss_mask", actual.lossMask, expected.lossMask, mismatch);
  findMismatch("padding_mask", actual.paddingMask, expected.paddingMask,
               mismatch);
  if (checkMetadata) {
    findMismatch("cu_seqlens_padded", actual.cuSeqlensPadded,
                 expected.cuSeqlensPadded, mismatch);
    findMismatch("cu_seqlens", actual.cuSeqlens, expected.cuSeqlens, mismatch);
    findMismatch("max_seqlen", std::vector<int32_t>{actual.maxSeqlen},
                 std::vector<int32_t>{expected.maxSeqlen}, mismatch);
  }
  return mismatch;
}

void MicrobatchCoverage::count(int64_t n, int64_t N, int64_t total,
                               int64_t rows, bool someZeroLength) {
  ++microbatches;
  empty += n == 0 || total == 0;
  zeroLength += someZeroLength;
  fullCapacity += total == rows;
  atMaxSeqs += n == N - 1;
  fullAndMaxSeqs += total == rows && n == N - 1;
}

std::string MicrobatchCoverage::summary() const {
  char text[256];
  std::snprintf(text, sizeof(text),
                "%d microbatches, %d rank runs, 0 mismatches (empty %d, "
                "zero-length %d, full %d, num_seqs=N-1 %d, full and N-1 %d",
                microbatches, rankRuns, empty, zeroLength, fullCapacity,
                atMaxSeqs, fullAndMaxSeqs);
  return text;
}

void MicrobatchCoverage::expectEachCase() const {
  EXPECT_GT(empty, 0);
  EXPECT_GT(zeroLength, 0);
  EXPECT_GT(fullCapacity, 0);
  EXPECT_GT(atMaxSeqs, 0);
  EXPECT_GT(fullAndMaxSeqs, 0);
}
