//===- thdc_bench.cpp - thdc against the hand-written kernel and a copy ---===//
//
//   thdc_bench BUNDLE_ROOT [--iterations N] > results.jsonl
//
// For every bundle BUNDLE_ROOT/C<C>_cp<cp>_N<N> of the example (the
// benchmark's configurations, bench/inputs.h, or any other) and both length
// mixes, on one GPU and in one run: the bundle launched plainly and replayed
// from a CUDA graph, the hand-written kernel (bench/handwritten.cu) launched
// plainly and from a graph, and a device-to-device copy of as many bytes as
// the step moves. Once per run: a 1 GiB copy (the bandwidth reference) and an
// empty kernel replayed from a graph (the floor of any launch). Every
// variant's outputs are first checked against the reference semantics. One
// JSON object per line on stdout; bench/report.py turns them into a results
// table (bench/results/step-kernel/RESULTS.md).
//
// Device times, two ways: the median of CUDA events around each launch (the
// latency of one launch), and CUDA events around N back-to-back launches
// divided by N (the throughput, what a step costs inside a longer stream of
// work). Host times come from a steady clock around the submit call alone,
// and around submit plus stream synchronisation (the round trip).
//
//===----------------------------------------------------------------------===//

#include "bench/copy_kernel.h"
#include "bench/handwritten.h"
#include "bench/inputs.h"
#include "bench/step_input.h"
#include "reference/Reference.h"
#include "runtime/Executable.h"
#include "tools/ParseNumber.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace thdc;
using namespace thdc::bench;

namespace {
#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorString(err_));                                  \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

void require(const Status &status, const char *what) {
  if (!status) {
    std::fprintf(stderr, "error: %s: %s\n", what, status.message().c_str());
    std::exit(1);
  }
}

using Clock = std::chrono::steady_clock;
double microsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct Timing {
  double deviceMicros = 0;     ///< median per launch, CUDA events around each
  double deviceMeanMicros = 0; ///< per launch, events around all of them
  double submitMicros = 0;    ///< host time of the submit call
  double roundTripMicros = 0; ///< submit + synchronise
};

/// Times `submit` (which enqueues one launch on `stream`).
Timing measure(const std::function<void()> &submit, cudaStream_t stream,
               int iterations) {
  for (int i = 0; i < 20; ++i)
    submit();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  Timing t;
  std::vector<cudaEvent_t> events(size_t(2 * iterations));
  for (cudaEvent_t &e : events)
    CHECK_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < iterations; ++i) {
    CHECK_CUDA(cudaEventRecord(events[size_t(2 * i)], stream));
    submit();
    CHECK_CUDA(cudaEventRecord(events[size_t(2 * i + 1)], stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> device;
  for (int i = 0; i < iterations; ++i) {
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, events[size_t(2 * i)],
                                    events[size_t(2 * i + 1)]));
    device.push_back(ms * 1000.0);
  }
  for (cudaEvent_t e : events)
    CHECK_CUDA(cudaEventDestroy(e));
  // The median resists the odd preempted launch.
  std::nth_element(device.begin(), device.begin() + device.size() / 2,
                   device.end());
  t.deviceMicros = device[device.size() / 2];

  cudaEvent_t first, last;
  CHECK_CUDA(cudaEventCreate(&first));
  CHECK_CUDA(cudaEventCreate(&last));
  CHECK_CUDA(cudaEventRecord(first, stream));
  for (int i = 0; i < iterations; ++i)
    submit();
  CHECK_CUDA(cudaEventRecord(last, stream));
  CHECK_CUDA(cudaEventSynchronize(last));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, first, last));
  t.deviceMeanMicros = ms * 1000.0 / iterations;
  CHECK_CUDA(cudaEventDestroy(first));
  CHECK_CUDA(cudaEventDestroy(last));

  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i)
    submit();
  t.submitMicros = microsBetween(start, Clock::now()) / iterations;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    submit();
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  t.roundTripMicros = microsBetween(start, Clock::now()) / iterations;
  return t;
}

/// Device buffers in the example's parameter order (inputs, then outputs).
struct DeviceStep {
  std::vector<void *> pointers;
  std::vector<size_t> bytes;
  ~DeviceStep() {
    for (void *p : pointers)
      cudaFree(p);
  }
};

