//===- InputJsonFuzzer.cpp - thd-run's JSON input reader ------------------===//
//
// Arbitrary text as thd-run's --input for the example's signature at C = 8,
// cp = 2, N = 6 (runtime::readInputs), and written back when it reads.
//
//===----------------------------------------------------------------------===//

#include "tools/thd-run/HostBuffers.h"

#include <cstddef>
#include <cstdint>

using namespace thdc::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::vector<BufferDesc> specs = {
      {"tokens", "i64", 16},   {"labels", "i64", 16},
      {"position_ids", "i64", 16},
      {"loss_mask", "f32", 16}, {"padding_mask", "i1", 8},
      {"cu_seqlens", "i32", 7}, {"num_seqs", "i32", 1}};
  Result<std::vector<HostBuffer>> buffers = readInputs(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), specs);
  if (!buffers)
    return 0;
  (void)writeOutputs(*buffers, /*pretty=*/false);
  return 0;
}
