//===- RuntimeCheck.cpp - a bundle through the runtime vs the reference ---===//
//
//   thdc-runtime-check [--replays N] [--microbatches N] BUNDLE...
//
// For each bundle of examples/megatron_graph_step.mlir: random microbatches
// launched through the runtime for every CP rank and compared with the
// reference; on a GPU, also compared with the bundle's host code (the CPU
// path); one launch captured in a CUDA graph and replayed with new data
// (different num_seqs and lengths) every replay; and every status bit on bad
// data. Runs on the GPU when there is one, else on the host code. Prints
// `N passed, N failed` last; exits 1 on any failure.
//
// A bundle folder that holds a `cases.bin` (any example pipeline: recorded
// by the differential harness with the reference interpreter's outputs, see
// test/runtime/CaseFile.h) is checked against those cases instead: each case
// launched directly, then every case again through one captured CUDA graph
// replayed with that case's inputs, all outputs poisoned first and compared
// byte for byte.
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"
#include "runtime/CudaDriver.h"
#include "runtime/Executable.h"
#include "test/runtime/CaseFile.h"
#include "tools/ParseNumber.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::reference;
using namespace thdc::runtime;

namespace {
int passed = 0, failed = 0;

void report(bool ok, const std::string &what) {
  (ok ? passed : failed) += 1;
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
}

struct Shape {
  int64_t C, cp, N;
};

/// A random valid microbatch: zero-length sequences, empty and full batches.
GraphStepInput randomInput(std::mt19937 &rng, const Shape &s) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int64_t granularity = s.cp > 1 ? 2 * s.cp : 1;
  int64_t budget = s.C * s.cp;
  GraphStepInput in;
  int64_t n = uniform(0, 4) == 0 ? s.N - 1 : uniform(0, s.N - 1);
  std::vector<int32_t> cu{0}, cup{0};
  for (int64_t i = 0; i < n; ++i) {
    int64_t left = budget - cup.back();
    int64_t padded =
        std::min(left, uniform(0, 2 * budget / std::max<int64_t>(n, 1)));
    padded = padded / granularity * granularity;
    int64_t valid = uniform(0, 3) == 0 ? padded : uniform(0, padded);
    cu.push_back(int32_t(cu.back() + valid));
    cup.push_back(int32_t(cup.back() + padded));
  }
  if (n > 0 && uniform(0, 3) == 0) { // exactly full
    int64_t extra = budget - cup.back();
    cup.back() += int32_t(extra);
  }
  in.numSeqs = int32_t(n);
  in.cuSeqlens = cu;
  in.cuSeqlensPadded = cup;
  for (int64_t i = n + 1; i <= s.N; ++i) { // garbage beyond num_seqs + 1
    in.cuSeqlens.push_back(int32_t(uniform(-1000, 1000)));
    in.cuSeqlensPadded.push_back(int32_t(uniform(-1000, 1000)));
  }
  for (int64_t row = 0; row < budget; ++row) {
    in.tokens.push_back(uniform(0, 50000));
    in.labels.push_back(uniform(0, 50000));
    in.positionIds.push_back(uniform(0, 4096));
    in.lossMask.push_back(float(uniform(0, 1)));
  }
  in.cpRank = int32_t(uniform(0, s.cp - 1));
  return in;
}

/// Host copies of a pipeline's buffers, by name.
struct HostData {
  std::vector<std::vector<uint8_t>> bytes;
};

HostData pack(const Manifest &m, const GraphStepInput &in) {
  HostData data;
  auto put = [&](const char *name, const void *source, size_t size) {
    int index = m.find(name);
    if (index < 0)
      return;
    data.bytes[index].assign(static_cast<const uint8_t *>(source),
                             static_cast<const uint8_t *>(source) + size);
  };
  data.bytes.resize(m.buffers.size());
  for (size_t i = 0; i < m.buffers.size(); ++i)
    data.bytes[i].assign(m.buffers[i].bytes(), 0xAB); // outputs: a marker
  put("tokens", in.tokens.data(), in.tokens.size() * 8);
  put("labels", in.labels.data(), in.labels.size() * 8);
  put("position_ids", in.positionIds.data(), in.positionIds.size() * 8);
  put("loss_mask", in.lossMask.data(), in.lossMask.size() * 4);
  put("cu_seqlens", in.cuSeqlens.data(), in.cuSeqlens.size() * 4);
  put("cu_seqlens_padded", in.cuSeqlensPadded.data(),
      in.cuSeqlensPadded.size() * 4);
  put("num_seqs", &in.numSeqs, 4);
  put("cp_rank", &in.cpRank, 4);
  return data;
}