void allocate(DeviceStep &step, int64_t C, int64_t cp, int64_t N) {
  size_t rows = size_t(C * cp), local = size_t(C), entries = size_t(N + 1);
  step.bytes = {rows * 8,    rows * 8,  rows * 8, rows * 4,    entries * 4,
                entries * 4, 4,         4,        local * 8,   local * 8,
                local * 8,   local * 4, local,    entries * 4, entries * 4,
                4,           4};
  for (size_t bytes : step.bytes) {
    void *p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, bytes));
    step.pointers.push_back(p);
  }
}

void upload(const DeviceStep &step, const Microbatch &mb, int32_t rank) {
  const void *sources[] = {mb.tokens.data(),      mb.labels.data(),
                           mb.positionIds.data(), mb.lossMask.data(),
                           mb.cuSeqlens.data(),   mb.cuSeqlensPadded.data(),
                           &mb.numSeqs,           &rank};
  for (size_t i = 0; i < 8; ++i)
    CHECK_CUDA(cudaMemcpy(step.pointers[i], sources[i], step.bytes[i],
                          cudaMemcpyHostToDevice));
}

/// Whether the outputs in `step` equal the reference for `mb` on `rank`.
bool matchesReference(const DeviceStep &step, const Microbatch &mb,
                      int32_t rank) {
  reference::GraphStepOutput want = reference::megatronGraphStep(
      toGraphStepInput(mb, rank), mb.C, mb.cp, mb.N);
  const void *expected[] = {want.tokens.data(),
                            want.labels.data(),
                            want.positionIds.data(),
                            want.lossMask.data(),
                            want.paddingMask.data(),
                            want.cuSeqlensPadded.data(),
                            want.cuSeqlens.data(),
                            &want.maxSeqlen,
                            &want.status};
  for (size_t i = 0; i < 9; ++i) {
    std::vector<uint8_t> got(step.bytes[8 + i]);
    CHECK_CUDA(cudaMemcpy(got.data(), step.pointers[8 + i], got.size(),
                          cudaMemcpyDeviceToHost));
    if (std::memcmp(got.data(), expected[i], got.size()) != 0) {
      std::fprintf(stderr, "output %zu differs from the reference\n", i);
      return false;
    }
  }
  return true;
}

StepBuffers handwrittenBuffers(const DeviceStep &s) {
  StepBuffers b;
  b.tokens = static_cast<const int64_t *>(s.pointers[0]);
  b.labels = static_cast<const int64_t *>(s.pointers[1]);
  b.positionIds = static_cast<const int64_t *>(s.pointers[2]);
  b.lossMask = static_cast<const float *>(s.pointers[3]);
  b.cuSeqlens = static_cast<const int32_t *>(s.pointers[4]);
  b.cuSeqlensPadded = static_cast<const int32_t *>(s.pointers[5]);
  b.numSeqs = static_cast<const int32_t *>(s.pointers[6]);
  b.cpRank = static_cast<const int32_t *>(s.pointers[7]);
  b.outTokens = static_cast<int64_t *>(s.pointers[8]);
  b.outLabels = static_cast<int64_t *>(s.pointers[9]);
  b.outPositionIds = static_cast<int64_t *>(s.pointers[10]);
  b.outLossMask = static_cast<float *>(s.pointers[11]);
  b.outPaddingMask = static_cast<uint8_t *>(s.pointers[12]);
  b.outCuSeqlensPadded = static_cast<int32_t *>(s.pointers[13]);
  b.outCuSeqlens = static_cast<int32_t *>(s.pointers[14]);
  b.outMaxSeqlen = static_cast<int32_t *>(s.pointers[15]);
  b.outStatus = static_cast<int32_t *>(s.pointers[16]);
  return b;
}

/// A device-to-device copy that reads and writes `bytes` in all.
Timing copyTiming(size_t bytes, cudaStream_t stream, int iterations) {
  size_t half = bytes / 2;
  void *a = nullptr, *b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, half));
  CHECK_CUDA(cudaMalloc(&b, half));
  CHECK_CUDA(cudaMemsetAsync(a, 1, half, stream));
  Timing t = measure(
      [&] {
        CHECK_CUDA(
            cudaMemcpyAsync(b, a, half, cudaMemcpyDeviceToDevice, stream));
      },
      stream, iterations);
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return t;
}

