//===- handwritten_check.cu - the hand-written kernel against the reference
//===//
//
//   handwritten_check                 run every case on the GPU, compare with
//                                     reference::megatronGraphStep, print
//                                     "N passed, N failed" (exit 1 on failure)
//   handwritten_check --time [--iters K] [--config C,cp,N]...
//                                     time the kernel replayed from a CUDA
//                                     graph, L2 warm and flushed (default:
//                                     every benchmark configuration)
//   handwritten_check --digests [--small] [--seed S]
//                                     print the generator's digest lines
//                                     (compare with bench/inputs.py --digests)
//   handwritten_check --write-expected DIR [--small] [--seed S]
//                                     write the reference outputs of every
//                                     configuration, mix and rank as JSON
//                                     (for bench/eager.py --check)
//
// The last two need no GPU. Cases: every benchmark configuration with both
// length mixes and every CP rank, more seeds on the small configurations,
// odd shapes, full buffers (no dummy), zero-length sequences, an empty
// microbatch, offsets too long for shared memory, and bad metadata of every
// status bit.
//
//===----------------------------------------------------------------------===//

#include "bench/handwritten.h"
#include "bench/inputs.h"
#include "bench/step_input.h"

#include "reference/Reference.h"
#include "tools/ParseNumber.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace thdc::bench;
namespace ref = thdc::reference;

namespace {

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t error_ = (call);                                               \
    if (error_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "error: %s failed: %s (%s:%d)\n", #call,            \
                   cudaGetErrorString(error_), __FILE__, __LINE__);            \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

/// The pipeline input of `mb` for `rank`.
ref::GraphStepInput toInput(const Microbatch &mb, int32_t rank) {
  return toGraphStepInput(mb, rank);
}

/// A hand-made microbatch: garbage from the generator, then sequences with
/// valid lengths `valid` and padded lengths `padded` whose rows hold
/// recognisable values, pad rows 99 and loss_mask 1.0 everywhere (so that
/// sanitising shows).
ref::GraphStepInput handMade(int64_t C, int64_t cp, int64_t N,
                             const std::vector<int32_t> &valid,
                             const std::vector<int32_t> &padded) {
  ref::GraphStepInput input =
      toInput(generateMicrobatch(C, cp, N, LengthMix::Long, 7), 0);
  input.numSeqs = static_cast<int32_t>(valid.size());
  int64_t row = 0;
  for (size_t i = 0; i < valid.size(); ++i) {
    input.cuSeqlens[i + 1] = input.cuSeqlens[i] + valid[i];
    input.cuSeqlensPadded[i + 1] = input.cuSeqlensPadded[i] + padded[i];
    for (int32_t k = 0; k < padded[i]; ++k, ++row) {
      const bool real = k < valid[i];
      input.tokens[row] = real ? 1000 * int64_t(i + 1) + k : 99;
      input.labels[row] = real ? 2000 * int64_t(i + 1) + k : 99;
      input.positionIds[row] = k;
      input.lossMask[row] = 1.0f;
    }
  }
  return input;
}

/// Device buffers for one (C, cp, N), reused across cases.
struct DeviceStep {
  int64_t C = 0, cp = 0, N = 0;
  StepBuffers buffers;
  std::vector<void *> allocations;