/// The first difference between the outputs in `data` and `expected`.
std::string compare(const Manifest &m, const HostData &data,
                    const GraphStepOutput &expected) {
  auto check = [&](const char *name, const void *want,
                   size_t size) -> std::string {
    int index = -1;
    for (size_t i = 0; i < m.buffers.size(); ++i)
      if (m.buffers[i].isOutput && m.buffers[i].name == name)
        index = int(i);
    if (index < 0)
      return std::string("no output '") + name + "'";
    if (data.bytes[index].size() != size)
      return std::string("size of '") + name + "'";
    if (std::memcmp(data.bytes[index].data(), want, size) != 0)
      return std::string("'") + name + "' differs";
    return "";
  };
  std::string diff;
  for (std::string d :
       {check("tokens", expected.tokens.data(), expected.tokens.size() * 8),
        check("labels", expected.labels.data(), expected.labels.size() * 8),
        check("position_ids", expected.positionIds.data(),
              expected.positionIds.size() * 8),
        check("loss_mask", expected.lossMask.data(),
              expected.lossMask.size() * 4),
        check("padding_mask", expected.paddingMask.data(),
              expected.paddingMask.size()),
        check("cu_seqlens_padded", expected.cuSeqlensPadded.data(),
              expected.cuSeqlensPadded.size() * 4),
        check("cu_seqlens", expected.cuSeqlens.data(),
              expected.cuSeqlens.size() * 4),
        check("max_seqlen", &expected.maxSeqlen, 4),
        check("status", &expected.status, 4)})
    if (diff.empty())
      diff = d;
  return diff;
}

/// Uploads the inputs, runs `run`, downloads everything.
template <typename Run>
Status execute(const Executable &p, const Buffers &buffers, HostData &data,
               void *stream, Run run) {
  const Manifest &m = p.manifest();
  for (size_t i = 0; i < m.buffers.size(); ++i)
    if (Status s = buffers.upload(i, data.bytes[i].data(), stream); !s)
      return s;
  if (Status s = run(); !s)
    return s;
  for (size_t i = 0; i < m.buffers.size(); ++i)
    if (m.buffers[i].isOutput)
      if (Status s = buffers.download(i, data.bytes[i].data(), stream); !s)
        return s;
  return synchronizeStream(p.backend(), stream);
}

std::string describe(const GraphStepInput &in) {
  std::string text = "num_seqs " + std::to_string(in.numSeqs) + ", rank " +
                     std::to_string(in.cpRank) + ", cu_seqlens_padded [";
  for (int32_t i = 0; i <= std::clamp(in.numSeqs, 0, 8); ++i)
    text += (i ? "," : "") + std::to_string(in.cuSeqlensPadded[size_t(i)]);
  return text + (in.numSeqs > 8 ? ",...]" : "]");
}

/// The bundle in `dir`, or null with the failure reported.
std::unique_ptr<Executable> loadBundle(const std::string &dir) {
  Result<std::unique_ptr<Executable>> loaded = Executable::load(dir);
  if (!loaded) {
    report(false, "load " + dir + ": " + loaded.status().message());
    return nullptr;
  }
  return std::move(*loaded);
}

/// Whether a bundle's buffers and stream were created; a failure is
/// reported.
bool allocated(const std::string &name, const Result<Buffers> &buffers,
               const Result<void *> &stream) {
  if (buffers && stream)
    return true;
  report(false, name + ": " +
                    (!buffers ? buffers.status() : stream.status()).message());
  return false;
}

/// `data` uploaded into `buffers`, then one launch of `p` on them captured
/// on `stream`.
Result<CapturedLaunch> uploadAndCapture(const Executable &p, Buffers &buffers,
                                        void *stream, const HostData &data) {
  for (size_t i = 0; i < p.manifest().buffers.size(); ++i)
    (void)buffers.upload(i, data.bytes[i].data(), stream);
  return CapturedLaunch::capture(p, buffers.pointers(), stream);
}

