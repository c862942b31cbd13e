//===- PipelineMutator.h - the pipeline-text fuzzers' mutator ---*- C++ -*-===//
//
// libFuzzer's byte mutation plus, on the same text, the structural ones:
// one time in three rewireSsaUse (SsaRewire.h), one time in sixteen
// nestDeeply (Nesting.h). The pipeline fuzzer and the thd-opt input fuzzer
// both mutate pipeline text with it (their LLVMFuzzerCustomMutator).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_FUZZ_PIPELINEMUTATOR_H
#define THDC_TEST_FUZZ_PIPELINEMUTATOR_H

#include "Nesting.h"
#include "SsaRewire.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace thdc::fuzz {

inline size_t mutatePipelineText(uint8_t *data, size_t size, size_t maxSize,
                                 unsigned int seed) {
  std::mt19937 rng(seed);
  unsigned kind = rng() % 48;
  if (kind < 19) {
    std::string text(reinterpret_cast<const char *>(data), size);
    if (kind < 16 ? rewireSsaUse(text, maxSize, rng)
                  : nestDeeply(text, maxSize, rng)) {
      std::memcpy(data, text.data(), text.size());
      return text.size();
    }
  }
  return LLVMFuzzerMutate(data, size, maxSize);
}

} // namespace thdc::fuzz

#endif // THDC_TEST_FUZZ_PIPELINEMUTATOR_H