  ~DeviceStep() { release(); }
  void release() {
    for (void *pointer : allocations)
      cudaFree(pointer);
    allocations.clear();
  }
  template <typename T> T *allocate(int64_t elements) {
    void *pointer = nullptr;
    CHECK_CUDA(
        cudaMalloc(&pointer, std::max<int64_t>(elements, 1) * sizeof(T)));
    allocations.push_back(pointer);
    return static_cast<T *>(pointer);
  }
  void resize(int64_t c, int64_t p, int64_t n) {
    if (c == C && p == cp && n == N)
      return;
    release();
    C = c, cp = p, N = n;
    const int64_t rows = C * cp;
    buffers.tokens = allocate<int64_t>(rows);
    buffers.labels = allocate<int64_t>(rows);
    buffers.positionIds = allocate<int64_t>(rows);
    buffers.lossMask = allocate<float>(rows);
    buffers.cuSeqlens = allocate<int32_t>(N + 1);
    buffers.cuSeqlensPadded = allocate<int32_t>(N + 1);
    buffers.numSeqs = allocate<int32_t>(1);
    buffers.cpRank = allocate<int32_t>(1);
    buffers.outTokens = allocate<int64_t>(C);
    buffers.outLabels = allocate<int64_t>(C);
    buffers.outPositionIds = allocate<int64_t>(C);
    buffers.outLossMask = allocate<float>(C);
    buffers.outPaddingMask = allocate<uint8_t>(C);
    buffers.outCuSeqlensPadded = allocate<int32_t>(N + 1);
    buffers.outCuSeqlens = allocate<int32_t>(N + 1);
    buffers.outMaxSeqlen = allocate<int32_t>(1);
    buffers.outStatus = allocate<int32_t>(1);
  }

