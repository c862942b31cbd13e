//===- golden_step.cpp - the example microbatch through the reference -----===//
//
// Runs one microbatch of examples/megatron_graph_step.mlir (C = 8, cp = 2,
// N = 6) through the reference semantics, on the running example of docs/semantics.md:
// three sequences with valid lengths [3, 2, 4] padded to [4, 4, 4]. Prints
// both CP ranks' outputs and checks them against the golden vectors of docs/semantics.md;
// exits 1 on any mismatch.
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace thdc::reference;

namespace {
template <typename T> std::string format(const std::vector<T> &values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i)
      out += ", ";
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%g", double(values[i]));
    out += buffer;
  }
  return out + "]";
}

int failures = 0;

template <typename T>
void check(const char *rank, const char *name, const std::vector<T> &actual,
           const std::vector<T> &expected) {
  bool ok = actual == expected;
  std::printf("  %-18s %s%s\n", name, format(actual).c_str(),
              ok ? "" : ("   MISMATCH, expected " + format(expected)).c_str());
  if (!ok) {
    std::fprintf(stderr, "error: rank %s, %s differs from the golden vector\n",
                 rank, name);
    ++failures;
  }
}
} // namespace

int main() {
  constexpr int64_t C = 8, cp = 2, N = 6;
  constexpr int64_t P = 99; // the dataset's pad id, overwritten by S6
  GraphStepInput input;
  // Rows 12..15 are beyond cu_seqlens_padded[num_seqs]: arbitrary contents.
  input.tokens = {11, 12, 13, P, 21, 22, P, P, 31, 32, 33, 34, 7, 7, 7, 7};
  input.labels = {12, 13, 1, P, 22, 2, P, P, 32, 33, 34, 3, 7, 7, 7, 7};
  input.positionIds = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 7, 7, 7, 7};
  input.lossMask = std::vector<float>(16, 1.0f);
  input.cuSeqlens = {0, 3, 5, 9, -1, -1, -1};
  input.cuSeqlensPadded = {0, 4, 8, 12, -1, -1, -1};
  input.numSeqs = 3;

  struct Golden {
    std::vector<int64_t> tokens, labels, positionIds;
    std::vector<float> lossMask;
    std::vector<uint8_t> paddingMask;
  };
  // S7/S8/S10 of docs/semantics.md: rank 0 keeps rows [0,3,4,7,8,11], rank 1 [1,2,5,6,9,10],
  // then two tail rows covered by the dummy sequence.
  const Golden golden[2] = {{{11, 0, 21, 0, 31, 34, 0, 0},
                             {12, 0, 22, 0, 32, 3, 0, 0},
                             {0, 0, 0, 0, 0, 3, 0, 0},
                             {1, 0, 1, 0, 1, 1, 0, 0},
                             {0, 1, 0, 1, 0, 0, 1, 1}},
                            {{12, 13, 22, 0, 32, 33, 0, 0},
                             {13, 1, 2, 0, 33, 34, 0, 0},
                             {1, 2, 1, 0, 1, 2, 0, 0},
                             {1, 1, 1, 0, 1, 1, 0, 0},
                             {0, 0, 0, 1, 0, 0, 1, 1}}};
  const std::vector<int32_t> goldenCuPadded = {0, 4, 8, 12, 16, 16, 16};
  const std::vector<int32_t> goldenCu = {0, 3, 5, 9, 13, 13, 13};

  std::printf("megatron_graph_step through the reference, C=%lld cp=%lld "
              "N=%lld, cu_seqlens [0,3,5,9], cu_seqlens_padded [0,4,8,12]\n",
              (long long)C, (long long)cp, (long long)N);
  for (int32_t rank = 0; rank < cp; ++rank) {
    input.cpRank = rank;
    GraphStepOutput out = megatronGraphStep(input, C, cp, N);
    std::string r = std::to_string(rank);
    std::printf("cp_rank %d:\n", rank);
    check(r.c_str(), "tokens", out.tokens, golden[rank].tokens);
    check(r.c_str(), "labels", out.labels, golden[rank].labels);
    check(r.c_str(), "position_ids", out.positionIds, golden[rank].positionIds);
    check(r.c_str(), "loss_mask", out.lossMask, golden[rank].lossMask);
    check(r.c_str(), "padding_mask", out.paddingMask, golden[rank].paddingMask);
    check(r.c_str(), "cu_seqlens_padded", out.cuSeqlensPadded, goldenCuPadded);
    check(r.c_str(), "cu_seqlens", out.cuSeqlens, goldenCu);
    check(r.c_str(), "max_seqlen", std::vector<int32_t>{out.maxSeqlen},
          std::vector<int32_t>{int32_t(C * cp)});
    check(r.c_str(), "status", std::vector<int32_t>{out.status},
          std::vector<int32_t>{0});
  }
  std::printf("%s\n", failures
                          ? "FAILED: outputs differ from the golden vectors"
                          : "OK: both ranks match the golden vectors of docs/semantics.md");
  return failures ? 1 : 0;
}
