//===- JitTest.cpp - the in-process compiler and its caches ---------------===//

#include "runtime/Jit.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace thdc::runtime;

namespace {
std::string exampleText() {
  std::ifstream file(THDC_SOURCE_DIR "/examples/megatron_graph_step.mlir");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string freshCacheDir() {
  char pattern[] = "/tmp/thdc-jit-test-XXXXXX";
  const char *dir = mkdtemp(pattern);
  return dir ? dir : "";
}

JitOptions hostOptions(const std::string &cacheDir) {
  JitOptions options;
  options.backend = Backend::Host;
  options.cacheDir = cacheDir;
  return options;
}
} // namespace

TEST(Jit, ColdThenMemoryThenDiskCache) {
  std::string cache = freshCacheDir();
  ASSERT_FALSE(cache.empty());
  std::string text = exampleText();
  std::map<std::string, int64_t> params{{"C", 64}, {"N", 8}};
  CompileInfo cold, warm, disk;
  {
    Jit jit(hostOptions(cache));
    auto first = jit.compile(text, params, &cold);
    ASSERT_TRUE(first) << first.status().message();
    EXPECT_EQ(cold.source, CompileInfo::Source::Compiled);
    auto second = jit.compile(text, params, &warm);
    ASSERT_TRUE(second);
    EXPECT_EQ(warm.source, CompileInfo::Source::MemoryCache);
    EXPECT_EQ(first->get(), second->get()); // the same loaded pipeline
    EXPECT_EQ((*first)->manifest().params.at("C"), 64);
    EXPECT_EQ((*first)->manifest().buffers[0].elements, 128); // C*cp
  }
  Jit again(hostOptions(cache)); // a new process would see the same folder
  auto third = again.compile(text, params, &disk);
  ASSERT_TRUE(third) << third.status().message();
  EXPECT_EQ(disk.source, CompileInfo::Source::DiskCache);
  EXPECT_EQ(disk.key, cold.key);
  std::printf("[jit] cold %.1f ms, memory hit %.3f ms, disk hit %.3f ms\n",
              cold.micros / 1000, warm.micros / 1000, disk.micros / 1000);
  std::system(("rm -rf " + cache).c_str());
}

TEST(Jit, KeyCoversTextAndParameters) {
  Jit jit(hostOptions("-"));
  std::string text = exampleText();
  std::string base = jit.cacheKey(text, {{"C", 64}});
  EXPECT_EQ(base, jit.cacheKey(text, {{"C", 64}}));
  EXPECT_NE(base, jit.cacheKey(text, {{"C", 128}}));
  EXPECT_NE(base, jit.cacheKey(text, {{"C", 64}, {"N", 8}}));
  EXPECT_NE(base, jit.cacheKey(text + "\n", {{"C", 64}}));
}

TEST(Jit, CompiledPipelineRuns) {
  Jit jit(hostOptions("-"));
  auto pipeline = jit.compile(exampleText(), {{"C", 8}, {"N", 6}});
  ASSERT_TRUE(pipeline) << pipeline.status().message();
  auto buffers = Buffers::allocate(**pipeline);
  ASSERT_TRUE(buffers);
  // The spec's running example, rank 0.
  int64_t tokens[16] = {11, 12, 13, 99, 21, 22, 99, 99, 31, 32, 33, 34};
  int32_t cu[7] = {0, 3, 5, 9, -1, -1, -1}, cup[7] = {0, 4, 8, 12, -1, -1, -1};
  int32_t numSeqs = 3, rank = 0;
  const Manifest &m = (*pipeline)->manifest();
  ASSERT_TRUE(buffers->upload(size_t(m.find("tokens")), tokens));
  ASSERT_TRUE(buffers->upload(size_t(m.find("cu_seqlens")), cu));
  ASSERT_TRUE(buffers->upload(size_t(m.find("cu_seqlens_padded")), cup));
  ASSERT_TRUE(buffers->upload(size_t(m.find("num_seqs")), &numSeqs));
  ASSERT_TRUE(buffers->upload(size_t(m.find("cp_rank")), &rank));
  ASSERT_TRUE((*pipeline)->launch(buffers->pointers()));
  int64_t out[8];
  // The output "tokens" follows the eight inputs.
  ASSERT_TRUE(buffers->download(8, out));
  EXPECT_EQ(std::vector<int64_t>(out, out + 8),
            (std::vector<int64_t>{11, 0, 21, 0, 31, 34, 0, 0}));
}

TEST(Jit, ErrorsCarryDiagnosticsWithLocations) {
  Jit jit(hostOptions("-"));
  auto odd = jit.compile(exampleText(), {{"C", 7}}, nullptr, "step.mlir");
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.status().message().find("step.mlir:"), std::string::npos)
      << odd.status().message();
  EXPECT_NE(odd.status().message().find(
                "global target target*cp = 14 is not divisible by 2*cp = 4"),
            std::string::npos)
      << odd.status().message();
  auto unknown = jit.compile(exampleText(), {{"K", 3}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find(
                "parameter 'K' set with --param is not declared"),
            std::string::npos)
      << unknown.status().message();
  auto broken = jit.compile("func.func @f(", {});
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.status().message().find("compiling pipeline.mlir failed"),
            std::string::npos);
}