  template <typename T>
  static void upload(const T *device, const std::vector<T> &host) {
    CHECK_CUDA(cudaMemcpy(const_cast<T *>(device), host.data(),
                          host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <typename T>
  static void download(std::vector<T> &host, const T *device, int64_t n) {
    host.resize(static_cast<size_t>(n));
    CHECK_CUDA(
        cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  }

  void load(const ref::GraphStepInput &input) {
    upload(buffers.tokens, input.tokens);
    upload(buffers.labels, input.labels);
    upload(buffers.positionIds, input.positionIds);
    upload(buffers.lossMask, input.lossMask);
    upload(buffers.cuSeqlens, input.cuSeqlens);
    upload(buffers.cuSeqlensPadded, input.cuSeqlensPadded);
    upload(buffers.numSeqs, std::vector<int32_t>{input.numSeqs});
    upload(buffers.cpRank, std::vector<int32_t>{input.cpRank});
  }

  /// Runs the kernel once on outputs pre-filled with 0xAB bytes (so that an
  /// unwritten element shows) and downloads them.
  ref::GraphStepOutput run() {
    const std::pair<void *, int64_t> outputs[] = {
        {buffers.outTokens, C * 8},
        {buffers.outLabels, C * 8},
        {buffers.outPositionIds, C * 8},
        {buffers.outLossMask, C * 4},
        {buffers.outPaddingMask, C},
        {buffers.outCuSeqlensPadded, (N + 1) * 4},
        {buffers.outCuSeqlens, (N + 1) * 4},
        {buffers.outMaxSeqlen, 4},
        {buffers.outStatus, 4}};
    for (const auto &[pointer, bytes] : outputs)
      CHECK_CUDA(cudaMemset(pointer, 0xAB, bytes));
    launchHandwrittenStep(buffers, C, cp, N, nullptr);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    ref::GraphStepOutput out;
    download(out.tokens, buffers.outTokens, C);
    download(out.labels, buffers.outLabels, C);
    download(out.positionIds, buffers.outPositionIds, C);
    download(out.lossMask, buffers.outLossMask, C);
    download(out.paddingMask, buffers.outPaddingMask, C);
    download(out.cuSeqlensPadded, buffers.outCuSeqlensPadded, N + 1);
    download(out.cuSeqlens, buffers.outCuSeqlens, N + 1);
    std::vector<int32_t> scalar;
    download(scalar, buffers.outMaxSeqlen, 1);
    out.maxSeqlen = scalar[0];
    download(scalar, buffers.outStatus, 1);
    out.status = scalar[0];
    return out;
  }
};

/// The first difference between two arrays, compared bit for bit.
template <typename T>
std::string firstDifference(const char *name, const std::vector<T> &actual,
                            const std::vector<T> &expected) {
  if (actual.size() != expected.size())
    return std::string(name) + ": " + std::to_string(actual.size()) +
           " elements, expected " + std::to_string(expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) != 0)
      return std::string(name) + "[" + std::to_string(i) +
             "] = " + std::to_string(+actual[i]) + ", expected " +
             std::to_string(+expected[i]);
  return "";
}

std::string compareOutputs(const ref::GraphStepOutput &actual,
                           const ref::GraphStepOutput &expected) {
  for (const std::string &difference :
       {firstDifference("status", std::vector<int32_t>{actual.status},
                        std::vector<int32_t>{expected.status}),
        firstDifference("tokens", actual.tokens, expected.tokens),
        firstDifference("labels", actual.labels, expected.labels),
        firstDifference("position_ids", actual.positionIds,
                        expected.positionIds),
        firstDifference("loss_mask", actual.lossMask, expected.lossMask),
        firstDifference("padding_mask", actual.paddingMask,
                        expected.paddingMask),
        firstDifference("cu_seqlens_padded", actual.cuSeqlensPadded,
                        expected.cuSeqlensPadded),
        firstDifference("cu_seqlens", actual.cuSeqlens, expected.cuSeqlens),
        firstDifference("max_seqlen", std::vector<int32_t>{actual.maxSeqlen},
                        std::vector<int32_t>{expected.maxSeqlen})})
    if (!difference.empty())
      return difference;
  return "";
}

struct Tally {
  int passed = 0, failed = 0;
};

void runCase(DeviceStep &device, Tally &tally, const std::string &name,
             const ref::GraphStepInput &input, int64_t C, int64_t cp,
             int64_t N) {
  const ref::GraphStepOutput expected = ref::megatronGraphStep(input, C, cp, N);
  device.resize(C, cp, N);
  device.load(input);
  const std::string difference = compareOutputs(device.run(), expected);
  if (difference.empty()) {
    ++tally.passed;
    return;
  }
  ++tally.failed;
  std::printf("FAIL %s (C=%lld cp=%lld N=%lld rank=%d num_seqs=%d, reference "
              "status %d): %s\n",
              name.c_str(), (long long)C, (long long)cp, (long long)N,
              input.cpRank, input.numSeqs, expected.status, difference.c_str());
}

/// Every rank of a microbatch, and two out-of-range ranks.
void runAllRanks(DeviceStep &device, Tally &tally, const std::string &name,
                 ref::GraphStepInput input, int64_t C, int64_t cp, int64_t N,
                 bool badRanks = false) {
  for (int32_t rank = 0; rank < cp; ++rank) {
    input.cpRank = rank;
    runCase(device, tally, name + " rank " + std::to_string(rank), input, C, cp,
            N);
  }
  if (badRanks)
    for (int32_t rank : {-1, static_cast<int32_t>(cp)}) {
      input.cpRank = rank;
      runCase(device, tally, name + " bad rank " + std::to_string(rank), input,
              C, cp, N);
    }
}

/// Corruptions of valid metadata, one per status bit (some set several).
void runBadMetadata(DeviceStep &device, Tally &tally, const std::string &name,
                    const ref::GraphStepInput &valid, int64_t C, int64_t cp,
                    int64_t N) {
  const int32_t n = valid.numSeqs;
  const int32_t capacity = static_cast<int32_t>(C * cp);
  const std::vector<
      std::pair<const char *, std::function<void(ref::GraphStepInput &)>>>
      corruptions = {
          {"num_seqs = N", [&](auto &in) { in.numSeqs = int32_t(N); }},
          {"num_seqs = -1", [&](auto &in) { in.numSeqs = -1; }},
          {"num_seqs = N+7", [&](auto &in) { in.numSeqs = int32_t(N) + 7; }},
          {"cu[0] = 1", [&](auto &in) { in.cuSeqlens[0] = 1; }},
          {"cup[0] = 2cp",
           [&](auto &in) { in.cuSeqlensPadded[0] = int32_t(2 * cp); }},
          {"cu decreases",
           [&](auto &in) { in.cuSeqlens[n] = in.cuSeqlens[n - 1] - 1; }},
          {"cup decreases",
           [&](auto &in) {
             in.cuSeqlensPadded[1] = in.cuSeqlensPadded[2] + 2 * int32_t(cp);
           }},
          {"cup[1] += 1", [&](auto &in) { in.cuSeqlensPadded[1] += 1; }},
          {"valid > padded",
           [&](auto &in) { in.cuSeqlens[1] = in.cuSeqlensPadded[1] + 1; }},
          {"total > C*cp",
           [&](auto &in) {
             in.cuSeqlensPadded[n] = capacity + 2 * int32_t(cp);
           }},
      };
  for (const auto &[what, corrupt] : corruptions) {
    ref::GraphStepInput input = valid;
    corrupt(input);
    input.cpRank = 0;
    runCase(device, tally, name + ", " + what, input, C, cp, N);
    input.cpRank = static_cast<int32_t>(cp - 1);
    runCase(device, tally, name + ", " + what + ", last rank", input, C, cp, N);
  }
}

int checkAll() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "error: no CUDA device; handwritten_check needs a GPU "
                         "(--digests and --write-expected do not)\n");
    return 1;
  }
  DeviceStep device;
  Tally tally;
  for (const BenchConfig &config : kBenchConfigs)
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short}) {
      const bool small = config.C * config.cp <= 131072;
      for (uint64_t seed = 1; seed <= (small ? 4u : 1u); ++seed) {
        const Microbatch mb =
            generateMicrobatch(config.C, config.cp, config.N, mix, seed);
        runAllRanks(device, tally,
                    std::string(toString(mix)) + " seed " +
                        std::to_string(seed),
                    toInput(mb, 0), config.C, config.cp, config.N);
      }
    }

  // Odd shapes: C not a multiple of 32, tiny buffers, N = 1 (empty only),
  // more tiles than resident blocks (C = 9M).
  const BenchConfig oddShapes[] = {
      {1000, 1, 10}, {1002, 2, 16}, {6, 2, 4},      {1, 1, 1},
      {2, 2, 1},     {4100, 4, 9},  {200000, 1, 3}, {9000000, 1, 64}};
  for (const BenchConfig &config : oddShapes)
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short})
      runAllRanks(
          device, tally, std::string("odd shape ") + toString(mix),
          toInput(generateMicrobatch(config.C, config.cp, config.N, mix, 3), 0),
          config.C, config.cp, config.N);

  // The running example of docs/semantics.md (S10 "graph: cp=2, target 8, N=6").
  runAllRanks(device, tally, "running example",
              handMade(8, 2, 6, {3, 2, 4}, {4, 4, 4}), 8, 2, 6);
  // Full buffers: T = C*cp, no dummy sequence.
  runAllRanks(device, tally, "full cp=2",
              handMade(64, 2, 8, {30, 40, 53}, {32, 40, 56}), 64, 2, 8);
  runAllRanks(device, tally, "full cp=1",
              handMade(100, 1, 3, {49, 50}, {50, 50}), 100, 1, 3);
  // Zero-length sequences, an all-padding sequence, no sequence at all.
  runAllRanks(device, tally, "zero-length sequences",
              handMade(64, 2, 8, {5, 0, 12, 0, 17}, {8, 0, 12, 0, 20}), 64, 2,
              8);
  runAllRanks(device, tally, "zero-length at the end",
              handMade(64, 4, 8, {5, 0, 0}, {8, 0, 0}), 64, 4, 8);
  runAllRanks(device, tally, "all-padding sequence",
              handMade(64, 2, 8, {0, 8}, {8, 8}), 64, 2, 8);
  runAllRanks(device, tally, "empty microbatch", handMade(64, 2, 8, {}, {}), 64,
              2, 8, /*badRanks=*/true);
  // Offsets too long for shared memory (read from global memory).
  for (LengthMix mix : {LengthMix::Long, LengthMix::Short}) {
    runAllRanks(device, tally, std::string("N = 7000 ") + toString(mix),
                toInput(generateMicrobatch(4096, 2, 7000, mix, 5), 0), 4096, 2,
                7000);
    runAllRanks(device, tally, std::string("N = 9000, cp = 1 ") + toString(mix),
                toInput(generateMicrobatch(20000, 1, 9000, mix, 5), 0), 20000,
                1, 9000);
  }
  runBadMetadata(
      device, tally, "N = 7000",
      toInput(generateMicrobatch(4096, 2, 7000, LengthMix::Short, 5), 0), 4096,
      2, 7000);
  // Bad metadata, every status bit.
  for (const BenchConfig &config :
       {BenchConfig{8192, 1, 64}, BenchConfig{32768, 2, 64},
        BenchConfig{32768, 4, 128}})
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short}) {
      const ref::GraphStepInput input =
          toInput(generateMicrobatch(config.C, config.cp, config.N, mix, 1), 0);
      runBadMetadata(device, tally, std::string("bad ") + toString(mix), input,
                     config.C, config.cp, config.N);
      runAllRanks(device, tally, std::string("bad ranks ") + toString(mix),
                  input, config.C, config.cp, config.N, /*badRanks=*/true);
    }

  std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed ? 1 : 0;
}

