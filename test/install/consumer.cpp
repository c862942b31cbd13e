//===- consumer.cpp - a program built against an installed thdc -----------===//
//
//   thdc-consumer BUNDLE
//
// Loads a bundle of examples/megatron_graph_step.mlir on the host backend,
// runs it on the golden inputs of CP rank 0 (shared/spec, as in
// test/tools/Inputs/golden_rank0.json) and prints what the manifest says
// and the outputs.
//
//===----------------------------------------------------------------------===//

#include "reference/StatusBits.h"
#include "runtime/Executable.h"

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
  const std::map<std::string, std::vector<int64_t>> inputs = {
      {"tokens", {11, 12, 13, 99, 21, 22, 99, 99, 31, 32, 33, 34, 7, 7, 7, 7}},
      {"labels", {12, 13, 1, 99, 22, 2, 99, 99, 32, 33, 34, 3, 7, 7, 7, 7}},
      {"position_ids", {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 7, 7, 7, 7}},
      {"cu_seqlens", {0, 3, 5, 9, -1, -1, -1}},
      {"cu_seqlens_padded", {0, 4, 8, 12, -1, -1, -1}},
      {"num_seqs", {3}},
      {"cp_rank", {0}}};
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
      const std::vector<int64_t> &values = inputs.at(buffer.name);
      for (int64_t e = 0; e < buffer.elements; ++e) {
        if (buffer.type == "i64")
          reinterpret_cast<int64_t *>(bytes.data())[e] = values[e];
        else
          reinterpret_cast<int32_t *>(bytes.data())[e] = int32_t(values[e]);
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
    std::printf("%s:", buffer.name.c_str());
    for (int64_t e = 0; e < buffer.elements; ++e) {
      if (buffer.type == "i64")
        std::printf(" %lld",
                    (long long)reinterpret_cast<int64_t *>(bytes.data())[e]);
      else
        std::printf(" %d", reinterpret_cast<int32_t *>(bytes.data())[e]);
    }
    if (buffer.name == "status")
      std::printf(" (%s)", thdc::reference::describeStatus(
                               reinterpret_cast<int32_t *>(bytes.data())[0])
                               .c_str());
    std::printf("\n");
  }
  return 0;
}
