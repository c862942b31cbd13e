//===- BundleTrustTest.cpp - a bundle is what its code and hashes say ----===//
//
// The loader against bundles that changed under it: a bundle compiled again
// into the folder it was loaded from, manifests whose fields were edited
// (each field that decides how memory is touched is checked against what
// the compiled code states), code without the statement, files that are not
// regular or not the user's, and the JIT cache's own manifest. Then what the
// JIT does with a lock that is never released, with what killed compiles
// left behind, and with inputs that upstream MLIR crashes or hangs on.
//
//===----------------------------------------------------------------------===//

#include "compiler/Jit.h"
#include "runtime/Cache.h"
#include "runtime/Sha256.h"
#include "test/unit/JitTestSupport.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using thdc::Jit;
using thdc::CompileInfo;
using namespace thdc::runtime;

namespace {
/// A pipeline of one input and one output whose computation depends on
/// `cp` but whose buffers do not: two compiles with different cp have the
/// same buffer table and different code. Its entry is called `step`, as the
/// C library's regex function is: the host code must call its own.
std::string alignPipeline(int cp) {
  return "func.func @step(%lengths: tensor<4xi32> {thd.name = \"lengths\"}) "
         "-> (tensor<4xi32> {thd.name = \"aligned\"}) {\n"
         "  %a = thd.align_lengths %lengths cp " +
         std::to_string(cp) +
         " tp 1 : tensor<4xi32>\n"
         "  return %a : tensor<4xi32>\n"
         "}\n";
}

std::string freshFolder() { return thdc::testing::freshFolder("trust-test"); }
using thdc::testing::hostOptions;

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Copies the regular files of folder `from` into `to` (created if needed),
/// replacing files of the same name.
void copyBundle(const std::string &from, const std::string &to) {
  mkdir(to.c_str(), 0700);
  DIR *dir = opendir(from.c_str());
  ASSERT_NE(dir, nullptr) << from;
  while (dirent *entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..")
      continue;
    std::string target = to + "/" + name;
    // A new file (new inode), as a compiler that renames into place makes.
    unlink(target.c_str());
    writeFile(target, readFile(from + "/" + name));
  }
  closedir(dir);
}

/// A bundle of alignPipeline(cp), compiled into its own cache entry.
std::string compiledBundle(const std::string &cache, int cp) {
  Jit jit(hostOptions(cache));
  CompileInfo info;
  auto compiled = jit.compile(alignPipeline(cp), {}, &info);
  EXPECT_TRUE(compiled) << compiled.status().message();
  EXPECT_FALSE(info.bundleDir.empty());
  return info.bundleDir;
}

/// Runs a loaded host bundle of alignPipeline on lengths {1, 2, 3, 5}.
std::vector<int32_t> runAlign(const Executable &executable) {
  Result<Buffers> buffers = Buffers::allocate(executable);
  EXPECT_TRUE(buffers);
  int32_t lengths[4] = {1, 2, 3, 5}, aligned[4] = {};
  EXPECT_TRUE(buffers->upload(0, lengths));
  Status launched = executable.launch(buffers->pointers());
  EXPECT_TRUE(launched) << launched.message();
  EXPECT_TRUE(buffers->download(1, aligned));
  return std::vector<int32_t>(aligned, aligned + 4);
}

Result<std::unique_ptr<Executable>> loadOnHost(const std::string &dir) {
  LoadOptions options;
  options.backend = Backend::Host;
  return Executable::load(dir, options);
}

/// Replaces the first `from` in `dir`'s manifest and drops the manifest's
/// hash, so that the edit reaches the checks behind it.
void editManifest(const std::string &dir, const std::string &from,
                  const std::string &to) {
  std::string path = dir + "/" + kManifestFile;
  std::string text = readFile(path);
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "no '" << from << "' in\n" << text;
  text.replace(at, from.size(), to);
  writeFile(path, text);
  unlink((dir + "/" + kManifestHashFile).c_str());
}

/// Sets an environment variable for a scope; the value before (or its
/// absence) comes back at the scope's end.
class ScopedEnvironment {
public:
  ScopedEnvironment(const char *name, const std::string &value) : name(name) {
    const char *previous = std::getenv(name);
    had = previous != nullptr;
    saved = previous ? previous : "";
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (had)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  bool had = false;
  std::string saved;
};

#define EXPECT_ERROR_HAS(result, text)                                         \
  do {                                                                         \
    auto &&r_ = (result);                                                      \
    ASSERT_FALSE(r_) << "expected an error with: " << (text);                  \
    EXPECT_NE(r_.status().message().find(text), std::string::npos)             \
        << r_.status().message();                                              \
  } while (0)
} // namespace

//===----------------------------------------------------------------------===//
// The code that runs is the code that was hashed
//===----------------------------------------------------------------------===//

TEST(BundleTrust, RecompiledBundleInTheSameFolderRunsTheNewCode) {
  std::string cache = freshFolder(), folder = freshFolder() + "/bundle";
  std::string cp2 = compiledBundle(cache, 2), cp4 = compiledBundle(cache, 4);
  copyBundle(cp2, folder);
  auto first = loadOnHost(folder);
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(runAlign(**first), (std::vector<int32_t>{4, 4, 4, 8}));
  // Compiled again into the same folder while the first is still loaded
  // (a notebook re-running its load cell): dlopen by path used to return
  // the library loaded before, and the old code ran.
  copyBundle(cp4, folder);
  auto second = loadOnHost(folder);
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_EQ(runAlign(**second), (std::vector<int32_t>{8, 8, 8, 8}));
  EXPECT_EQ(runAlign(**first), (std::vector<int32_t>{4, 4, 4, 8}));
  // And back, with both alive: each keeps its own code.
  copyBundle(cp2, folder);
  auto third = loadOnHost(folder);
  ASSERT_TRUE(third) << third.status().message();
  EXPECT_EQ(runAlign(**third), (std::vector<int32_t>{4, 4, 4, 8}));
  EXPECT_EQ(runAlign(**second), (std::vector<int32_t>{8, 8, 8, 8}));
}

TEST(BundleTrust, ManyLoadsOfOneBundleEachGetTheirOwnCode) {
  std::string cache = freshFolder();
  std::string bundle = compiledBundle(cache, 2);
  std::vector<std::unique_ptr<Executable>> loaded;
  for (int i = 0; i < 20; ++i) {
    auto executable = loadOnHost(bundle);
    ASSERT_TRUE(executable) << executable.status().message();
    loaded.push_back(std::move(*executable));
  }
  loaded.erase(loaded.begin() + 3, loaded.begin() + 11);
  for (int i = 0; i < 5; ++i) {
    auto executable = loadOnHost(bundle);
    ASSERT_TRUE(executable) << executable.status().message();
    loaded.push_back(std::move(*executable));
  }
  for (const auto &executable : loaded)
    EXPECT_EQ(runAlign(*executable), (std::vector<int32_t>{4, 4, 4, 8}));
}

//===----------------------------------------------------------------------===//
// Every field that decides how memory is touched is checked against the code
//===----------------------------------------------------------------------===//

namespace {
struct Tampering {
  const char *name;
  const char *from, *to;
  const char *error;
};

class ManifestTampering : public ::testing::TestWithParam<Tampering> {};

const Tampering kTamperings[] = {
    {"type", "\"type\": \"i32\"", "\"type\": \"i64\"",
     "buffer 'lengths' has the type 'i64', but the host code was compiled "
     "for another"},
    {"output-type", "\"type\": \"i32\",\n      \"elements\": 4\n    }\n  ]",
     "\"type\": \"f32\",\n      \"elements\": 4\n    }\n  ]",
     "buffer 'aligned' has the type 'f32'"},
    {"direction", "\"direction\": \"output\"", "\"direction\": \"input\"",
     "buffer 'aligned' is an input, but the host code was compiled with it "
     "as an output"},
    {"entry", "\"entry\": \"step\"", "\"entry\": \"other\"",
     "names the entry 'other', but the host code is 'step'"},
    {"kernel", "\"name\": \"step\"", "\"name\": \"step_packed\"",
     "names the kernel 'step_packed', but the host code is 'step'"},
    {"host-symbol", "\"symbol\": \"step_packed\"", "\"symbol\": \"step\"",
     "names the host symbol 'step', but the host code enters at "
     "'step_packed'"},
    {"elements", "\"elements\": 4", "\"elements\": 3",
     "buffer 'lengths' has 3 elements, but the host code was compiled for 4"},
    {"buffer-count",
     "\"buffers\": [\n", "\"buffers\": [\n    {\n      \"name\": \"extra\",\n"
     "      \"direction\": \"input\",\n      \"type\": \"i32\",\n"
     "      \"elements\": 4\n    },\n",
     "lists 3 buffers, but the host code takes 2"},
};

void PrintTo(const Tampering &tampering, std::ostream *os) {
  *os << tampering.name;
}

std::string tamperingName(const ::testing::TestParamInfo<Tampering> &info) {
  std::string name = info.param.name;
  for (char &c : name)
    if (c == '-')
      c = '_';
  return name;
}
} // namespace

TEST_P(ManifestTampering, IsRefusedNamingTheField) {
  static std::string good = compiledBundle(freshFolder(), 2);
  std::string copy = freshFolder() + "/bundle";
  copyBundle(good, copy);
  editManifest(copy, GetParam().from, GetParam().to);
  EXPECT_ERROR_HAS(loadOnHost(copy), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(BundleTrust, ManifestTampering,
                         ::testing::ValuesIn(kTamperings), tamperingName);

namespace {
/// A pipeline whose buffers are sized by its parameters, with two inputs of
/// the same type and length (as cu_seqlens and cu_seqlens_padded are).
constexpr char kSizedPipeline[] = R"(
module attributes {thd.params = {C = 8 : i64, N = 6 : i64}} {
  func.func @step(
      %cu: tensor<?xi32> {thd.name = "cu_seqlens", thd.capacity = #thd.expr<"N+1">},
      %cup: tensor<?xi32> {thd.name = "cu_seqlens_padded", thd.capacity = #thd.expr<"N+1">},
      %n: tensor<1xi32> {thd.name = "num_seqs"})
      -> (tensor<?xi1> {thd.name = "padding_mask"}) {
    %m = thd.padding_mask %cu, %cup num_seqs %n capacity "C"
        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>
    return %m : tensor<?xi1>
  }
}
)";

/// Writes `dir`'s manifest with `text` and its hash beside it, as anyone
/// who edits a carried bundle can.
void rewriteManifest(const std::string &dir, const std::string &text) {
  writeFile(dir + "/" + kManifestFile, text);
  writeFile(dir + "/" + kManifestHashFile, sha256Hex(text) + "\n");
}
} // namespace

TEST(BundleTrust, AManifestThatLiesAboutItsParamsIsRefused) {
  // Compiled for N = 6 (cu arrays of 7 entries); a manifest that says
  // N = 100, its hash rewritten, would have callers size their copies by
  // 101 entries.
  Jit jit(hostOptions(freshFolder()));
  CompileInfo info;
  auto compiled = jit.compile(kSizedPipeline, {}, &info);
  ASSERT_TRUE(compiled) << compiled.status().message();
  std::string copy = freshFolder() + "/bundle";
  copyBundle(info.bundleDir, copy);
  std::string text = readFile(copy + "/" + kManifestFile);
  ASSERT_TRUE(loadOnHost(copy));
  size_t at = text.find("\"N\": 6");
  ASSERT_NE(at, std::string::npos) << text;
  rewriteManifest(copy, std::string(text).replace(at, 6, "\"N\": 100"));
  EXPECT_ERROR_HAS(loadOnHost(copy), "manifest.json: params.N is 100, but the "
                                     "host code was compiled with N = 6");
  // Its buffers' names swapped: the code would read cu_seqlens_padded where
  // the caller put cu_seqlens.
  std::string swapped = text;
  size_t first = swapped.find("\"name\": \"cu_seqlens\"");
  size_t second = swapped.find("\"name\": \"cu_seqlens_padded\"");
  ASSERT_TRUE(first != std::string::npos && second != std::string::npos);
  swapped.replace(second, 27, "\"name\": \"cu_seqlens\"");
  swapped.replace(first, 20, "\"name\": \"cu_seqlens_padded\"");
  rewriteManifest(copy, swapped);
  EXPECT_ERROR_HAS(loadOnHost(copy),
                   "manifest.json: buffer 0 is named 'cu_seqlens_padded', but "
                   "the host code's buffer 0 is 'cu_seqlens'");
  rewriteManifest(copy, text);
  EXPECT_TRUE(loadOnHost(copy));
}

TEST(BundleTrust, EditedManifestFailsItsOwnHash) {
  std::string copy = freshFolder() + "/bundle";
  copyBundle(compiledBundle(freshFolder(), 2), copy);
  std::string path = copy + "/" + kManifestFile;
  std::string text = readFile(path);
  text.replace(text.find("\"elements\": 4"), 13, "\"elements\": 3");
  writeFile(path, text);
  EXPECT_ERROR_HAS(loadOnHost(copy),
                   "does not match the hash in manifest.json.sha256");
  // Where hashes are required, a manifest without its hash is refused too.
  unlink((copy + "/" + kManifestHashFile).c_str());
  LoadOptions strict;
  strict.backend = Backend::Host;
  strict.requireHashes = true;
  EXPECT_ERROR_HAS(Executable::load(copy, strict), "manifest.json.sha256");
}

TEST(BundleTrust, TheManifestsHashFileIsReadWithABound) {
  std::string copy = freshFolder() + "/bundle";
  copyBundle(compiledBundle(freshFolder(), 2), copy);
  std::string hashPath = copy + "/" + kManifestHashFile;
  // sha256sum's own line is a hash file too.
  std::string command = "cd " + copy + " && sha256sum " + kManifestFile +
                        " > " + kManifestHashFile;
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_TRUE(loadOnHost(copy));
  // A 1 GiB hash file used to be read whole before it was refused: now its
  // size refuses it (a sparse file: nothing of it is written or read).
  ASSERT_EQ(truncate(hashPath.c_str(), off_t(1) << 30), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR_HAS(loadOnHost(copy), "has 1073741824 bytes, more than the "
                                     "4096 thdc reads");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          start)
                .count(),
            5);
}

TEST(BundleTrust, CodeWithoutItsBufferTableIsRefused) {
  // Another shared object under the bundle's name, its hash put into the
  // manifest as an editor would: it states no buffers, so it is not loaded.
  std::string work = freshFolder(), copy = work + "/bundle";
  copyBundle(compiledBundle(freshFolder(), 2), copy);
  writeFile(work + "/other.c", "void step_packed(void **b) { (void)b; }\n");
  std::string command = "cc -shared -fPIC -o " + work + "/other.so " + work +
                        "/other.c";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::string library = readFile(work + "/other.so");
  std::string old = readFile(copy + "/step.host.so");
  writeFile(copy + "/step.host.so", library);
  editManifest(copy, sha256Hex(old), sha256Hex(library));
  EXPECT_ERROR_HAS(loadOnHost(copy), "the host code has no 'thdc_buffer_table'");
}

namespace {
/// The open descriptors of this process.
size_t openDescriptors() {
  size_t count = 0;
  DIR *dir = opendir("/proc/self/fd");
  while (dir && readdir(dir))
    ++count;
  if (dir)
    closedir(dir);
  return count;
}
} // namespace

TEST(BundleTrust, ARecycledDescriptorNameNeverReturnsThdcsCode) {
  // The host code is opened by the name /proc/self/fd/N. That descriptor
  // used to be closed at once: the next file opened got number N, and a
  // dlopen of /proc/self/fd/N by anyone returned thdc's library, not that
  // file's.
  std::string work = freshFolder();
  std::string bundle = compiledBundle(freshFolder(), 2);
  writeFile(work + "/foreign.c", "int foreign_marker(void) { return 7; }\n");
  std::string command = "cc -shared -fPIC -o " + work + "/foreign.so " + work +
                        "/foreign.c";
  ASSERT_EQ(std::system(command.c_str()), 0);
  auto executable = loadOnHost(bundle);
  ASSERT_TRUE(executable) << executable.status().message();
  int fd = open((work + "/foreign.so").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string name = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_NE(dlsym(handle, "foreign_marker"), nullptr)
      << name << " returned another library than the file it names";
  EXPECT_EQ(dlsym(handle, kNameTableSymbol), nullptr);
  dlclose(handle);
  close(fd);
  EXPECT_EQ(runAlign(**executable), (std::vector<int32_t>{4, 4, 4, 8}));
}

TEST(BundleTrust, ManyLiveHostKernelsNeedNoTemporaryFolder) {
  // Each live kernel keeps its memory file open, so no new one is taken for
  // a name a loaded library holds: the 60th of them used to fall back to a
  // copy in TMPDIR, and fail when that was not writable.
  std::string bundle = compiledBundle(freshFolder(), 2);
  ScopedEnvironment tmpdir("TMPDIR", "/nonexistent/thdc-test");
  size_t before = openDescriptors();
  {
    std::vector<std::unique_ptr<Executable>> live;
    for (int i = 0; i < 100; ++i) {
      auto executable = loadOnHost(bundle);
      ASSERT_TRUE(executable) << "kernel " << i << ": "
                              << executable.status().message();
      live.push_back(std::move(*executable));
    }
    EXPECT_EQ(runAlign(*live.back()), (std::vector<int32_t>{4, 4, 4, 8}));
    EXPECT_EQ(openDescriptors(), before + 100);
  }
  // Unloaded, each closes its descriptor.
  EXPECT_EQ(openDescriptors(), before);
}

TEST(BundleTrust, OnlyRegularFilesAreRead) {
  std::string copy = freshFolder() + "/bundle";
  copyBundle(compiledBundle(freshFolder(), 2), copy);
  std::string library = copy + "/step.host.so";
  // A FIFO used to make the loader wait forever for a writer.
  unlink(library.c_str());
  ASSERT_EQ(mkfifo(library.c_str(), 0600), 0);
  EXPECT_ERROR_HAS(loadOnHost(copy), "is not a regular file");
  // /dev/zero used to be read without end.
  unlink(library.c_str());
  ASSERT_EQ(symlink("/dev/zero", library.c_str()), 0);
  EXPECT_ERROR_HAS(loadOnHost(copy), "is not a regular file");
  unlink((copy + "/" + kManifestFile).c_str());
  ASSERT_EQ(mkfifo((copy + "/" + kManifestFile).c_str(), 0600), 0);
  EXPECT_ERROR_HAS(loadOnHost(copy), "is not a regular file");
}

//===----------------------------------------------------------------------===//
// The JIT's cache
//===----------------------------------------------------------------------===//

TEST(BundleTrust, EditedCacheManifestIsCompiledAgain) {
  std::string cache = freshFolder();
  std::string entry = compiledBundle(cache, 2);
  std::string path = entry + "/" + kManifestFile;
  std::string text = readFile(path);
  text.replace(text.find("\"elements\": 4"), 13, "\"elements\": 400000");
  writeFile(path, text);
  Jit jit(hostOptions(cache));
  CompileInfo info;
  auto compiled = jit.compile(alignPipeline(2), {}, &info);
  ASSERT_TRUE(compiled) << compiled.status().message();
  EXPECT_EQ(info.source, CompileInfo::Source::Compiled);
  EXPECT_NE(info.cacheNote.find("does not match the hash in "
                                "manifest.json.sha256"),
            std::string::npos)
      << info.cacheNote;
  EXPECT_EQ(runAlign(**compiled), (std::vector<int32_t>{4, 4, 4, 8}));
}

TEST(BundleTrust, CacheFilesOfAnotherUserAreNotLoaded) {
  if (geteuid() != 0)
    GTEST_SKIP() << "giving a file to another user needs root";
  std::string cache = freshFolder();
  std::string entry = compiledBundle(cache, 2);
  ASSERT_EQ(chown((entry + "/step.host.so").c_str(), 1, 1), 0);
  Jit jit(hostOptions(cache));
  CompileInfo info;
  auto compiled = jit.compile(alignPipeline(2), {}, &info);
  ASSERT_TRUE(compiled) << compiled.status().message();
  EXPECT_EQ(info.source, CompileInfo::Source::Compiled);
  EXPECT_NE(info.cacheNote.find("belongs to another user"), std::string::npos)
      << info.cacheNote;
}

TEST(BundleTrust, LeftoversOfKilledCompilesAreRemoved) {
  std::string cache = freshFolder();
  Jit jit(hostOptions(cache));
  std::string key = jit.cacheKey(alignPipeline(2), {});
  std::string staging = cache + "/jit-" + key + ".staging-a1b2c3";
  std::string discarded = cache + "/jit-" + key + ".discarded-d4e5f6";
  std::string unrelated = cache + "/jit-0123.staging-a1b2c3";
  for (const std::string &dir : {staging, discarded, unrelated}) {
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    writeFile(dir + "/step.ptx", "half written");
  }
  ASSERT_TRUE(jit.compile(alignPipeline(2), {}));
  struct stat info;
  EXPECT_NE(stat(staging.c_str(), &info), 0) << staging << " is still there";
  EXPECT_NE(stat(discarded.c_str(), &info), 0) << discarded;
  // Another key's: it may be a compile in progress.
  EXPECT_EQ(stat(unrelated.c_str(), &info), 0);
}

TEST(BundleTrust, TemporaryStagingOfDeadProcessesIsRemoved) {
  // Staging folders a compile without a disk cache makes: one left by a
  // process killed midway, one whose process this one cannot see but whose
  // lock is held (another PID namespace sharing the folder), one of a live
  // process.
  // In a temporary folder of this test's own: a compile in another test
  // process sweeps dead processes' staging folders from the shared one too,
  // and could remove the planted one before this test looks.
  ScopedEnvironment tmpdir("TMPDIR", freshFolder());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0)
    _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  llvm::SmallString<256> temporary;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, temporary);
  std::string prefix = std::string(temporary) + "/thdc-jit-";
  std::string dead = prefix + std::to_string(child) + "-staging-a1b2c3";
  std::string unseen = prefix + std::to_string(child) + "-staging-d4e5f6";
  std::string alive = prefix + std::to_string(getppid()) + "-staging-a1b2c3";
  for (const std::string &dir : {dead, unseen, alive}) {
    mkdir(dir.c_str(), 0700);
    writeFile(dir + "/step.ptx", "half written");
    writeFile(dir + "/.compiling", "");
  }
  Result<FileLock> held = FileLock::acquire(unseen + "/.compiling", 0);
  ASSERT_TRUE(held);
  // Swept by the first compile that misses the caches, not by a hit or by
  // making the JIT (a disk-cache hit reads no folder but its entry's).
  Jit jit(hostOptions("-"));
  struct stat info;
  EXPECT_EQ(stat(dead.c_str(), &info), 0) << dead;
  ASSERT_TRUE(jit.compile(alignPipeline(2), {}));
  EXPECT_NE(stat(dead.c_str(), &info), 0) << dead << " is still there";
  EXPECT_EQ(stat(unseen.c_str(), &info), 0) << unseen;
  EXPECT_EQ(stat(alive.c_str(), &info), 0) << alive;
  for (const std::string &dir : {unseen, alive})
    llvm::sys::fs::remove_directories(dir);
}

namespace {

/// `jit` compiling alignPipeline(2) with THDC_LOCK_TIMEOUT set to
/// `timeout`, and in `seconds` how long that took.
Result<std::shared_ptr<Executable>>
compileWithLockTimeout(Jit &jit, const char *timeout, double &seconds) {
  setenv("THDC_LOCK_TIMEOUT", timeout, 1);
  auto start = std::chrono::steady_clock::now();
  auto compiled = jit.compile(alignPipeline(2), {});
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          start)
                .count();
  unsetenv("THDC_LOCK_TIMEOUT");
  return compiled;
}

} // namespace

TEST(BundleTrust, ALockNeverReleasedIsAnErrorAfterTheTimeout) {
  std::string cache = freshFolder();
  Jit jit(hostOptions(cache));
  std::string key = jit.cacheKey(alignPipeline(2), {});
  // Another process compiling the same key that never finishes.
  Result<FileLock> held = FileLock::acquire(cache + "/jit-" + key + ".lock");
  ASSERT_TRUE(held);
  double seconds = 0;
  auto compiled = compileWithLockTimeout(jit, "0.3", seconds);
  EXPECT_ERROR_HAS(compiled, "which another process holds");
  EXPECT_LT(seconds, 10);
}

TEST(BundleTrust, ALockTimeoutOfZeroWaitsWithoutABound) {
  // 0 (as `timeout 0` has it), none and inf wait for the other compile
  // however long it takes; 0 used to fail at once.
  for (const char *value : {"0", "none", "inf"}) {
    std::string cache = freshFolder();
    Jit jit(hostOptions(cache));
    std::string key = jit.cacheKey(alignPipeline(2), {});
    auto held = std::make_unique<Result<FileLock>>(
        FileLock::acquire(cache + "/jit-" + key + ".lock"));
    ASSERT_TRUE(*held);
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      held.reset();
    });
    double seconds = 0;
    auto compiled = compileWithLockTimeout(jit, value, seconds);
    release.join();
    EXPECT_TRUE(compiled) << value << ": " << compiled.status().message();
    EXPECT_GE(seconds, 0.3) << value;
  }
}

