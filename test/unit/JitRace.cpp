//===- JitRace.cpp - many processes, one cache key, an empty cache --------===//
//
//   thdc-jit-race [--processes P] [--rounds R]
//
// What every rank of a training job on one node does at start: P processes
// compile the same pipeline into the same, empty cache folder at once, then
// run it. Each round starts from a new folder; a process fails if its
// compile fails or its outputs differ from the reference, and a round fails
// if the folder does not hold exactly one whole entry afterwards. Prints
// `N passed, N failed` (one per process and one per round's folder check).
//
//===----------------------------------------------------------------------===//

#include "compiler/Jit.h"
#include "reference/Reference.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace thdc;
using namespace thdc::runtime;

namespace {
constexpr int64_t C = 32, CP = 2, N = 6;

/// One process: compile, run the running example of docs/semantics.md, compare.
int child(const std::string &cache, const std::string &text) {
  JitOptions options;
  options.backend = Backend::Host;
  options.cacheDir = cache;
  Jit jit(options);
  CompileInfo info;
  auto pipeline = jit.compile(text, {{"C", C}, {"cp", CP}, {"N", N}}, &info);
  if (!pipeline) {
    std::fprintf(stderr, "compile failed: %s\n",
                 pipeline.status().message().c_str());
    return 1;
  }
  reference::GraphStepInput in;
  in.tokens.assign(C * CP, 0);
  for (int64_t i = 0; i < C * CP; ++i)
    in.tokens[i] = 1000 + i;
  in.labels = in.tokens;
  in.positionIds.assign(C * CP, 0);
  in.lossMask.assign(C * CP, 1.0f);
  in.cuSeqlens = {0, 3, 5, 9, 9, 9, 9};
  in.cuSeqlensPadded = {0, 4, 8, 12, 12, 12, 12};
  in.numSeqs = 3;
  in.cpRank = 1;
  reference::GraphStepOutput expected =
      reference::megatronGraphStep(in, C, CP, N);
  auto buffers = Buffers::allocate(**pipeline);
  if (!buffers)
    return 1;
  std::vector<const void *> inputs = {
      in.tokens.data(),    in.labels.data(),          in.positionIds.data(),
      in.lossMask.data(),  in.cuSeqlens.data(),       in.cuSeqlensPadded.data(),
      &in.numSeqs,         &in.cpRank};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!buffers->upload(i, inputs[i]))
      return 1;
  if (!(*pipeline)->launch(buffers->pointers()))
    return 1;
  std::vector<int64_t> tokens(C);
  if (!buffers->download(8, tokens.data()))
    return 1;
  if (tokens != expected.tokens) {
    std::fprintf(stderr, "outputs differ from the reference\n");
    return 1;
  }
  return 0;
}

/// The folder holds one entry, its lock, and nothing half-written.
bool folderIsClean(const std::string &cache, std::string &listing) {
  int entries = 0, others = 0;
  if (DIR *dir = opendir(cache.c_str())) {
    while (dirent *e = readdir(dir)) {
      std::string name = e->d_name;
      if (name == "." || name == "..")
        continue;
      listing += " " + name;
      bool lock = name.size() > 5 && name.compare(name.size() - 5, 5, ".lock") == 0;
      if (name.rfind("jit-", 0) == 0 && !lock &&
          name.find('.') == std::string::npos)
        ++entries;
      else if (!lock)
        ++others;
    }
    closedir(dir);
  }
  return entries == 1 && others == 0;
}
} // namespace

int main(int argc, char **argv) {
  int processes = 6, rounds = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    char *end = nullptr;
    long value = std::strtol(argv[i + 1], &end, 10);
    if (*end || value < 1 || value > 1000) {
      std::fprintf(stderr, "error: %s takes a count from 1 to 1000\n", argv[i]);
      return 2;
    }
    if (std::strcmp(argv[i], "--processes") == 0)
      processes = int(value);
    else if (std::strcmp(argv[i], "--rounds") == 0)
      rounds = int(value);
    else {
      std::fprintf(stderr, "usage: thdc-jit-race [--processes P] [--rounds R]\n");
      return 2;
    }
  }
  std::ifstream file(THDC_SOURCE_DIR "/examples/megatron_graph_step.mlir");
  std::stringstream text;
  text << file.rdbuf();

  int passed = 0, failed = 0;
  for (int round = 0; round < rounds; ++round) {
    char pattern[] = "/tmp/thdc-jit-race-XXXXXX";
    if (!mkdtemp(pattern))
      return 2;
    std::string cache = std::string(pattern) + "/cache"; // created by the JIT
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
      pid_t pid = fork();
      if (pid == 0)
        _exit(child(cache, text.str()));
      children.push_back(pid);
    }
    int roundFailures = 0;
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      ok ? ++passed : (++failed, ++roundFailures);
    }
    std::string listing;
    bool clean = folderIsClean(cache, listing);
    clean ? ++passed : ++failed;
    std::printf("round %d: %d of %d processes failed; cache folder%s%s\n",
                round, roundFailures, processes, listing.c_str(),
                clean ? "" : " (not one whole entry)");
    std::string command = "rm -rf " + std::string(pattern);
    if (std::system(command.c_str()) != 0)
      return 2;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
