//===- Gather.h - several small copies in one launch -----------*- C++ -*-===//
//
// A built-in kernel of the runtime that copies up to kGatherSegments byte
// ranges, and stores small constants, in one launch: what a step needs to
// put one microbatch into static input buffers (the buffers a captured CUDA
// graph reads) at the cost of one launch instead of one copy per tensor.
// The segment descriptions travel by value in the kernel's parameters, so
// nothing is staged in host memory that the caller could overwrite before
// the copy runs. The kernel is hand-written PTX, loaded once per device.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_GATHER_H
#define THDC_RUNTIME_GATHER_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>

namespace thdc::runtime {

/// One copy or store of a gather. A copy (`source` != 0) copies `bytes`
/// bytes from `source` to `destination`; the ranges must not overlap. A
/// store (`source` == 0) writes the low `bytes` (at most 8) bytes of
/// `value`, little-endian, at `destination` (a scalar such as a count).
/// Addresses need no alignment: 16-byte accesses are used where both ends
/// allow them, else 8-, 4- or 1-byte ones.
struct GatherSegment {
  uint64_t source = 0;
  uint64_t destination = 0;
  uint64_t bytes = 0;
  uint64_t value = 0;
};

/// Segments one launch takes (the kernel's parameters: 4 + 32 * 16 bytes,
/// well inside CUDA's 4 KB); gathers of more segments take more launches.
inline constexpr size_t kGatherSegments = 16;

/// Threads per block of the gather kernel.
inline constexpr unsigned kGatherBlock = 256;

/// The kernel's PTX text (NUL-terminated); its entry is kGatherEntry.
const char *gatherPtx();
inline constexpr const char *kGatherEntry = "thdc_gather";

/// An error naming the first segment that cannot be run: a store of more
/// than 8 bytes, or a null destination for a non-empty copy or store.
Status checkGatherSegments(const GatherSegment *segments, size_t count);

/// Loads the gather kernel on `device` (-1: the current device) now, where
/// the first launch would otherwise load it.
Status prepareGather(int device);

/// Runs `count` segments on `stream` of `device` (-1: the current device),
/// in ceil(count / kGatherSegments) launches (none for count == 0), without
/// waiting. Stream order is what keeps the sources valid: memory that the
/// caller frees after this call is reused by a stream-ordered allocator (as
/// PyTorch's caching allocator) only for work queued behind the copy.
/// Launches outside a graph capture; inside one it is captured as kernels.
Status launchGather(const GatherSegment *segments, size_t count, void *stream,
                    int device);

/// The same segments as plain memcpy/stores in host memory (the CPU path).
Status gatherOnHost(const GatherSegment *segments, size_t count);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_GATHER_H