/// The recorded cases of `dir`/cases.bin through `p`, the bundle in `dir`.
void checkCases(const std::string &dir, const Executable &p) {
  std::string error;
  thdc::testing::CaseFile cases;
  if (!thdc::testing::readCaseFile(dir + "/cases.bin", cases, error)) {
    report(false, error);
    return;
  }
  const Manifest &m = p.manifest();
  std::string name = m.entry;
  for (const auto &[key, value] : m.params)
    name += " " + key + "=" + std::to_string(value);
  name += " on " + p.loadInfo().device;
  // The cases must describe this bundle's buffers, in its order.
  bool same = cases.buffers.size() == m.buffers.size();
  for (size_t i = 0; same && i < m.buffers.size(); ++i)
    same = cases.buffers[i].name == m.buffers[i].name &&
           cases.buffers[i].isOutput == m.buffers[i].isOutput &&
           cases.buffers[i].bytes == m.buffers[i].bytes();
  report(same, name + ": the recorded cases describe the bundle's buffers");
  if (!same)
    return;
  Result<Buffers> buffers = Buffers::allocate(p);
  Result<void *> stream = createStream(p.backend());
  if (!allocated(name, buffers, stream))
    return;
  // Outputs poisoned before every run, so an unwritten element shows up.
  auto poisoned = [&](size_t k) {
    HostData data;
    for (size_t i = 0; i < m.buffers.size(); ++i) {
      data.bytes.push_back(cases.cases[k][i]);
      if (m.buffers[i].isOutput)
        std::fill(data.bytes.back().begin(), data.bytes.back().end(), 0xA5);
    }
    return data;
  };
  auto firstDifference = [&](const HostData &data, size_t k) -> std::string {
    for (size_t i = 0; i < m.buffers.size(); ++i)
      if (m.buffers[i].isOutput && data.bytes[i] != cases.cases[k][i])
        return "case " + std::to_string(k) + ": '" + m.buffers[i].name +
               "' differs from the reference";
    return "";
  };
  for (const char *how : {"launch", "graph replay"}) {
    bool graphs = std::string(how) == "graph replay";
    std::optional<CapturedLaunch> graph;
    if (graphs) {
      Result<CapturedLaunch> captured =
          uploadAndCapture(p, *buffers, *stream, poisoned(0));
      if (!captured) {
        report(false, name + ": capture: " + captured.status().message());
        continue;
      }
      graph.emplace(std::move(*captured));
    }
    std::string mismatch;
    size_t ran = 0;
    for (size_t k = 0; k < cases.cases.size() && mismatch.empty(); ++k, ++ran) {
      HostData data = poisoned(k);
      Status st = execute(p, *buffers, data, *stream, [&] {
        return graphs ? graph->replay(*stream)
                      : p.launch(buffers->pointers(), *stream);
      });
      mismatch = st ? firstDifference(data, k) : st.message();
    }
    report(mismatch.empty(), name + ": " + std::to_string(ran) +
                                 " recorded cases by " + how +
                                 (mismatch.empty() ? "" : ": " + mismatch));
  }
  destroyStream(p.backend(), *stream);
}

