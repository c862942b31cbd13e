//===- copy_kernel.cu - the copy bar of the benchmark ---------------------===//

#include "bench/copy_kernel.h"

#include <cstdio>
#include <cstdlib>

namespace thdc {
namespace bench {
namespace {

constexpr int kThreads = 256;
/// 16-byte words a thread moves per chunk, all loads before any store.
constexpr int kUnroll = 4;
/// Bytes a block moves per chunk.
constexpr size_t kChunkBytes = size_t(kThreads) * kUnroll * 16;

struct Segments {
  const int4 *source[kMaxCopySegments];
  int4 *destination[kMaxCopySegments];
  /// 16-byte words of each segment, and the first chunk of each.
  unsigned long long words[kMaxCopySegments];
  unsigned long long firstChunk[kMaxCopySegments + 1];
  int4 fill[kMaxCopySegments];
  int count;
};

/// Block b moves chunk b: the segment is found among at most eight, then
/// each thread loads its four words (a block's words are consecutive, a
/// warp's 512 bytes at a time) and stores them.
__global__ void __launch_bounds__(kThreads)
    copyKernel(const __grid_constant__ Segments s) {
  unsigned long long chunk = blockIdx.x;
  int seg = 0;
  while (seg + 1 < s.count && chunk >= s.firstChunk[seg + 1])
    ++seg;
  unsigned long long base =
      (chunk - s.firstChunk[seg]) * (kThreads * kUnroll) + threadIdx.x;
  const int4 *__restrict__ from = s.source[seg];
  int4 *__restrict__ to = s.destination[seg];
  unsigned long long words = s.words[seg];
  int4 v[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    unsigned long long i = base + k * kThreads;
    v[k] = i < words ? (from ? __ldg(from + i) : s.fill[seg]) : int4();
  }
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    unsigned long long i = base + k * kThreads;
    if (i < words)
      to[i] = v[k];
  }
}

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "launchCopyKernel: %s\n", what);
  std::abort();
}
} // namespace

void launchCopyKernel(const std::vector<CopySegment> &segments,
                      cudaStream_t stream) {
  if (segments.empty() || segments.size() > size_t(kMaxCopySegments))
    fail("between 1 and 8 segments");
  Segments s{};
  s.count = int(segments.size());
  unsigned long long chunks = 0;
  for (int i = 0; i < s.count; ++i) {
    const CopySegment &c = segments[size_t(i)];
    if (uintptr_t(c.source) % 16 || uintptr_t(c.destination) % 16 ||
        c.bytes % 16)
      fail("pointers and sizes must be multiples of 16 bytes");
    s.source[i] = static_cast<const int4 *>(c.source);
    s.destination[i] = static_cast<int4 *>(c.destination);
    s.words[i] = c.bytes / 16;
    unsigned char b = c.fill;
    int word = int(b | b << 8 | b << 16 | unsigned(b) << 24);
    s.fill[i] = make_int4(word, word, word, word);
    s.firstChunk[i] = chunks;
    chunks += (c.bytes + kChunkBytes - 1) / kChunkBytes;
  }
  s.firstChunk[s.count] = chunks;
  if (chunks > 0x7fffffffULL)
    fail("too many bytes for one launch");
  copyKernel<<<unsigned(chunks), kThreads, 0, stream>>>(s);
}

} // namespace bench
} // namespace thdc
