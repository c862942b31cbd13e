//===- copy_kernel.h - the copy bar of the benchmark ------------*- C++ -*-===//
//
// A kernel that moves the bytes a step moves and nothing else: each segment
// is copied (or, without a source, filled) with 16-byte loads and stores,
// coalesced across the warp, four in flight per thread. No metadata, no
// index arithmetic beyond the segment lookup: what any kernel reading and
// writing the same bytes could at best reach, measured beside cudaMemcpy.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_BENCH_COPY_KERNEL_H
#define THDC_BENCH_COPY_KERNEL_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace thdc {
namespace bench {

/// One stretch of bytes: copied from `source`, or filled with `fill` when
/// `source` is null. Both pointers and `bytes` must be multiples of 16.
struct CopySegment {
  const void *source = nullptr;
  void *destination = nullptr;
  size_t bytes = 0;
  uint8_t fill = 0;
};

/// Enqueues one launch that moves every segment (at most kMaxCopySegments)
/// on `stream`. Aborts with a message on a misaligned or oversized request.
void launchCopyKernel(const std::vector<CopySegment> &segments,
                      cudaStream_t stream);

constexpr int kMaxCopySegments = 8;

} // namespace bench
} // namespace thdc

#endif // THDC_BENCH_COPY_KERNEL_H