/// Launches with every output buffer one element past a 16-byte boundary
/// (i64 outputs 8-byte aligned, i32 and f32 4-byte, bytes odd) on a few
/// random microbatches and compares with the reference; the outputs are
/// then copied into `buffers` to be read as usual.
void checkShiftedOutputs(const Executable &p, const Buffers &buffers,
                         void *stream, const Shape &s, std::mt19937 &rng,
                         const std::string &name) {
  const Manifest &m = p.manifest();
  const CudaDriver &cu = **CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(cu, p.loadInfo().deviceOrdinal); !entered) {
    report(false, name + ": shifted outputs: " + entered.message());
    return;
  }
  std::vector<void *> pointers(buffers.pointers(),
                               buffers.pointers() + m.buffers.size());
  std::vector<CUdeviceptr> blocks;
  bool allocatedAll = true;
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    if (!m.buffers[i].isOutput)
      continue;
    const ElementTypeInfo *type = findElementType(m.buffers[i].type);
    size_t element = type ? type->bytes : 1;
    CUdeviceptr block = 0;
    if (cu.cuMemAlloc(&block, m.buffers[i].bytes() + 16) != CUDA_SUCCESS) {
      allocatedAll = false;
      break;
    }
    blocks.push_back(block);
    pointers[i] = reinterpret_cast<void *>(block + element);
  }
  int bad = 0;
  std::string first;
  for (int i = 0; allocatedAll && i < 3; ++i) {
    GraphStepInput in = randomInput(rng, s);
    in.cpRank = int32_t(i % s.cp);
    HostData data = pack(m, in);
    Status st = execute(p, buffers, data, stream, [&]() -> Status {
      if (Status launched = p.launch(pointers.data(), stream); !launched)
        return launched;
      for (size_t b = 0; b < m.buffers.size(); ++b)
        if (m.buffers[b].isOutput &&
            cu.cuMemcpyDtoDAsync(
                reinterpret_cast<CUdeviceptr>(buffers.pointer(b)),
                reinterpret_cast<CUdeviceptr>(pointers[b]),
                m.buffers[b].bytes(),
                static_cast<CUstream>(stream)) != CUDA_SUCCESS)
          return Status::error("copying the shifted outputs back");
      return Status();
    });
    std::string diff =
        st ? compare(m, data, megatronGraphStep(in, s.C, s.cp, s.N))
           : st.message();
    if (!diff.empty() && bad++ == 0)
      first = diff + " (" + describe(in) + ")";
  }
  (void)synchronizeStream(p.backend(), stream);
  for (CUdeviceptr block : blocks)
    cu.cuMemFree(block);
  report(allocatedAll && bad == 0,
         name +
             ": outputs one element past a 16-byte boundary match the "
             "reference" +
             (!allocatedAll ? std::string(" (could not allocate them)")
              : bad ? ": " + std::to_string(bad) + " mismatches, first " + first
                    : std::string()));
}