//===----------------------------------------------------------------------===//
// --time
//===----------------------------------------------------------------------===//

/// Reads `words` words, so that the L2 holds clean lines of another buffer
/// (a memset would leave dirty lines whose write-back the timed kernel pays).
__global__ void evictL2(const uint4 *words, size_t count, unsigned *sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 w = words[i];
    acc.x ^= w.x, acc.y ^= w.y, acc.z ^= w.z, acc.w ^= w.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u)
    *sink = acc.x;
}

int timeAll(int iters, const std::vector<BenchConfig> &only) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "error: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp properties;
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", properties.name,
              properties.multiProcessorCount, properties.l2CacheSize >> 20);
  // Cold replays follow a read of twice the L2 size.
  const size_t flushBytes = size_t(properties.l2CacheSize) * 2;
  void *flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, flushBytes + sizeof(unsigned)));
  CHECK_CUDA(cudaMemset(flush, 0, flushBytes + sizeof(unsigned)));
  const int flushBlocks = properties.multiProcessorCount * 8;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  std::printf("%-10s %-3s %-5s %-6s %-5s %10s %10s %10s\n", "C", "cp", "N",
              "mix", "rank", "hot_us", "cold_us", "cold_GB/s");
  DeviceStep device;
  for (const BenchConfig &config :
       only.empty() ? std::vector<BenchConfig>(std::begin(kBenchConfigs),
                                               std::end(kBenchConfigs))
                    : only)
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short}) {
      const Microbatch mb =
          generateMicrobatch(config.C, config.cp, config.N, mix, 1);
      for (int32_t rank = 0; rank < config.cp; ++rank) {
        const ref::GraphStepInput input = toInput(mb, rank);
        const ref::GraphStepOutput expected =
            ref::megatronGraphStep(input, config.C, config.cp, config.N);
        device.resize(config.C, config.cp, config.N);
        device.load(input);

        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        launchHandwrittenStep(device.buffers, config.C, config.cp, config.N,
                              stream);
        CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
        CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < 20; ++i)
          CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));

        CHECK_CUDA(cudaEventRecord(start, stream));
        for (int i = 0; i < iters; ++i)
          CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float hotMs = 0;
        CHECK_CUDA(cudaEventElapsedTime(&hotMs, start, stop));

        std::vector<float> coldMs;
        for (int i = 0; i < std::max(iters / 10, 10); ++i) {
          evictL2<<<flushBlocks, 256, 0, stream>>>(
              static_cast<const uint4 *>(flush), flushBytes / sizeof(uint4),
              reinterpret_cast<unsigned *>(static_cast<char *>(flush) +
                                           flushBytes));
          CHECK_CUDA(cudaEventRecord(start, stream));
          CHECK_CUDA(cudaGraphLaunch(exec, stream));
          CHECK_CUDA(cudaEventRecord(stop, stream));
          CHECK_CUDA(cudaEventSynchronize(stop));
          float ms = 0;
          CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
          coldMs.push_back(ms);
        }
        std::sort(coldMs.begin(), coldMs.end());
        const float coldMedianMs = coldMs[coldMs.size() / 2];
        CHECK_CUDA(cudaGraphExecDestroy(exec));
        CHECK_CUDA(cudaGraphDestroy(graph));

        // Bytes the kernel must move: the gathered rows' four inputs, all
        // outputs.
        const int64_t dataRows = std::count(expected.paddingMask.begin(),
                                            expected.paddingMask.end(), 0);
        const double bytes = double(dataRows) * 28 + double(config.C) * 29 +
                             double(config.N + 1) * 16;
        std::printf("%-10lld %-3lld %-5lld %-6s %-5d %10.2f %10.2f %10.0f\n",
                    (long long)config.C, (long long)config.cp,
                    (long long)config.N, toString(mix), rank,
                    1000.0 * hotMs / iters, 1000.0 * coldMedianMs,
                    bytes / (coldMedianMs * 1e-3) / 1e9);
        std::fflush(stdout);
      }
    }
  CHECK_CUDA(cudaFree(flush));
  return 0;
}