/// The copy kernel (bench/copy_kernel.h) moving what a step moves: `read`
/// bytes read and `written` bytes written (each rounded up to 16), the
/// bytes read copied to as many written and the rest of the written ones
/// filled.
Timing copyKernelTiming(size_t read, size_t written, cudaStream_t stream,
                        int iterations) {
  auto round16 = [](size_t n) { return (n + 15) / 16 * 16; };
  read = round16(read);
  written = round16(written);
  size_t copied = std::min(read, written);
  void *a = nullptr, *b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, copied));
  CHECK_CUDA(cudaMalloc(&b, written));
  CHECK_CUDA(cudaMemsetAsync(a, 1, copied, stream));
  std::vector<CopySegment> segments = {{a, b, copied, 0}};
  if (written > copied)
    segments.push_back(
        {nullptr, static_cast<char *>(b) + copied, written - copied, 1});
  Timing t =
      measure([&] { launchCopyKernel(segments, stream); }, stream, iterations);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return t;
}

/// Device-to-device copy bandwidth, bytes read plus written per second.
double copyBandwidth(cudaStream_t stream) {
  size_t bytes = size_t(2) << 30;
  return double(bytes) / (copyTiming(bytes, stream, 20).deviceMicros * 1e-6);
}

/// The bundles of BUNDLE_ROOT named after their configuration, smallest
/// first.
std::vector<BenchConfig> bundleConfigs(const std::string &root) {
  std::vector<BenchConfig> configs;
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator(root, error)) {
    long long C = 0, cp = 0, N = 0;
    char tail = 0;
    std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), "C%lld_cp%lld_N%lld%c", &C, &cp, &N,
                    &tail) == 3)
      configs.push_back({C, cp, N});
  }
  std::sort(configs.begin(), configs.end(),
            [](const BenchConfig &a, const BenchConfig &b) {
              return std::tie(a.C, a.cp, a.N) < std::tie(b.C, b.cp, b.N);
            });
  return configs;
}

/// Bytes a rank's step must read: the rows it keeps; the metadata is
/// negligible.
double bytesRead(const Microbatch &mb) {
  double kept = double(mb.packedLength()) / double(mb.cp);
  return kept * (8 + 8 + 8 + 4);
}

/// Bytes a rank's step must write: its outputs.
double bytesWritten(const Microbatch &mb) {
  return double(mb.C) * (8 + 8 + 8 + 4 + 1);
}

/// Bytes a rank's step must move, read plus written.
double bytesMoved(const Microbatch &mb) {
  return bytesRead(mb) + bytesWritten(mb);
}

