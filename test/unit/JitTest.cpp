//===- JitTest.cpp - the in-process compiler and its caches ---------------===//

#include "compiler/Jit.h"
#include "compiler/Bundle.h"
#include "runtime/Cache.h"
#include "runtime/Sha256.h"
#include "test/unit/JitTestSupport.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/TargetParser/Host.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using thdc::Jit;
using thdc::JitOptions;
using thdc::CompileInfo;
using thdc::compilerBuildId;
using thdc::jitCacheKey;
using namespace thdc::runtime;

namespace {
std::string exampleText() {
  std::ifstream file(THDC_SOURCE_DIR "/examples/megatron_graph_step.mlir");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string freshCacheDir() { return thdc::testing::freshFolder("jit-test"); }
using thdc::testing::hostOptions;
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

TEST(Jit, DiskHitDoesNotWaitForTheKeysLock) {
  // A published entry is whole: loading it needs no lock, so a process
  // compiling the same key elsewhere (holding the lock) delays no hit.
  std::string cache = freshCacheDir();
  ASSERT_FALSE(cache.empty());
  std::string text = exampleText();
  std::map<std::string, int64_t> params{{"C", 64}, {"N", 8}};
  std::string key;
  {
    Jit jit(hostOptions(cache));
    CompileInfo cold;
    ASSERT_TRUE(jit.compile(text, params, &cold));
    key = cold.key;
  }
  Result<FileLock> held = FileLock::acquire(cache + "/jit-" + key + ".lock", 0);
  ASSERT_TRUE(held) << held.status().message();
  setenv("THDC_LOCK_TIMEOUT", "0.01", 1); // a hit takes no lock: never waits
  Jit again(hostOptions(cache));
  CompileInfo disk;
  auto hit = again.compile(text, params, &disk);
  unsetenv("THDC_LOCK_TIMEOUT");
  ASSERT_TRUE(hit) << hit.status().message();
  EXPECT_EQ(disk.source, CompileInfo::Source::DiskCache);
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

TEST(Jit, KeyCoversTheCompilersBuildId) {
  std::string text = exampleText();
  JitOptions options = hostOptions("-");
  std::map<std::string, int64_t> params{{"C", 64}};
  std::string id(compilerBuildId());
  ASSERT_EQ(id.size(), 64u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  std::string key = jitCacheKey(id, "host-x", options, text, params);
  EXPECT_EQ(key, jitCacheKey(id, "host-x", options, text, params));
  // A rebuilt compiler (another id) never reuses the old compiler's entries.
  std::string otherId = id;
  otherId[0] = otherId[0] == '0' ? '1' : '0';
  EXPECT_NE(key, jitCacheKey(otherId, "host-x", options, text, params));
  EXPECT_NE(key, jitCacheKey(id, "host-y", options, text, params));
  // Jit::cacheKey is the same function with this build's id.
  Jit jit(options);
  std::string target = "host-" + llvm::sys::getDefaultTargetTriple();
  EXPECT_EQ(jit.cacheKey(text, params),
            jitCacheKey(id, target, options, text, params));
}

TEST(Jit, CompiledPipelineRuns) {
  Jit jit(hostOptions("-"));
  auto pipeline = jit.compile(exampleText(), {{"C", 8}, {"N", 6}});
  ASSERT_TRUE(pipeline) << pipeline.status().message();
  auto buffers = Buffers::allocate(**pipeline);
  ASSERT_TRUE(buffers);
  // The running example of docs/semantics.md, rank 0.
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

//===----------------------------------------------------------------------===//
// A cache that is safe to share and to race on
//===----------------------------------------------------------------------===//

namespace {
std::map<std::string, int64_t> smallParams() { return {{"C", 32}, {"N", 6}}; }

/// Truncates (or overwrites) a file of a cache entry.
void damage(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Compiles the example into `cache` with a JIT of its own (a process that
/// has since ended) and returns the cache entry's host library.
std::string compileIntoCache(const std::string &cache) {
  CompileInfo info;
  Jit jit(hostOptions(cache));
  EXPECT_TRUE(jit.compile(exampleText(), smallParams(), &info));
  EXPECT_FALSE(info.bundleDir.empty());
  return info.bundleDir + "/megatron_graph_step.host.so";
}
} // namespace

TEST(JitCache, DamagedEntryIsCompiledAgain) {
  std::string cache = freshCacheDir();
  std::string text = exampleText();
  CompileInfo second;
  // A cut .so (as a full disk or a killed writer leaves it) used to be
  // dlopened and fault; now its hash fails and the entry is rebuilt.
  damage(compileIntoCache(cache), "\x7f" "ELF");
  Jit jit(hostOptions(cache));
  auto again = jit.compile(text, smallParams(), &second);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(second.source, CompileInfo::Source::Compiled);
  EXPECT_NE(second.cacheNote.find("does not match the hash"), std::string::npos)
      << second.cacheNote;
  CompileInfo third;
  Jit later(hostOptions(cache));
  ASSERT_TRUE(later.compile(text, smallParams(), &third));
  EXPECT_EQ(third.source, CompileInfo::Source::DiskCache);
}

TEST(JitCache, PlantedLibraryIsNeverLoaded) {
  std::string cache = freshCacheDir();
  std::string text = exampleText();
  CompileInfo second;
  // Another library under the predictable key: refused by its hash.
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::stringstream other;
  other << in.rdbuf();
  damage(compileIntoCache(cache), other.str());
  Jit jit(hostOptions(cache));
  ASSERT_TRUE(jit.compile(text, smallParams(), &second));
  EXPECT_EQ(second.source, CompileInfo::Source::Compiled);
}

TEST(JitCache, SharedWritableFolderIsNotUsed) {
  std::string cache = freshCacheDir();
  ASSERT_EQ(chmod(cache.c_str(), 0777), 0);
  Jit jit(hostOptions(cache));
  CompileInfo info;
  auto compiled = jit.compile(exampleText(), smallParams(), &info);
  ASSERT_TRUE(compiled) << compiled.status().message();
  EXPECT_EQ(info.source, CompileInfo::Source::Compiled);
  EXPECT_TRUE(info.bundleDir.empty());
  EXPECT_NE(info.cacheNote.find("writable by other users"), std::string::npos)
      << info.cacheNote;
}

TEST(JitCache, UnwritableCacheStillCompiles) {
  // The cache folder cannot be created (its parent is a file): the compile
  // succeeds from a temporary folder and says why nothing was cached.
  std::string cache = freshCacheDir();
  damage(cache + "/file", "not a folder");
  Jit jit(hostOptions(cache + "/file/cache"));
  CompileInfo info;
  auto compiled = jit.compile(exampleText(), smallParams(), &info);
  ASSERT_TRUE(compiled) << compiled.status().message();
  EXPECT_TRUE(info.bundleDir.empty());
  EXPECT_NE(info.cacheNote.find("cannot create the cache folder"),
            std::string::npos)
      << info.cacheNote;
}

TEST(JitErrors, UnsupportedChipIsAnErrorNotAnExit) {
  // A chip without a PTX version used to end the process with an
  // LLVM fatal error in the NVPTX back end.
  JitOptions options = hostOptions("-");
  options.gpu.chip = "sm_130";
  Jit jit(options);
  auto result = jit.compile(exampleText(), smallParams());
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find(
                "unsupported GPU architecture 'sm_130'"),
            std::string::npos)
      << result.status().message();
}

TEST(JitErrors, FatalErrorsInsideTheGuardAreFailures) {
  thdc::testing::expectGuardedFailure(
      [] { llvm::report_fatal_error("IO failure on output stream"); },
      "IO failure on output stream");
}

namespace {
/// Sets an environment variable for one scope (unset before and after).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name); }

private:
  const char *name;
};

size_t countOf(const std::string &text, const std::string &piece) {
  size_t count = 0;
  for (size_t at = text.find(piece); at != std::string::npos;
       at = text.find(piece, at + 1))
    ++count;
  return count;
}

std::string readFile(const std::string &path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}
} // namespace

TEST(JitSwitches, LogPrintsOneLinePerCall) {
  std::string cache = freshCacheDir();
  std::string text = exampleText();
  std::map<std::string, int64_t> params{{"C", 16}, {"N", 4}};
  std::string log;
  std::string key;
  {
    ScopedEnv logOn("THDC_LOG", "1");
    testing::internal::CaptureStderr();
    Jit jit(hostOptions(cache));
    key = jit.cacheKey(text, params).substr(0, 12);
    ASSERT_TRUE(jit.compile(text, params, nullptr, "step.mlir"));
    ASSERT_TRUE(jit.compile(text, params, nullptr, "step.mlir"));
    Jit again(hostOptions(cache));
    ASSERT_TRUE(again.compile(text, params, nullptr, "step.mlir"));
    EXPECT_FALSE(again.compile("func.func @broken(", {}, nullptr, "bad.mlir"));
    log = testing::internal::GetCapturedStderr();
  }
  std::string prefix = "thdc-jit: step.mlir key " + key + ": ";
  EXPECT_EQ(countOf(log, "\n"), 4u) << log;
  EXPECT_EQ(countOf(log, prefix + "disk-cache miss, compiled in "), 1u) << log;
  EXPECT_EQ(countOf(log, prefix + "memory-cache hit in "), 1u) << log;
  EXPECT_EQ(countOf(log, prefix + "disk-cache hit in "), 1u) << log;
  EXPECT_EQ(countOf(log, "thdc-jit: bad.mlir key "), 1u) << log;
  EXPECT_EQ(countOf(log, ": compile failed in "), 1u) << log;
  EXPECT_EQ(countOf(log, " ms (compile "), 4u) << log;

  // Without THDC_LOG, nothing.
  testing::internal::CaptureStderr();
  Jit quiet(hostOptions(cache));
  ASSERT_TRUE(quiet.compile(text, params));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  std::system(("rm -rf " + cache).c_str());
}

TEST(JitSwitches, AlwaysCompileIgnoresBothCachesAndStillWrites) {
  std::string cache = freshCacheDir();
  std::string text = exampleText();
  std::map<std::string, int64_t> params{{"C", 16}, {"N", 4}};
  Jit jit(hostOptions(cache));
  CompileInfo first, forced, forcedAgain, later;
  auto cold = jit.compile(text, params, &first);
  ASSERT_TRUE(cold) << cold.status().message();
  {
    ScopedEnv always("THDC_ALWAYS_COMPILE", "1");
    auto again = jit.compile(text, params, &forced);
    ASSERT_TRUE(again) << again.status().message();
    EXPECT_EQ(forced.source, CompileInfo::Source::Compiled);
    EXPECT_NE(cold->get(), again->get());
    EXPECT_EQ(forced.bundleDir, first.bundleDir); // written to the cache
    EXPECT_TRUE(forced.cacheNote.empty()) << forced.cacheNote;
    Jit other(hostOptions(cache)); // and not read from the disk either
    ASSERT_TRUE(other.compile(text, params, &forcedAgain));
    EXPECT_EQ(forcedAgain.source, CompileInfo::Source::Compiled);
  }
  Jit fresh(hostOptions(cache));
  auto hit = fresh.compile(text, params, &later);
  ASSERT_TRUE(hit) << hit.status().message();
  EXPECT_EQ(later.source, CompileInfo::Source::DiskCache);
  std::system(("rm -rf " + cache).c_str());
}

TEST(JitSwitches, DumpIrWritesEachStageToAFolder) {
  std::string dump = freshCacheDir();
  std::string text = exampleText();
  ScopedEnv dumpOn("THDC_DUMP_IR", dump);
  Jit jit(hostOptions("-"));
  std::string key = jit.cacheKey(text, {{"C", 16}}).substr(0, 12);
  ASSERT_TRUE(jit.compile(text, {{"C", 16}}));
  std::string base = dump + "/" + key + ".";
  EXPECT_EQ(readFile(base + "0-input.mlir"), text);
  std::string bound = readFile(base + "1-bound-fused.mlir");
  EXPECT_NE(bound.find("func.func @megatron_graph_step"), std::string::npos)
      << bound;
  EXPECT_EQ(bound.find("llvm.func"), std::string::npos);
  std::string lowered = readFile(base + "2-host-llvm.mlir");
  EXPECT_NE(lowered.find("llvm.func @megatron_graph_step_packed"),
            std::string::npos);
  std::string ptx = readFile(base + "3-kernel.ptx");
  EXPECT_NE(ptx.find(".entry megatron_graph_step"), std::string::npos);
  std::system(("rm -rf " + dump).c_str());
}

TEST(JitSwitches, DumpIrToStderr) {
  ScopedEnv dumpOn("THDC_DUMP_IR", "1");
  Jit jit(hostOptions("-"));
  testing::internal::CaptureStderr();
  ASSERT_TRUE(jit.compile(exampleText(), {{"C", 8}}));
  std::string err = testing::internal::GetCapturedStderr();
  for (const char *stage : {": input -----", ": bound-fused -----",
                            ": host-llvm -----", ": kernel -----"})
    EXPECT_EQ(countOf(err, stage), 1u) << stage;
  EXPECT_LT(err.find(": input -----"), err.find(": bound-fused -----"));
  EXPECT_LT(err.find(": bound-fused -----"), err.find(": host-llvm -----"));
}

TEST(JitSwitches, CachedAnswersFromMemoryOnly) {
  std::string text = exampleText();
  std::map<std::string, int64_t> params = smallParams();
  std::string cache = freshCacheDir();
  Jit jit(hostOptions(cache));
  EXPECT_EQ(jit.cached(text, params), nullptr);
  auto compiled = jit.compile(text, params);
  ASSERT_TRUE(compiled) << compiled.status().message();
  CompileInfo info;
  std::shared_ptr<Executable> hit = jit.cached(text, params, &info);
  EXPECT_EQ(hit, *compiled);
  EXPECT_EQ(info.source, CompileInfo::Source::MemoryCache);
  EXPECT_EQ(info.key, jit.cacheKey(text, params));
  // Other parameters are another key; a second Jit has the entry on disk
  // but not in memory, and cached() never loads it.
  std::map<std::string, int64_t> other = params;
  other["C"] += 8;
  EXPECT_EQ(jit.cached(text, other), nullptr);
  Jit second(hostOptions(cache));
  EXPECT_EQ(second.cached(text, params), nullptr);
  ScopedEnv always("THDC_ALWAYS_COMPILE", "1");
  EXPECT_EQ(jit.cached(text, params), nullptr);
}

// The JIT adds the cubin the driver compiled to an entry before publishing
// it (GPU only); the writing itself runs anywhere, on a host entry.
TEST(JitCache, AddedCubinIsHashedAndTheEntryStillLoads) {
  std::string cache = freshCacheDir();
  ASSERT_FALSE(cache.empty());
  CompileInfo cold;
  Jit jit(hostOptions(cache));
  auto compiled = jit.compile(exampleText(), {{"C", 64}, {"N", 8}}, &cold);
  ASSERT_TRUE(compiled) << compiled.status().message();
  ASSERT_FALSE(cold.bundleDir.empty());
  const Manifest before = (*compiled)->manifest();
  ASSERT_TRUE(before.cubinFile.empty());

  const std::string cubin("\x7f"
                          "ELF not really a cubin\0 but bytes",
                          34);
  Status added = thdc::addCubinToBundle(cold.bundleDir, before, cubin);
  ASSERT_TRUE(added) << added.message();

  Result<Manifest> after = readManifest(cold.bundleDir, /*requireHash=*/true,
                                        /*requirePrivate=*/true);
  ASSERT_TRUE(after) << after.status().message();
  EXPECT_EQ(after->cubinFile, before.entry + kCubinFileSuffix);
  EXPECT_EQ(after->fileHashes.at(after->cubinFile), sha256Hex(cubin));
  Result<std::string> written =
      readWholeFile(joinPath(cold.bundleDir, after->cubinFile));
  ASSERT_TRUE(written) << written.status().message();
  EXPECT_EQ(*written, cubin);
  // Nothing else changed.
  Manifest withoutCubin = *after;
  withoutCubin.cubinFile.clear();
  withoutCubin.fileHashes.erase(after->cubinFile);
  EXPECT_EQ(renderManifest(withoutCubin), renderManifest(before));

  LoadOptions load;
  load.backend = Backend::Host;
  load.requireHashes = true;
  load.requirePrivate = true;
  auto loaded = Executable::load(cold.bundleDir, load);
  EXPECT_TRUE(loaded) << loaded.status().message();

  // A second cubin, an empty one and a folder that is not there are errors.
  Status again = thdc::addCubinToBundle(cold.bundleDir, *after, cubin);
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find("has one"), std::string::npos)
      << again.message();
  Status empty = thdc::addCubinToBundle(cold.bundleDir, before, "");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.message().find("empty"), std::string::npos)
      << empty.message();
  EXPECT_FALSE(thdc::addCubinToBundle(cache + "/not-there", before, cubin));
  std::system(("rm -rf " + cache).c_str());
}
