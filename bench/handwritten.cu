//===- handwritten.cu - the hand-fused CUDA baseline ----------------------===//
//
// One launch computes every output of megatron_graph_step for one CP rank,
// as reference::megatronGraphStep defines them (see bench/README.md for the
// design and how it is timed).
//
// Work split: the C local rows are cut into warp spans of `rowsPerWarp`
// consecutive rows (a multiple of 128); a block owns kWarps consecutive spans
// (a tile) and blocks stride over tiles. A warp walks its span 128 rows at a
// time, lane l taking rows base + 32u + l (u = 0..3): loads and stores are
// coalesced and every lane has four rows' loads in flight.
//
// No per-row search: a warp finds the sequence of its span's first row with
// one binary search over the block's shared-memory copy of cu_seqlens_padded,
// then each lane carries a cursor (the sequence, its chunk boundaries and the
// end of its valid rows) and only moves it forward when a row crosses into
// the next sequence. A row costs a compare and a select; the division by cp
// happens once per sequence a lane enters.
//
// Validation: every block copies the meaningful prefix of both offset arrays
// into shared memory once, checks O((n+1)/256) entries per thread, and ORs the
// status bits with a warp reduction and one shared atomic per warp. Every
// block computes the same status, so no grid-wide synchronisation is needed;
// block 0 writes the metadata outputs.
//
//===----------------------------------------------------------------------===//

#include "bench/handwritten.h"