//===----------------------------------------------------------------------===//
// --digests, --write-expected
//===----------------------------------------------------------------------===//

int printDigests(bool small, uint64_t seed) {
  for (const BenchConfig &config : kBenchConfigs) {
    if (small && config.C * config.cp > 131072)
      continue;
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short})
      std::printf("%s\n", digestLine(generateMicrobatch(config.C, config.cp,
                                                        config.N, mix, seed))
                              .c_str());
  }
  return 0;
}

template <typename T>
void writeArray(std::FILE *out, const std::vector<T> &values) {
  std::fputc('[', out);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i)
      std::fputc(',', out);
    if constexpr (std::is_floating_point_v<T>) {
      // Shortest round-trip form with a fraction or exponent, as thd-run
      // writes floats (tools/thd-run/HostBuffers.h).
      char text[64];
      if (values[i] != values[i] || values[i] - values[i] != 0) {
        std::fprintf(out, "\"%s\"",
                     values[i] != values[i] ? "NaN"
                     : values[i] > 0        ? "Infinity"
                                            : "-Infinity");
        continue;
      }
      char *end = std::to_chars(text, text + sizeof(text), values[i]).ptr;
      *end = 0;
      std::fputs(text, out);
      if (!std::strpbrk(text, ".e"))
        std::fputs(".0", out);
    } else {
      std::fprintf(out, "%lld", static_cast<long long>(values[i]));
    }
  }
  std::fputc(']', out);
}

