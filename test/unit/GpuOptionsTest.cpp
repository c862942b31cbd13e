//===- GpuOptionsTest.cpp - every GPU option reaches every user -----------===//
//
// compiler/GpuOptions.def declares the GPU back end's options once. For each
// of them, a value other than its default must reach the pass pipeline
// (the lowering pass's or NVVM's option of that name), `thd-opt
// --pass-pipeline='thd-to-ptx{...}'`, and the JIT's cache key; a new option
// that misses one of them fails here.
//
//===----------------------------------------------------------------------===//

#include "compiler/GpuOptions.h"
#include "compiler/Jit.h"
#include "compiler/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace thdc;

namespace {
std::string textualPipeline(const GpuOptions &options) {
  mlir::OpPassManager pm("builtin.module");
  buildPtxPipeline(pm, options);
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  return text;
}

/// A value of `info`'s option that no other option and no default has.
std::string otherValue(const GpuOptionInfo &info, size_t index) {
  return info.isString ? "sm_80" : std::to_string(1000 + index);
}
} // namespace

TEST(GpuOptions, TheListIsTheStruct) {
  // The options the list declares, each once.
  std::set<std::string> flags;
  for (const GpuOptionInfo &info : gpuOptionInfos())
    EXPECT_TRUE(flags.insert(info.flag.str()).second) << info.flag.str();
  EXPECT_EQ(flags, (std::set<std::string>{"chip", "block-size", "max-blocks",
                                          "rows-per-thread", "vector-width",
                                          "sm-count"}));
  GpuOptions defaults;
  EXPECT_EQ(gpuOptionsKey(defaults),
            "chip=sm_90\nblock-size=0\nmax-blocks=0\nrows-per-thread=0\n"
            "vector-width=0\nsm-count=0\n");
}

TEST(GpuOptions, EachReachesThePipelineThdOptAndTheCacheKey) {
  registerCompilerPasses();
  const GpuOptions defaults;
  const std::string defaultPipeline = textualPipeline(defaults);
  JitOptions defaultJit;
  const std::string defaultKey =
      jitCacheKey("build", "sm_90", defaultJit, "text", {});
  size_t index = 0;
  for (const GpuOptionInfo &info : gpuOptionInfos()) {
    SCOPED_TRACE(info.flag.str());
    const std::string value = otherValue(info, index++);
    GpuOptions options;
    ASSERT_FALSE(bool(setGpuOption(options, info.flag, value)));
    EXPECT_EQ(gpuOptionValue(options, info.flag), value);

    // The pass pipeline: the option of that name carries the value.
    const std::string pipeline = textualPipeline(options);
    EXPECT_NE(pipeline, defaultPipeline);
    EXPECT_NE(pipeline.find(info.flag.str() + "=" + value), std::string::npos)
        << pipeline;

    // thd-opt's spelling of the same pipeline builds the same passes.
    mlir::FailureOr<mlir::OpPassManager> parsed = mlir::parsePassPipeline(
        "builtin.module(thd-to-ptx{" + info.flag.str() + "=" + value + "})");
    ASSERT_TRUE(mlir::succeeded(parsed));
    std::string parsedText;
    llvm::raw_string_ostream os(parsedText);
    parsed->printAsTextualPipeline(os);
    EXPECT_EQ(parsedText, pipeline);

    // The JIT's cache key.
    JitOptions jit;
    jit.gpu = options;
    EXPECT_NE(jitCacheKey("build", "sm_90", jit, "text", {}), defaultKey);
  }
}

TEST(GpuOptions, PythonSpellingsAndErrors) {
  GpuOptions options;
  EXPECT_FALSE(bool(setGpuOption(options, "rows_per_thread", "4")));
  EXPECT_EQ(options.rowsPerThread, 4);
  llvm::Error unknown = setGpuOption(options, "block-sise", "4");
  ASSERT_TRUE(bool(unknown));
  EXPECT_EQ(llvm::toString(std::move(unknown)),
            "no GPU option 'block-sise' (the options: chip, block-size, "
            "max-blocks, rows-per-thread, vector-width, sm-count)");
  llvm::Error notInteger = setGpuOption(options, "sm-count", "many");
  ASSERT_TRUE(bool(notInteger));
  EXPECT_EQ(llvm::toString(std::move(notInteger)),
            "sm-count must be an integer; got 'many'");
  EXPECT_FALSE(gpuOptionsError(options));
  options.maxBlocks = -3;
  EXPECT_EQ(
      gpuOptionsError(options),
      std::optional<std::string>("max-blocks must be at least 0, got -3"));
}