#include "reference/Reference.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace thdc {
namespace bench {
namespace {

namespace ref = thdc::reference;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
/// 32-row chunks a warp has in flight per step.
constexpr int kChunks = 4;
constexpr int kStepRows = 32 * kChunks;
constexpr int kMaxRowsPerWarp = 2048;
/// Tiles are sized for about this many blocks per SM (more when C is large).
constexpr int kTargetBlocksPerSm = 4;
/// Both offset arrays are staged in shared memory when they fit this (the
/// default dynamic shared-memory limit); otherwise they are read from global
/// memory through the same code.
constexpr int64_t kMaxStagedBytes = 48 * 1024;

/// Launch geometry, fixed per (C, cp, N, device).
struct Geometry {
  int32_t C, cp, N;
  int32_t rowsPerWarp;
  int32_t numTiles;
  bool staged;
};

/// Where the local rows of one sequence come from. With cs = cup / cp, the
/// sequence owns local rows [cs[s], cs[s+1]); its first `half` rows are chunk
/// r of the global sequence, the next `half` chunk 2cp-1-r (S7 of docs/semantics.md).
struct SequenceCursor {
  /// The sequence s and its global rows [cupBegin, cupEnd).
  int32_t s, cupBegin, cupEnd;
  /// Local rows below halfEnd read global row t + lowShift, the others
  /// t + highShift.
  int32_t halfEnd, lowShift, highShift;
  /// Global rows >= validEnd are padding (S5 of docs/semantics.md).
  int32_t validEnd;
};

__device__ __forceinline__ void enterSequence(SequenceCursor &cursor,
                                              const int32_t *cu, int32_t cp,
                                              int32_t rank) {
  const int32_t start = cursor.cupBegin / cp;
  const int32_t half = (cursor.cupEnd - cursor.cupBegin) / cp / 2;
  cursor.halfEnd = start + half;
  cursor.lowShift = cursor.cupBegin - start + half * rank;
  cursor.highShift = cursor.cupBegin - start + half * (2 * cp - 2 - rank);
  cursor.validEnd = cursor.cupBegin + (cu[cursor.s + 1] - cu[cursor.s]);
}

/// Moves the cursor forward to the sequence holding the local row whose
/// global key is `key` = row * cp (skipping zero-length sequences).
__device__ __forceinline__ void advanceTo(SequenceCursor &cursor, int32_t key,
                                          const int32_t *cu, const int32_t *cup,
                                          int32_t cp, int32_t rank) {
  if (cursor.cupEnd > key)
    return;
  do {
    ++cursor.s;
    cursor.cupBegin = cursor.cupEnd;
    cursor.cupEnd = cup[cursor.s + 1];
  } while (cursor.cupEnd <= key);
  enterSequence(cursor, cu, cp, rank);
}

/// The largest s in [0, n-1] with cup[s] <= key, given key < cup[n] (TE's
/// search, S7 of docs/semantics.md).
__device__ __forceinline__ int32_t sequenceOfKey(const int32_t *cup, int32_t n,
                                                 int32_t key) {
  int32_t lo = 1, hi = n;
  while (lo < hi) {
    const int32_t mid = (lo + hi) >> 1;
    if (cup[mid] <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

/// Writes `count` rows from `begin` as padding (data 0, mask 1).
__device__ __forceinline__ void
writePaddingRows(const StepBuffers &b, int32_t begin, int32_t count, int lane) {
  for (int32_t rel = lane; rel < count; rel += 32) {
    const int32_t t = begin + rel;
    b.outTokens[t] = 0;
    b.outLabels[t] = 0;
    b.outPositionIds[t] = 0;
    b.outLossMask[t] = 0.0f;
    b.outPaddingMask[t] = 1;
  }
}

__global__ void __launch_bounds__(kThreads)
    handwrittenStepKernel(const StepBuffers b, const Geometry geo) {
  extern __shared__ int32_t stagedOffsets[];
  __shared__ int32_t blockStatus;
  const int32_t C = geo.C, cp = geo.cp, N = geo.N;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  const int32_t numSeqs = *b.numSeqs, rank = *b.cpRank;
  // As in graphStepStatus, the checks use numSeqs clamped into [0, N].
  const int32_t n = min(max(numSeqs, 0), N);
  const int32_t *cu = b.cuSeqlens, *cup = b.cuSeqlensPadded;
  if (geo.staged) {
    int32_t *stagedCu = stagedOffsets, *stagedCup = stagedOffsets + N + 1;
    for (int32_t i = tid; i <= n; i += kThreads) {
      stagedCu[i] = cu[i];
      stagedCup[i] = cup[i];
    }
    cu = stagedCu;
    cup = stagedCup;
  }
  if (tid == 0)
    blockStatus = 0;
  __syncthreads();

  // Validation (reference::graphStepStatus), a few entries per thread.
  const int64_t capacity = int64_t(C) * cp;
  int32_t bits = 0;
  if (tid == 0) {
    if (numSeqs < 0 || numSeqs > N - 1)
      bits |= ref::StatusNumSeqsOutOfRange;
    if (rank < 0 || rank >= cp)
      bits |= ref::StatusCpRankOutOfRange;
  }
  for (int32_t i = tid; i <= n; i += kThreads) {
    const int32_t c = cu[i], p = cup[i];
    if (i == 0) {
      if (c != 0 || p != 0)
        bits |= ref::StatusNotMonotonic;
    } else {
      const int32_t previousC = cu[i - 1], previousP = cup[i - 1];
      if (c < previousC || p < previousP)
        bits |= ref::StatusNotMonotonic;
      if (int64_t(c) - previousC > int64_t(p) - previousP)
        bits |= ref::StatusValidExceedsPadded;
    }
    if (cp > 1 && p % (2 * cp) != 0)
      bits |= ref::StatusNotDivisibleBy2Cp;
    if (i == n && p > capacity)
      bits |= ref::StatusTotalExceedsCapacity;
  }
  bits = __reduce_or_sync(0xffffffffu, bits);
  if (lane == 0 && bits)
    atomicOr(&blockStatus, bits);
  __syncthreads();
  const int32_t status = blockStatus;

  // Bad metadata: the outputs of an empty microbatch (no sequence).
  const bool valid = status == 0;
  const int32_t usedSeqs = valid ? n : 0;
  const int32_t total = valid ? cup[n] : 0;
  const int32_t compactEnd = valid ? cu[n] : 0;
  const int32_t localLength = total / cp;
  const int32_t capacity32 = static_cast<int32_t>(capacity);

  // S10 metadata: the dummy [T, C*cp) when T < C*cp, then repeats to N+1.
  if (blockIdx.x == 0) {
    for (int32_t i = tid; i <= N; i += kThreads) {
      int32_t padded, compact;
      if (i <= usedSeqs) {
        padded = valid ? cup[i] : 0;
        compact = valid ? cu[i] : 0;
      } else if (total < capacity32) {
        padded = capacity32;
        compact = compactEnd + (capacity32 - total);
      } else {
        padded = total;
        compact = compactEnd;
      }
      b.outCuSeqlensPadded[i] = padded;
      b.outCuSeqlens[i] = compact;
    }
    if (tid == 0) {
      *b.outMaxSeqlen = capacity32;
      *b.outStatus = status;
    }
  }

  // Rows: S5 mask, S6 sanitise, S7 gather, S10 tail, fused.
  const int64_t rowsPerBlock = int64_t(kWarps) * geo.rowsPerWarp;
  for (int32_t tile = blockIdx.x; tile < geo.numTiles; tile += gridDim.x) {
    const int64_t span = tile * rowsPerBlock + int64_t(warp) * geo.rowsPerWarp;
    if (span >= C)
      continue;
    const int32_t spanBegin = static_cast<int32_t>(span);
    const int32_t spanRows = min(geo.rowsPerWarp, C - spanBegin);
    if (spanBegin >= localLength) {
      writePaddingRows(b, spanBegin, spanRows, lane);
      continue;
    }
    SequenceCursor cursor;
    cursor.s = sequenceOfKey(cup, usedSeqs, spanBegin * cp);
    cursor.cupBegin = cup[cursor.s];
    cursor.cupEnd = cup[cursor.s + 1];
    enterSequence(cursor, cu, cp, rank);

    for (int32_t offset = 0; offset < spanRows; offset += kStepRows) {
      int32_t source[kChunks]; // global row, or -1 for a padding row
#pragma unroll
      for (int u = 0; u < kChunks; ++u) {
        const int32_t rel = offset + u * 32 + lane;
        source[u] = -1;
        if (rel >= spanRows || spanBegin + rel >= localLength)
          continue;
        const int32_t t = spanBegin + rel;
        advanceTo(cursor, t * cp, cu, cup, cp, rank);
        const int32_t g =
            t + (t < cursor.halfEnd ? cursor.lowShift : cursor.highShift);
        source[u] = g < cursor.validEnd ? g : -1;
      }
      int64_t token[kChunks], label[kChunks], position[kChunks];
      float loss[kChunks];
#pragma unroll
      for (int u = 0; u < kChunks; ++u) {
        const bool data = source[u] >= 0;
        token[u] = data ? __ldg(b.tokens + source[u]) : 0;
        label[u] = data ? __ldg(b.labels + source[u]) : 0;
        position[u] = data ? __ldg(b.positionIds + source[u]) : 0;
        loss[u] = data ? __ldg(b.lossMask + source[u]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kChunks; ++u) {
        const int32_t rel = offset + u * 32 + lane;
        if (rel < spanRows) {
          const int32_t t = spanBegin + rel;
          b.outTokens[t] = token[u];
          b.outLabels[t] = label[u];
          b.outPositionIds[t] = position[u];
          b.outLossMask[t] = loss[u];
          b.outPaddingMask[t] = source[u] < 0;
        }
      }
    }
  }
}

[[noreturn]] void preconditionFailed(const char *message, int64_t C, int64_t cp,
                                     int64_t N) {
  std::fprintf(stderr,
               "thdc::bench::launchHandwrittenStep: %s (C = %lld, cp = %lld, "
               "N = %lld)\n",
               message, static_cast<long long>(C), static_cast<long long>(cp),
               static_cast<long long>(N));
  std::abort();
}

/// SM count and resident blocks per SM of the current device, queried once
/// per device and shared-memory size.
struct DeviceLimits {
  int device = -1;
  size_t sharedBytes = 0;
  int sms = 0;
  int blocksPerSm = 0;
};

DeviceLimits currentDeviceLimits(size_t sharedBytes) {
  static thread_local DeviceLimits cached;
  int device = 0;
  cudaGetDevice(&device);
  if (cached.device == device && cached.sharedBytes == sharedBytes)
    return cached;
  DeviceLimits limits;
  limits.device = device;
  limits.sharedBytes = sharedBytes;
  cudaDeviceGetAttribute(&limits.sms, cudaDevAttrMultiProcessorCount, device);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &limits.blocksPerSm, handwrittenStepKernel, kThreads, sharedBytes);
  limits.sms = std::max(limits.sms, 1);
  limits.blocksPerSm = std::max(limits.blocksPerSm, 1);
  cached = limits;
  return limits;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

void launchHandwrittenStep(const StepBuffers &buffers, int64_t C, int64_t cp,
                           int64_t N, cudaStream_t stream) {
  if (C < 1 || cp < 1 || N < 1)
    preconditionFailed("needs C >= 1, cp >= 1 and N >= 1", C, cp, N);
  if (cp > 1 && C % 2)
    preconditionFailed("C must be even when cp > 1", C, cp, N);
  if (C * cp > INT32_MAX || N > INT32_MAX - kThreads - 1)
    preconditionFailed("C*cp and N+1 must fit int32", C, cp, N);

  const int64_t stagedBytes = 2 * (N + 1) * int64_t(sizeof(int32_t));
  const bool staged = stagedBytes <= kMaxStagedBytes;
  const size_t sharedBytes = staged ? static_cast<size_t>(stagedBytes) : 0;
  const DeviceLimits limits = currentDeviceLimits(sharedBytes);

  Geometry geo;
  geo.C = static_cast<int32_t>(C);
  geo.cp = static_cast<int32_t>(cp);
  geo.N = static_cast<int32_t>(N);
  const int64_t wantedWarps = int64_t(limits.sms) * kTargetBlocksPerSm * kWarps;
  geo.rowsPerWarp = static_cast<int32_t>(std::clamp<int64_t>(
      ceilDiv(ceilDiv(C, wantedWarps), kStepRows) * kStepRows, kStepRows,
      kMaxRowsPerWarp));
  const int64_t tiles = ceilDiv(C, int64_t(kWarps) * geo.rowsPerWarp);
  geo.numTiles = static_cast<int32_t>(tiles);
  geo.staged = staged;
  const int64_t grid =
      std::min<int64_t>(tiles, int64_t(limits.sms) * limits.blocksPerSm);
  handwrittenStepKernel<<<static_cast<unsigned>(grid), kThreads, sharedBytes,
                          stream>>>(buffers, geo);
}

namespace {
__global__ void emptyKernel() {}
} // namespace

void launchEmptyKernel(cudaStream_t stream) { emptyKernel<<<1, 1, 0, stream>>>(); }

} // namespace bench
} // namespace thdc