int writeExpected(const std::string &dir, bool small, uint64_t seed) {
  int written = 0;
  for (const BenchConfig &config : kBenchConfigs) {
    if (small && config.C * config.cp > 131072)
      continue;
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short}) {
      const Microbatch mb =
          generateMicrobatch(config.C, config.cp, config.N, mix, seed);
      for (int32_t rank = 0; rank < config.cp; ++rank) {
        const ref::GraphStepOutput out = ref::megatronGraphStep(
            toInput(mb, rank), config.C, config.cp, config.N);
        char name[256];
        std::snprintf(name, sizeof(name),
                      "%s/expected_C%lld_cp%lld_N%lld_%s_seed%llu_rank%d.json",
                      dir.c_str(), (long long)config.C, (long long)config.cp,
                      (long long)config.N, toString(mix),
                      (unsigned long long)seed, rank);
        std::FILE *file = std::fopen(name, "w");
        if (!file) {
          std::fprintf(stderr, "error: cannot write %s\n", name);
          return 1;
        }
        std::fprintf(file,
                     "{\"_case\":{\"C\":%lld,\"cp\":%lld,\"N\":%lld,\"mix\":"
                     "\"%s\",\"seed\":%llu,\"rank\":%d},\n",
                     (long long)config.C, (long long)config.cp,
                     (long long)config.N, toString(mix),
                     (unsigned long long)seed, rank);
        const std::pair<const char *, std::function<void()>> fields[] = {
            {"tokens", [&] { writeArray(file, out.tokens); }},
            {"labels", [&] { writeArray(file, out.labels); }},
            {"position_ids", [&] { writeArray(file, out.positionIds); }},
            {"loss_mask", [&] { writeArray(file, out.lossMask); }},
            {"padding_mask", [&] { writeArray(file, out.paddingMask); }},
            {"cu_seqlens_padded",
             [&] { writeArray(file, out.cuSeqlensPadded); }},
            {"cu_seqlens", [&] { writeArray(file, out.cuSeqlens); }},
            {"max_seqlen",
             [&] { writeArray(file, std::vector<int32_t>{out.maxSeqlen}); }},
            {"status",
             [&] { writeArray(file, std::vector<int32_t>{out.status}); }},
        };
        for (size_t i = 0; i < std::size(fields); ++i) {
          std::fprintf(file, "%s\"%s\":", i ? ",\n" : "", fields[i].first);
          fields[i].second();
        }
        std::fputs("}\n", file);
        std::fclose(file);
        ++written;
      }
    }
  }
  std::printf("wrote %d files to %s\n", written, dir.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = "check", dir;
  bool small = false;
  uint64_t seed = 1;
  int iters = 1000;
  std::vector<BenchConfig> only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto integer = [&](const std::string &option, const std::string &text,
                       int64_t minimum, int64_t maximum) -> int64_t {
      std::string error;
      std::optional<int64_t> parsed =
          thdc::parseInteger(option, text, minimum, maximum, error);
      if (!parsed) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        std::exit(2);
      }
      return *parsed;
    };
    if (arg == "--time")
      mode = "time";
    else if (arg == "--digests")
      mode = "digests";
    else if (arg == "--write-expected")
      mode = "write", dir = value();
    else if (arg == "--small")
      small = true;
    else if (arg == "--seed")
      seed = uint64_t(integer(arg, value(), 0, INT64_MAX));
    else if (arg == "--iters")
      iters = int(integer(arg, value(), 1, 1000000));
    else if (arg == "--config") {
      std::string text = value();
      size_t first = text.find(','), second = text.find(',', first + 1);
      if (first == std::string::npos || second == std::string::npos) {
        std::fprintf(stderr, "error: --config takes C,cp,N, got '%s'\n",
                     text.c_str());
        return 2;
      }
      BenchConfig config;
      config.C = integer("--config C", text.substr(0, first), 1, INT32_MAX);
      config.cp = integer("--config cp",
                          text.substr(first + 1, second - first - 1), 1,
                          INT32_MAX);
      config.N = integer("--config N", text.substr(second + 1), 1, INT32_MAX);
      only.push_back(config);
    } else {
      std::fprintf(stderr,
                   "usage: handwritten_check [--time [--iters K] [--config "
                   "C,cp,N]...] "
                   "[--digests] [--write-expected DIR] [--small] [--seed S]\n");
      return 2;
    }
  }
  if (mode == "digests")
    return printDigests(small, seed);
  if (mode == "write")
    return writeExpected(dir, small, seed);
  if (mode == "time")
    return timeAll(iters, only);
  return checkAll();
}
