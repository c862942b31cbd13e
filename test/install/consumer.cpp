//===- consumer.cpp - a program built against an installed thdc -----------===//
//
//   thdc-consumer BUNDLE
//
// Loads a bundle of examples/megatron_graph_step.mlir (any C, cp and N) on
// the host backend, runs it on the golden microbatch of CP rank 0 (shared
// spec, as in test/tools/Inputs/golden_rank0.json) laid out in the bundle's
// own buffer lengths, and prints what the manifest says, the first rows of
// the output tokens and the status. A bundle of another pipeline, or one
// too small for the golden microbatch, is refused with a message.
//
//===----------------------------------------------------------------------===//

#include "reference/StatusBits.h"
#include "runtime/Executable.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace thdc::runtime;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: thdc-consumer BUNDLE\n");
    return 2;
  }
  Result<Manifest> manifest = readManifest(argv[1]);
  if (!manifest) {
    std::fprintf(stderr, "error: %s\n", manifest.status().message().c_str());
    return 1;
  }
  std::printf("entry %s, format %d, %zu buffers\n", manifest->entry.c_str(),
              manifest->format, manifest->buffers.size());

  LoadOptions options;
  options.backend = Backend::Host;
  auto executable = Executable::load(argv[1], options);
  if (!executable) {
    std::fprintf(stderr, "error: %s\n", executable.status().message().c_str());
    return 1;
  }
  auto buffers = Buffers::allocate(**executable);
  if (!buffers) {
    std::fprintf(stderr, "error: %s\n", buffers.status().message().c_str());
    return 1;
  }
  // The golden microbatch: its rows (then filler rows), its offsets (then
  // the -1 the unused entries of the cu arrays hold), its scalars.
  struct Golden {
    std::vector<int64_t> values;
    int64_t fill;
  };
  const std::map<std::string, Golden> inputs = {
      {"tokens", {{11, 12, 13, 99, 21, 22, 99, 99, 31, 32, 33, 34}, 7}},
      {"labels", {{12, 13, 1, 99, 22, 2, 99, 99, 32, 33, 34, 3}, 7}},
      {"position_ids", {{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, 7}},
      {"cu_seqlens", {{0, 3, 5, 9}, -1}},
      {"cu_seqlens_padded", {{0, 4, 8, 12}, -1}},
      {"num_seqs", {{3}, 0}},
      {"cp_rank", {{0}, 0}}};
  const Manifest &m = (*executable)->manifest();
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const BufferDesc &buffer = m.buffers[i];
    if (buffer.isOutput)
      continue;
    std::vector<char> bytes(buffer.bytes());
    if (buffer.type == "f32") {
      for (int64_t e = 0; e < buffer.elements; ++e)
        reinterpret_cast<float *>(bytes.data())[e] = 1.0f;
    } else {
      auto golden = inputs.find(buffer.name);
      if (golden == inputs.end() ||
          (buffer.type != "i64" && buffer.type != "i32")) {
        std::fprintf(stderr,
                     "error: input '%s' (%s) is not one of the graph step's; "
                     "this program runs bundles of "
                     "examples/megatron_graph_step.mlir\n",
                     buffer.name.c_str(), buffer.type.c_str());
        return 1;
      }
      const Golden &g = golden->second;
      if (size_t(buffer.elements) < g.values.size()) {
        std::fprintf(stderr,
                     "error: input '%s' holds %lld elements, fewer than the "
                     "%zu of the golden microbatch\n",
                     buffer.name.c_str(), (long long)buffer.elements,
                     g.values.size());
        return 1;
      }
      for (int64_t e = 0; e < buffer.elements; ++e) {
        int64_t value = size_t(e) < g.values.size() ? g.values[e] : g.fill;
        if (buffer.type == "i64")
          reinterpret_cast<int64_t *>(bytes.data())[e] = value;
        else
          reinterpret_cast<int32_t *>(bytes.data())[e] = int32_t(value);
      }
    }
    if (Status status = buffers->upload(i, bytes.data()); !status) {
      std::fprintf(stderr, "error: %s\n", status.message().c_str());
      return 1;
    }
  }
  if (Status status = (*executable)->launch(buffers->pointers()); !status) {
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    return 1;
  }
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const BufferDesc &buffer = m.buffers[i];
    if (!buffer.isOutput ||
        (buffer.name != "tokens" && buffer.name != "status"))
      continue;
    std::vector<char> bytes(buffer.bytes());
    if (Status status = buffers->download(i, bytes.data()); !status) {
      std::fprintf(stderr, "error: %s\n", status.message().c_str());
      return 1;
    }
    // The first rows; a large bundle's others are counted, not printed.
    constexpr int64_t kShown = 8;
    std::printf("%s:", buffer.name.c_str());
    for (int64_t e = 0; e < std::min(buffer.elements, kShown); ++e) {
      if (buffer.type == "i64")
        std::printf(" %lld",
                    (long long)reinterpret_cast<int64_t *>(bytes.data())[e]);
      else
        std::printf(" %d", reinterpret_cast<int32_t *>(bytes.data())[e]);
    }
    if (buffer.elements > kShown)
      std::printf(" ... (%lld more)",
                  (long long)(buffer.elements - kShown));
    if (buffer.name == "status")
      std::printf(" (%s)", thdc::reference::describeStatus(
                               reinterpret_cast<int32_t *>(bytes.data())[0])
                               .c_str());
    std::printf("\n");
  }
  return 0;
}