void emit(const char *variant, const Microbatch &mb, const Timing &t,
          double bytes, double copy, const char *device) {
  std::printf("{\"variant\": \"%s\", \"C\": %lld, \"cp\": %lld, \"N\": %lld, "
              "\"mix\": \"%s\", \"num_seqs\": %d, \"packed\": %lld, "
              "\"device_us\": %.3f, \"device_mean_us\": %.3f, "
              "\"submit_us\": %.3f, "
              "\"round_trip_us\": %.3f, \"bytes\": %.0f, "
              "\"bandwidth_gbs\": %.1f, \"copy_gbs\": %.1f, "
              "\"device\": \"%s\"}\n",
              variant, (long long)mb.C, (long long)mb.cp, (long long)mb.N,
              toString(mb.mix), mb.numSeqs, (long long)mb.packedLength(),
              t.deviceMicros, t.deviceMeanMicros, t.submitMicros,
              t.roundTripMicros, bytes,
              bytes / (t.deviceMicros * 1e-6) / 1e9, copy / 1e9, device);
  std::fflush(stdout);
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: thdc_bench BUNDLE_ROOT [--iterations N]\n");
    return 2;
  }
  std::string root = argv[1];
  int iterations = 200;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--iterations") {
      std::string error;
      std::optional<int64_t> count =
          thdc::parseInteger("--iterations", argv[i + 1], 1, 1000000, error);
      if (!count) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        return 2;
      }
      iterations = int(*count);
    }

  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr)); // the primary context, shared with thdc
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  double copy = copyBandwidth(stream);
  std::fprintf(stderr, "%s: device-to-device copy %.0f GB/s\n", prop.name,
               copy / 1e9);
  {
    // The copy kernel's rate at the same 1 GiB: which of the two copies is
    // faster at that size.
    size_t half = size_t(1) << 30;
    Timing t = copyKernelTiming(half, half, stream, 20);
    std::printf("{\"variant\": \"copy_1gib\", \"bytes\": %zu, "
                "\"cudamemcpy_gbs\": %.1f, \"copy_kernel_gbs\": %.1f, "
                "\"device\": \"%s\"}\n",
                2 * half, copy / 1e9,
                double(2 * half) / (t.deviceMicros * 1e-6) / 1e9, prop.name);
  }

  {
    // The floor of a graph replay: an empty kernel, timed the same way.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    launchEmptyKernel(stream);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    Timing t = measure([&] { CHECK_CUDA(cudaGraphLaunch(exec, stream)); },
                       stream, iterations);
    std::printf("{\"variant\": \"empty_graph\", \"device_us\": %.3f, "
                "\"device_mean_us\": %.3f, \"device\": \"%s\"}\n",
                t.deviceMicros, t.deviceMeanMicros, prop.name);
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }

  int failures = 0;
  std::vector<BenchConfig> configs = bundleConfigs(root);
  if (configs.empty()) {
    std::fprintf(stderr, "error: no bundle named C<C>_cp<cp>_N<N> in %s\n",
                 root.c_str());
    return 1;
  }
  for (const BenchConfig &config : configs) {
    std::string dir = root + "/C" + std::to_string(config.C) + "_cp" +
                      std::to_string(config.cp) + "_N" +
                      std::to_string(config.N);
    runtime::LoadOptions options;
    options.backend = runtime::Backend::Cuda;
    auto executable = runtime::Executable::load(dir, options);
    if (!executable) {
      std::fprintf(stderr, "skipping %s: %s\n", dir.c_str(),
                   executable.status().message().c_str());
      continue;
    }
    for (LengthMix mix : {LengthMix::Long, LengthMix::Short}) {
      Microbatch mb = generateMicrobatch(config.C, config.cp, config.N, mix, 1);
      // The last rank: its chunks are the farthest from the buffer's start.
      int32_t rank = int32_t(config.cp - 1);
      DeviceStep step;
      allocate(step, config.C, config.cp, config.N);
      upload(step, mb, rank);
      double bytes = bytesMoved(mb);
      void *const *buffers = step.pointers.data();

      auto thdcLaunch = [&] {
        require((*executable)->launch(buffers, stream), "launch");
      };
      thdcLaunch();
      CHECK_CUDA(cudaStreamSynchronize(stream));
      bool thdcOk = matchesReference(step, mb, rank);
      auto graph =
          runtime::CapturedLaunch::capture(**executable, buffers, stream);
      require(graph.status(), "capture");
      auto replay = [&] { require(graph->replay(stream), "replay"); };

      StepBuffers hb = handwrittenBuffers(step);
      auto handLaunch = [&] {
        launchHandwrittenStep(hb, config.C, config.cp, config.N, stream);
      };
      for (size_t i = 8; i < step.pointers.size(); ++i) // forget thdc's outputs
        CHECK_CUDA(cudaMemset(step.pointers[i], 0xAB, step.bytes[i]));
      handLaunch();
      CHECK_CUDA(cudaStreamSynchronize(stream));
      bool handOk = matchesReference(step, mb, rank);
      cudaGraph_t handGraph;
      cudaGraphExec_t handExec;
      CHECK_CUDA(
          cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      handLaunch();
      CHECK_CUDA(cudaStreamEndCapture(stream, &handGraph));
      CHECK_CUDA(cudaGraphInstantiate(&handExec, handGraph, 0));
      auto handReplay = [&] { CHECK_CUDA(cudaGraphLaunch(handExec, stream)); };

      if (!thdcOk || !handOk) {
        std::fprintf(stderr,
                     "C=%lld cp=%lld N=%lld %s: %s differs from the "
                     "reference\n",
                     (long long)config.C, (long long)config.cp,
                     (long long)config.N, toString(mix),
                     !thdcOk ? "thdc" : "the hand-written kernel");
        ++failures;
      }
      emit("thdc_launch", mb, measure(thdcLaunch, stream, iterations), bytes,
           copy, prop.name);
      emit("thdc_graph", mb, measure(replay, stream, iterations), bytes, copy,
           prop.name);
      emit("handwritten_launch", mb, measure(handLaunch, stream, iterations),
           bytes, copy, prop.name);
      emit("handwritten_graph", mb, measure(handReplay, stream, iterations),
           bytes, copy, prop.name);
      emit("copy", mb, copyTiming(size_t(bytes), stream, iterations), bytes,
           copy, prop.name);
      emit("copy_kernel", mb,
           copyKernelTiming(size_t(bytesRead(mb)), size_t(bytesWritten(mb)),
                            stream, iterations),
           bytes, copy, prop.name);
      CHECK_CUDA(cudaGraphExecDestroy(handExec));
      CHECK_CUDA(cudaGraphDestroy(handGraph));
    }
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  std::fprintf(stderr, "%s\n",
               failures ? "FAILED: outputs differ"
                        : "all outputs match the reference");
  return failures ? 1 : 0;
}
