//===- embed.cpp - thdc embedded in a training loop -----------------------===//
//
// What a training framework does with thdc: compile the data-preparation
// pipeline once at start (in-process, with a cache), capture one launch in a
// CUDA graph, then for every microbatch write the new data into the same
// buffers and replay the graph, while the number of sequences and their
// lengths change. Here 100 random microbatches go through one captured
// graph, each checked against the reference semantics. Without a GPU the
// same code runs the pipeline's host code.
//
//   thdc-embed PIPELINE.mlir [--microbatches N] [--param NAME=VALUE ...]
//
//===----------------------------------------------------------------------===//

#include "compiler/Jit.h"
#include "reference/Reference.h"
#include "runtime/CudaDriver.h"
#include "tools/ParseNumber.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

using namespace thdc;
using namespace thdc::runtime;

namespace {
/// A random microbatch in the pipeline's static shapes.
reference::GraphStepInput randomMicrobatch(std::mt19937 &rng, int64_t C,
                                           int64_t cp, int64_t N) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  reference::GraphStepInput in;
  int64_t n = uniform(1, N - 1), granularity = cp > 1 ? 2 * cp : 1;
  int64_t budget = C * cp;
  in.cuSeqlens = {0};
  in.cuSeqlensPadded = {0};
  for (int64_t i = 0; i < n; ++i) {
    int64_t room = budget - in.cuSeqlensPadded.back();
    int64_t padded = uniform(0, std::min<int64_t>(room, 2 * budget / n));
    padded = padded / granularity * granularity;
    in.cuSeqlens.push_back(int32_t(in.cuSeqlens.back() + uniform(0, padded)));
    in.cuSeqlensPadded.push_back(int32_t(in.cuSeqlensPadded.back() + padded));
  }
  in.cuSeqlens.resize(size_t(N + 1), -1); // entries past num_seqs: garbage
  in.cuSeqlensPadded.resize(size_t(N + 1), -1);
  in.numSeqs = int32_t(n);
  in.cpRank = int32_t(uniform(0, cp - 1));
  for (int64_t row = 0; row < budget; ++row) {
    in.tokens.push_back(uniform(1, 50000));
    in.labels.push_back(uniform(1, 50000));
    in.positionIds.push_back(row);
    in.lossMask.push_back(1.0f);
  }
  return in;
}
} // namespace