//===----------------------------------------------------------------------===//
// Inputs that used to end or hang the process
//===----------------------------------------------------------------------===//

TEST(BundleTrust, SelfReferencingPadTailIsAnErrorNotAHang) {
  Jit jit(hostOptions("-"));
  auto compiled = jit.compile(
      "func.func @f() -> tensor<8xi64> {\n"
      "  %p = thd.pad_tail %p target 8 : tensor<8xi64> -> tensor<8xi64>\n"
      "  return %p : tensor<8xi64>\n"
      "}\n");
  EXPECT_ERROR_HAS(compiled, "does not dominate this use");
}

TEST(BundleTrust, UpstreamParserCrashesAreScreened) {
  Jit jit(hostOptions("-"));
  EXPECT_ERROR_HAS(
      jit.compile("func.func @f(%a: tensor<8xi64>) -> tensor<8xi64> {\n"
                  "  return %a#2147483647 : tensor<8xi64>\n}\n"),
      "pipeline.mlir:2:10: error: result number '#2147483647' of '%a' is "
      "out of range");
  EXPECT_ERROR_HAS(
      jit.compile("func.func @f() attributes {a = array<index:1,0,1>} {\n"
                  "  return\n}\n"),
      "pipeline.mlir:1:32: error: a dense array of 'index' is not supported");
}

TEST(BundleTrust, AllocationFailuresInsideTheGuardAreFailures) {
  thdc::testing::expectGuardedFailure(
      [] { llvm::report_bad_alloc_error("Allocation failed"); },
      "out of memory: Allocation failed");
}
