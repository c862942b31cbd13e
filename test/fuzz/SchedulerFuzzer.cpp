//===- SchedulerFuzzer.cpp - the dynamic-CP scheduler ---------------------===//
//
// Arbitrary global batches through S3b's scheduler (dynamicCpGroups) at every
// DP x CP rank count from 1 to 32, with and without a sequence cap and
// virtual pipeline stages: a plan whose every microbatch covers every rank,
// or an error refusing the input; never a crash, a write past the rank array
// (the overflow non-power-of-two rank counts once hit) or an error that says
// it is an internal error (the scheduler's own invariant checks failing).
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace thdc;
using namespace thdc::reference;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  const int64_t ranks = 1 + data[0] % 32;
  const int64_t maxPerRank = int64_t(16) << (data[1] % 7);
  const int64_t minCp = int64_t(1) << (data[2] % 3);
  std::optional<int64_t> maxNumSeqs;
  if (data[3] & 1)
    maxNumSeqs = 1 + (data[3] >> 1) % 16;
  const int64_t groupSize = (data[3] & 0x80) ? 1 + data[2] % 5 : 1;
  std::vector<int32_t> lengths;
  for (size_t i = 4; i + 1 < size && lengths.size() < 256; i += 2) {
    const int64_t raw = (int64_t(data[i]) << 8) | data[i + 1];
    lengths.push_back(int32_t(1 + raw % (maxPerRank * ranks)));
  }
  if (lengths.empty())
    return 0;
  Result<DynamicCpGroups> plan =
      dynamicCpGroups(lengths, maxPerRank, ranks, minCp > ranks ? 1 : minCp,
                      maxNumSeqs, groupSize);
  if (!plan) {
    if (plan.status().message().find("internal error") != std::string::npos) {
      std::fprintf(stderr, "%s\n", plan.status().message().c_str());
      std::abort();
    }
    return 0;
  }
  for (const auto &microbatch : plan->groups)
    if (int64_t(microbatch.size()) != ranks)
      std::abort();
  return 0;
}