void checkBundle(const std::string &dir, int microbatches, int replays) {
  std::unique_ptr<Executable> loaded = loadBundle(dir);
  if (!loaded)
    return;
  const Executable &p = *loaded;
  if (std::ifstream(dir + "/cases.bin")) {
    checkCases(dir, p);
    return;
  }
  const Manifest &m = p.manifest();
  // Random microbatches need the graph step's parameters and inputs; any
  // other bundle is a failure to report, not an exception.
  for (const char *param : {"C", "cp", "N"})
    if (!m.params.count(param)) {
      report(false, dir + ": the manifest has no parameter '" + param +
                        "'; random microbatches need a bundle of the graph "
                        "step (examples/megatron_graph_step.mlir) or "
                        "recorded cases (cases.bin)");
      return;
    }
  Shape s{m.params.at("C"), m.params.at("cp"), m.params.at("N")};
  if (s.C < 1 || s.cp < 1 || s.N < 1 || s.C > (int64_t(1) << 26) ||
      s.cp > 64 || s.N > (int64_t(1) << 20)) {
    report(false, dir + ": parameters C=" + std::to_string(s.C) +
                      " cp=" + std::to_string(s.cp) + " N=" +
                      std::to_string(s.N) + " are out of the checked range");
    return;
  }
  {
    std::mt19937 probe(0);
    HostData data = pack(m, randomInput(probe, s));
    for (size_t i = 0; i < m.buffers.size(); ++i)
      if (data.bytes[i].size() != m.buffers[i].bytes()) {
        report(false, dir + ": buffer '" + m.buffers[i].name + "' holds " +
                          std::to_string(m.buffers[i].bytes()) +
                          " bytes, but the graph step with these parameters "
                          "has " +
                          std::to_string(data.bytes[i].size()));
        return;
      }
  }
  std::string name = m.entry + " C=" + std::to_string(s.C) +
                     " cp=" + std::to_string(s.cp) +
                     " N=" + std::to_string(s.N) + " on " + p.loadInfo().device;
  const LoadInfo &load = p.loadInfo();
  std::printf("bundle %s: %s, module load %.0f us (the module itself %.0f "
              "us)%s\n",
              dir.c_str(), name.c_str(), load.loadMicros, load.moduleMicros,
              load.cubinFromBundle      ? " (the bundle's cubin)"
              : load.cubinFromCache     ? " (cached cubin)"
              : load.cubinCacheRepaired ? " (a damaged cached cubin, compiled "
                                          "again and replaced)"
                                        : "");
  Result<Buffers> buffers = Buffers::allocate(p);
  Result<void *> stream = createStream(p.backend());
  if (!allocated(name, buffers, stream))
    return;
  // On a GPU, the bundle's host code runs the same microbatches: the GPU
  // path is compared with the CPU path, not only with the reference.
  std::unique_ptr<Executable> host;
  std::unique_ptr<Buffers> hostBuffers;
  if (p.backend() == Backend::Cuda) {
    LoadOptions options;
    options.backend = Backend::Host;
    Result<std::unique_ptr<Executable>> h = Executable::load(dir, options);
    if (h) {
      host = std::move(*h);
      hostBuffers =
          std::make_unique<Buffers>(std::move(*Buffers::allocate(*host)));
    }
  }

  std::mt19937 rng(uint32_t(s.C * 31 + s.cp * 7 + s.N));
  int mismatches = 0, hostMismatches = 0;
  std::string first;
  for (int i = 0; i < microbatches; ++i) {
    GraphStepInput in = randomInput(rng, s);
    for (int32_t rank = 0; rank < s.cp; ++rank) {
      in.cpRank = rank;
      HostData data = pack(m, in);
      Status st = execute(p, *buffers, data, *stream, [&] {
        return p.launch(buffers->pointers(), *stream);
      });
      std::string diff =
          st ? compare(m, data, megatronGraphStep(in, s.C, s.cp, s.N))
             : st.message();
      if (!diff.empty() && mismatches++ == 0)
        first = diff + " (" + describe(in) + ")";
      if (host) {
        HostData hostData = pack(m, in);
        Status hs = execute(*host, *hostBuffers, hostData, nullptr, [&] {
          return host->launch(hostBuffers->pointers());
        });
        if (!hs || hostData.bytes != data.bytes)
          ++hostMismatches;
      }
    }
  }
  report(mismatches == 0,
         name + ": " + std::to_string(microbatches) +
             " random microbatches x every rank match the reference" +
             (first.empty() ? ""
                            : ": " + std::to_string(mismatches) +
                                  " mismatches, first " + first));
  if (host)
    report(hostMismatches == 0,
           name + ": GPU outputs equal the host code's, byte for byte" +
               (hostMismatches
                    ? " (" + std::to_string(hostMismatches) + " differ)"
                    : ""));

  // Outputs one element past a 16-byte boundary: a kernel that stores two
  // elements at a time must take its one-element stores there.
  if (p.backend() == Backend::Cuda)
    checkShiftedOutputs(p, *buffers, *stream, s, rng, name);

  // One capture, many replays, new data (num_seqs, lengths, rank) each time.
  {
    Result<CapturedLaunch> graph =
        uploadAndCapture(p, *buffers, *stream, pack(m, randomInput(rng, s)));
    if (!graph) {
      report(false, name + ": capture: " + graph.status().message());
    } else {
      int bad = 0, distinctCounts = 0;
      std::vector<bool> seen(size_t(s.N) + 1, false);
      for (int r = 0; r < replays; ++r) {
        GraphStepInput next = randomInput(rng, s);
        if (!seen[size_t(next.numSeqs)])
          seen[size_t(next.numSeqs)] = true, ++distinctCounts;
        HostData d = pack(m, next);
        Status st = execute(p, *buffers, d, *stream,
                            [&] { return graph->replay(*stream); });
        std::string diff =
            st ? compare(m, d, megatronGraphStep(next, s.C, s.cp, s.N))
               : st.message();
        if (!diff.empty() && bad++ == 0)
          first = diff + " (" + describe(next) + ")";
      }
      report(bad == 0, name + ": " + std::to_string(replays) +
                           " replays of one captured graph, " +
                           std::to_string(distinctCounts) +
                           " distinct num_seqs, all match the reference" +
                           (bad ? ": " + std::to_string(bad) +
                                      " mismatches, first " + first
                                : ""));
    }
  }

  // Every fault, through the same launch path.
  struct Fault {
    const char *what;
    void (*apply)(GraphStepInput &, const Shape &);
  };
  const Fault faults[] = {
      {"num_seqs above N-1",
       [](GraphStepInput &in, const Shape &s) { in.numSeqs = int32_t(s.N); }},
      {"negative num_seqs",
       [](GraphStepInput &in, const Shape &) { in.numSeqs = -1; }},
      {"total above C*cp",
       [](GraphStepInput &in, const Shape &s) {
         in.numSeqs = 1;
         in.cuSeqlens[1] = 1;
         in.cuSeqlensPadded[1] = int32_t(s.C * s.cp + 2 * s.cp);
       }},
      {"offset not divisible by 2*cp",
       [](GraphStepInput &in, const Shape &s) {
         in.numSeqs = 1;
         in.cuSeqlens[1] = 1;
         in.cuSeqlensPadded[1] = s.cp > 1 ? 1 : -1;
       }},
      {"decreasing offsets",
       [](GraphStepInput &in, const Shape &s) {
         in.numSeqs = 2;
         in.cuSeqlens[1] = 0, in.cuSeqlens[2] = 0;
         in.cuSeqlensPadded[1] = int32_t(4 * s.cp), in.cuSeqlensPadded[2] = 0;
       }},
      {"valid longer than padded",
       [](GraphStepInput &in, const Shape &s) {
         in.numSeqs = 1;
         in.cuSeqlens[1] = int32_t(2 * s.cp + 1);
         in.cuSeqlensPadded[1] = int32_t(2 * s.cp);
       }},
      {"cp_rank out of range",
       [](GraphStepInput &in, const Shape &s) { in.cpRank = int32_t(s.cp); }},
  };
  for (const Fault &fault : faults) {
    GraphStepInput in = randomInput(rng, s);
    in.cpRank = 0;
    fault.apply(in, s);
    GraphStepOutput want = megatronGraphStep(in, s.C, s.cp, s.N);
    HostData data = pack(m, in);
    Status st = execute(p, *buffers, data, *stream,
                        [&] { return p.launch(buffers->pointers(), *stream); });
    std::string diff = st ? compare(m, data, want) : st.message();
    report(diff.empty() && want.status != 0,
           name + ": status " + std::to_string(want.status) + " for " +
               fault.what + (diff.empty() ? "" : ": " + diff));
  }

  // Buffers that share memory with an output are refused before anything
  // runs: the kernel is compiled on the promise that they do not.
  {
    size_t firstOutput = 0;
    while (!m.buffers[firstOutput].isOutput)
      ++firstOutput;
    std::vector<void *> pointers(buffers->pointers(),
                                 buffers->pointers() + m.buffers.size());
    std::vector<void *> ontoInput = pointers, ontoOutput = pointers;
    ontoInput[firstOutput] = pointers[0];
    ontoOutput[firstOutput + 1] =
        static_cast<char *>(pointers[firstOutput]) + 1;
    Status input = p.launch(ontoInput.data(), *stream);
    Status output = p.launch(ontoOutput.data(), *stream);
    report(!input && input.message().find("overlaps input") !=
                         std::string::npos &&
               !output &&
               output.message().find("overlaps output") != std::string::npos,
           name + ": outputs sharing memory are refused (" +
               (input ? std::string("accepted") : input.message()) + "; " +
               (output ? std::string("accepted") : output.message()) + ")");
  }
  destroyStream(p.backend(), *stream);
}
} // namespace

int main(int argc, char **argv) {
  int microbatches = 50, replays = 1000;
  std::vector<std::string> bundles;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--replays" || arg == "--microbatches") && i + 1 < argc) {
      std::string error;
      std::optional<int64_t> count =
          thdc::parseInteger(arg, argv[++i], 1, 1000000, error);
      if (!count) {
        std::fprintf(stderr, "error: %s\n", error.c_str());
        return 2;
      }
      (arg == "--replays" ? replays : microbatches) = int(*count);
    } else {
      bundles.push_back(arg);
    }
  }
  if (bundles.empty()) {
    std::fprintf(stderr, "usage: thdc-runtime-check [--replays N] "
                         "[--microbatches N] BUNDLE...\n");
    return 2;
  }
  for (const std::string &bundle : bundles)
    checkBundle(bundle, microbatches, replays);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
