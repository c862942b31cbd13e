//===- handwritten.h - the hand-fused CUDA baseline -------------*- C++ -*-===//
//
// The benchmark's "hand-fused bar": one hand-written CUDA kernel computing,
// for one CP rank, every output of examples/megatron_graph_step.mlir exactly
// as thdc::reference::megatronGraphStep defines them (reference/Reference.h),
// status bits and the empty-microbatch outputs of bad metadata included.
// bench/README.md explains how it works and how it is timed.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_BENCH_HANDWRITTEN_H
#define THDC_BENCH_HANDWRITTEN_H

#include <cuda_runtime_api.h>

#include <cstdint>

namespace thdc {
namespace bench {

/// Device buffers of one microbatch, in megatron_graph_step's argument and
/// result order (C tokens per CP rank, cp the CP size, N the sequence
/// capacity). Inputs are only read; outputs are fully written.
struct StepBuffers {
  /// Input tokens, labels and position ids: C*cp rows each, of which the
  /// first cu_seqlens_padded[num_seqs] are meaningful.
  const int64_t *tokens = nullptr;
  const int64_t *labels = nullptr;
  const int64_t *positionIds = nullptr;
  /// Input loss mask, C*cp rows.
  const float *lossMask = nullptr;
  /// Input cu_seqlens and cu_seqlens_padded: N+1 entries each, of which the
  /// first num_seqs+1 are meaningful.
  const int32_t *cuSeqlens = nullptr;
  const int32_t *cuSeqlensPadded = nullptr;
  /// Input number of real sequences, 1 entry.
  const int32_t *numSeqs = nullptr;
  /// Input CP rank whose slice is produced, 1 entry.
  const int32_t *cpRank = nullptr;

  /// Output tokens, labels and position ids of this rank: C rows each.
  int64_t *outTokens = nullptr;
  int64_t *outLabels = nullptr;
  int64_t *outPositionIds = nullptr;
  /// Output loss mask, C rows.
  float *outLossMask = nullptr;
  /// Output padding mask, C bytes holding 0 or 1 (1 = padding; the layout
  /// of a torch.bool tensor).
  uint8_t *outPaddingMask = nullptr;
  /// Output cu_seqlens_padded and cu_seqlens with the dummy sequence, N+1
  /// entries each.
  int32_t *outCuSeqlensPadded = nullptr;
  int32_t *outCuSeqlens = nullptr;
  /// Output max_seqlen (= C*cp) and status (0, or StatusBit values ORed), 1
  /// entry each.
  int32_t *outMaxSeqlen = nullptr;
  int32_t *outStatus = nullptr;
};

/// Enqueues the hand-written kernel of one microbatch on `stream` (one kernel
/// launch, no allocation, no synchronisation; capturable in a CUDA graph).
/// Launch errors are reported the CUDA way (cudaGetLastError, or the next
/// synchronising call). Preconditions, checked on the host (abort with a
/// message, as reference::megatronGraphStep does): C >= 1, cp >= 1, N >= 1,
/// C even when cp > 1, C*cp and N+1 fit int32.
void launchHandwrittenStep(const StepBuffers &buffers, int64_t C, int64_t cp,
                           int64_t N, cudaStream_t stream);

/// One block of one thread that does nothing: the floor of a launch.
void launchEmptyKernel(cudaStream_t stream);

} // namespace bench
} // namespace thdc

#endif // THDC_BENCH_HANDWRITTEN_H