int main(int argc, char **argv) {
  std::string path;
  int microbatches = 100;
  std::map<std::string, int64_t> params;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string error;
    if (arg == "--microbatches" && i + 1 < argc) {
      std::optional<int64_t> count =
          thdc::parseInteger(arg, argv[++i], 1, 1000000, error);
      if (!count) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        return 2;
      }
      microbatches = int(*count);
    } else if (arg == "--param" && i + 1 < argc) {
      std::string assignment = argv[++i];
      size_t eq = assignment.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "error: expected --param NAME=VALUE, got '%s'\n",
                     assignment.c_str());
        return 2;
      }
      // Parameters are sizes and counts; the compiler bounds each use.
      std::string name = assignment.substr(0, eq);
      std::optional<int64_t> value = thdc::parseInteger(
          "--param " + name, assignment.substr(eq + 1), 0, INT64_MAX, error);
      if (!value) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        return 2;
      }
      params[name] = *value;
    } else {
      path = arg;
    }
  }
  std::ifstream file(path);
  if (path.empty() || !file) {
    std::fprintf(stderr, "usage: thdc-embed PIPELINE.mlir [--microbatches N] "
                         "[--param NAME=VALUE ...]\n");
    return 2;
  }
  std::stringstream text;
  text << file.rdbuf();

  // 0. A training process has a CUDA context before it asks for the
  // kernel (PyTorch makes one at its first CUDA call): make device 0's
  // primary context current, timed apart from the compile below.
  if (Result<const CudaDriver *> driver = CudaDriver::get()) {
    auto start = std::chrono::steady_clock::now();
    CUdevice device = 0;
    CUcontext context = nullptr;
    if ((*driver)->cuDeviceGet(&device, 0) == CUDA_SUCCESS &&
        (*driver)->cuDevicePrimaryCtxRetain(&context, device) ==
            CUDA_SUCCESS &&
        (*driver)->cuCtxPushCurrent(context) == CUDA_SUCCESS)
      std::printf("CUDA context of device 0 made current in %.1f ms (before "
                  "the JIT, as in a training process)\n",
                  std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count());
  }

  // 1. Compile once, at start.
  Jit jit;
  CompileInfo compiled;
  Result<std::shared_ptr<Executable>> executable =
      jit.compile(text.str(), params, &compiled, path);
  if (!executable) {
    std::fprintf(stderr, "error: %s\n", executable.status().message().c_str());
    return 1;
  }
  const Manifest &m = (*executable)->manifest();
  int64_t C = m.params.at("C"), cp = m.params.at("cp"), N = m.params.at("N");
  const char *source[] = {"compiled", "memory cache", "disk cache"};
  std::printf("compiled %s (C=%lld, cp=%lld, N=%lld) for %s in %.3f ms (%s)\n",
              m.entry.c_str(), (long long)C, (long long)cp, (long long)N,
              (*executable)->loadInfo().device.c_str(), compiled.micros / 1000,
              source[int(compiled.source)]);
  const LoadInfo &load = (*executable)->loadInfo();
  const char *module = load.cubinFromBundle  ? "the bundle's cubin"
                       : load.cubinFromCache ? "a cached cubin"
                                             : "the driver's compile of the PTX";
  // A GPU module's own share of the load; the host code has no module.
  char moduleNote[128] = "";
  if (load.backend == Backend::Cuda)
    std::snprintf(moduleNote, sizeof moduleNote, " (the module from %s %.3f ms)",
                  module, load.moduleMicros / 1000);
  if (compiled.source == CompileInfo::Source::Compiled)
    std::printf("  of which the compiler %.3f ms, the load %.3f ms%s\n",
                compiled.compileMicros / 1000, compiled.loadMicros / 1000,
                moduleNote);
  else if (compiled.source == CompileInfo::Source::DiskCache)
    std::printf("  of which the load %.3f ms%s\n", compiled.loadMicros / 1000,
                moduleNote);

  CompileInfo again;
  if (!jit.compile(text.str(), params, &again, path))
    return 1;
  std::printf("compiling it again: %.3f ms (%s)\n", again.micros / 1000,
              source[int(again.source)]);

  // 2. Buffers and one captured launch.
  Result<Buffers> buffers = Buffers::allocate(**executable);
  Result<void *> stream = createStream((*executable)->backend());
  if (!buffers || !stream) {
    std::fprintf(
        stderr, "error: %s\n",
        (!buffers ? buffers.status() : stream.status()).message().c_str());
    return 1;
  }
  Result<CapturedLaunch> graph =
      CapturedLaunch::capture(**executable, buffers->pointers(), *stream);
  if (!graph) {
    std::fprintf(stderr, "error: %s\n", graph.status().message().c_str());
    return 1;
  }

  // 3. Every microbatch: new data in the same buffers, replay, check.
  std::mt19937 rng(2026);
  int matched = 0;
  int64_t sequences = 0, tokens = 0;
  for (int step = 0; step < microbatches; ++step) {
    reference::GraphStepInput in = randomMicrobatch(rng, C, cp, N);
    sequences += in.numSeqs;
    tokens += in.cuSeqlens[size_t(in.numSeqs)];
    const void *inputs[] = {in.tokens.data(),      in.labels.data(),
                            in.positionIds.data(), in.lossMask.data(),
                            in.cuSeqlens.data(),   in.cuSeqlensPadded.data(),
                            &in.numSeqs,           &in.cpRank};
    reference::GraphStepOutput out;
    out.tokens.resize(size_t(C));
    out.labels.resize(size_t(C));
    out.positionIds.resize(size_t(C));
    out.lossMask.resize(size_t(C));
    out.paddingMask.resize(size_t(C));
    out.cuSeqlensPadded.resize(size_t(N + 1));
    out.cuSeqlens.resize(size_t(N + 1));
    void *outputs[] = {out.tokens.data(),
                       out.labels.data(),
                       out.positionIds.data(),
                       out.lossMask.data(),
                       out.paddingMask.data(),
                       out.cuSeqlensPadded.data(),
                       out.cuSeqlens.data(),
                       &out.maxSeqlen,
                       &out.status};
    Status st;
    for (size_t i = 0; i < 8 && st; ++i)
      st = buffers->upload(i, inputs[i], *stream);
    if (st)
      st = graph->replay(*stream);
    for (size_t i = 0; i < 9 && st; ++i)
      st = buffers->download(8 + i, outputs[i], *stream);
    if (st)
      st = synchronizeStream((*executable)->backend(), *stream);
    if (!st) {
      std::fprintf(stderr, "error: microbatch %d: %s\n", step,
                   st.message().c_str());
      return 1;
    }
    reference::GraphStepOutput want =
        reference::megatronGraphStep(in, C, cp, N);
    bool same = out.tokens == want.tokens && out.labels == want.labels &&
                out.positionIds == want.positionIds &&
                out.lossMask == want.lossMask &&
                out.paddingMask == want.paddingMask &&
                out.cuSeqlensPadded == want.cuSeqlensPadded &&
                out.cuSeqlens == want.cuSeqlens &&
                out.maxSeqlen == want.maxSeqlen && out.status == want.status;
    if (!same)
      std::fprintf(stderr,
                   "microbatch %d (num_seqs %d, rank %d) differs from "
                   "the reference\n",
                   step, in.numSeqs, in.cpRank);
    matched += same;
  }
  destroyStream((*executable)->backend(), *stream);
  std::printf("%d microbatches through one captured graph on %s: %lld "
              "sequences, %lld valid tokens; %d match the reference, %d "
              "differ\n",
              microbatches, (*executable)->loadInfo().device.c_str(),
              (long long)sequences, (long long)tokens, matched,
              microbatches - matched);
  return matched == microbatches ? 0 : 1;
}
