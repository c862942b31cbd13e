// Exploration: memory access patterns of the 1M-row step without its metadata.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <functional>

#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); exit(1);} } while (0)

struct Bufs {
  const int64_t *tok, *lab, *pos; const float *lm;
  int64_t *otok, *olab, *opos; float *olm; uint8_t *omask;
  const int32_t *cu, *cup;
};

// Wide copy: 16-byte words, 4 per thread in flight, grid-stride. Source aligned.
__global__ void __launch_bounds__(256) copyWide(Bufs b, long C, long off) {
  const int4 *src[4] = {(const int4 *)(b.tok + off), (const int4 *)(b.lab + off),
                        (const int4 *)(b.pos + off), (const int4 *)(b.lm + off)};
  int4 *dst[4] = {(int4 *)b.otok, (int4 *)b.olab, (int4 *)b.opos, (int4 *)b.olm};
  long words[4] = {C / 2, C / 2, C / 2, C / 4};
  long total = words[0] * 3 + words[3] + C / 16;
  long stride = (long)gridDim.x * blockDim.x;
  for (long base = (long)blockIdx.x * blockDim.x + threadIdx.x; base < total; base += 4 * stride) {
    int4 v[4]; long at[4]; int which[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      long i = base + k * stride; which[k] = -1;
      if (i >= total) continue;
      int w = 0; while (w < 4 && i >= words[w]) { i -= words[w]; ++w; }
      which[k] = w; at[k] = i;
      if (w < 4) v[k] = __ldg(src[w] + i);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (which[k] < 0) continue;
      if (which[k] < 4) dst[which[k]][at[k]] = v[k];
      else ((int4 *)b.omask)[at[k]] = make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101);
    }
  }
}

// Row per thread like thdc: a warp's span, lanes 32 apart, R rows per thread,
// ILP rows' loads before their stores. src row = row + off.
template <int R, int ILP, bool PROLOGUE>
__global__ void rows(Bufs b, long C, long off, int N) {
  extern __shared__ int32_t sh[];
  if (PROLOGUE) {
    for (int i = threadIdx.x; i <= N; i += blockDim.x) { sh[i] = b.cu[i]; sh[N + 1 + i] = b.cup[i]; }
    __syncthreads();
    int bad = 0;
    for (int i = threadIdx.x + 1; i <= N; i += blockDim.x) bad |= sh[N + 1 + i] < sh[N + i];
    bad = __syncthreads_or(bad);
    int m = 0;
    for (int i = threadIdx.x + 1; i <= N; i += blockDim.x) m = max(m, sh[N + 1 + i] - sh[N + i]);
    m = __syncthreads_or(m);
    if (bad && m == 12345) return;
  }
  long tile = (long)blockIdx.x * blockDim.x * R;
  long first = tile + (threadIdx.x / 32) * 32 * R + threadIdx.x % 32;
  for (int r0 = 0; r0 < R; r0 += ILP) {
    int64_t t[ILP], l[ILP], p[ILP]; float m[ILP]; long j[ILP];
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
      j[k] = first + (r0 + k) * 32;
      if (j[k] < C) { long s = j[k] + off; t[k] = __ldg(b.tok + s); l[k] = __ldg(b.lab + s); p[k] = __ldg(b.pos + s); m[k] = __ldg(b.lm + s); }
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
      if (j[k] < C) { b.otok[j[k]] = t[k]; b.olab[j[k]] = l[k]; b.opos[j[k]] = p[k]; b.olm[j[k]] = m[k]; b.omask[j[k]] = 1; }
    }
  }
}

// Two consecutive rows per thread: 16-byte stores of i64 pairs, source pairs
// read as two 8-byte loads (src may be misaligned), R pairs per thread.
template <int R>
__global__ void pairs(Bufs b, long C, long off) {
  long tile = (long)blockIdx.x * blockDim.x * R;
  long first = tile + (threadIdx.x / 32) * 32 * R + threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    long q = first + r * 32; long j = 2 * q;
    if (j + 1 < C) {
      long s = j + off;
      longlong2 t = make_longlong2(__ldg(b.tok + s), __ldg(b.tok + s + 1));
      longlong2 l = make_longlong2(__ldg(b.lab + s), __ldg(b.lab + s + 1));
      longlong2 p = make_longlong2(__ldg(b.pos + s), __ldg(b.pos + s + 1));
      float2 m = make_float2(__ldg(b.lm + s), __ldg(b.lm + s + 1));
      ((longlong2 *)b.otok)[q] = t; ((longlong2 *)b.olab)[q] = l; ((longlong2 *)b.opos)[q] = p;
      ((float2 *)b.olm)[q] = m; ((uint16_t *)b.omask)[q] = 0x0101;
    }
  }
}

static double timeIt(const std::function<void()> &f, cudaStream_t s, int it = 200) {
  for (int i = 0; i < 20; ++i) f();
  CK(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev(2 * it);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < it; ++i) { CK(cudaEventRecord(ev[2 * i], s)); f(); CK(cudaEventRecord(ev[2 * i + 1], s)); }
  CK(cudaStreamSynchronize(s));
  std::vector<double> d;
  for (int i = 0; i < it; ++i) { float ms; CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1])); d.push_back(ms * 1e3); }
  for (auto &e : ev) CK(cudaEventDestroy(e));
  std::sort(d.begin(), d.end());
  return d[d.size() / 2];
}

int main() {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (long C : {1L << 20, 1L << 22}) {
    long rowsIn = 2 * C; int N = 1024;
    Bufs b; void *p;
    CK(cudaMalloc(&p, rowsIn * 8)); b.tok = (int64_t *)p; CK(cudaMalloc(&p, rowsIn * 8)); b.lab = (int64_t *)p;
    CK(cudaMalloc(&p, rowsIn * 8)); b.pos = (int64_t *)p; CK(cudaMalloc(&p, rowsIn * 4)); b.lm = (float *)p;
    CK(cudaMalloc(&p, C * 8)); b.otok = (int64_t *)p; CK(cudaMalloc(&p, C * 8)); b.olab = (int64_t *)p;
    CK(cudaMalloc(&p, C * 8)); b.opos = (int64_t *)p; CK(cudaMalloc(&p, C * 4)); b.olm = (float *)p;
    CK(cudaMalloc(&p, C)); b.omask = (uint8_t *)p;
    std::vector<int32_t> cu(N + 1); for (int i = 0; i <= N; ++i) cu[i] = i * (int)(rowsIn / N);
    CK(cudaMalloc(&p, 4 * (N + 1))); b.cu = (int32_t *)p; CK(cudaMemcpy(p, cu.data(), 4 * (N + 1), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p, 4 * (N + 1))); b.cup = (int32_t *)p; CK(cudaMemcpy(p, cu.data(), 4 * (N + 1), cudaMemcpyHostToDevice));
    double bytes = C * 28.0 + C * 29.0;
    auto report = [&](const char *name, double us) {
      printf("{\"C\": %ld, \"variant\": \"%s\", \"us\": %.3f, \"gbs\": %.0f}\n", C, name, us, bytes / us / 1e3);
      fflush(stdout);
    };
    long off = 12345; // odd: a zigzag chunk's rows start anywhere
    for (int g : {1, 2, 4, 8}) {
      int grid = sms * g * 8; // 8 blocks of 256 resident per SM
      char name[64]; snprintf(name, sizeof name, "copy_wide_aligned_grid%dx", g);
      report(name, timeIt([&] { copyWide<<<grid, 256, 0, s>>>(b, C, 0); }, s));
    }
    {
      void *a, *c; size_t half = size_t(bytes / 2);
      CK(cudaMalloc(&a, half)); CK(cudaMalloc(&c, half));
      report("cudaMemcpy_same_bytes", timeIt([&] { CK(cudaMemcpyAsync(c, a, half, cudaMemcpyDeviceToDevice, s)); }, s));
      CK(cudaFree(a)); CK(cudaFree(c));
    }
#define ROWS(R, ILP, PRO, BS)                                                                 \
  {                                                                                           \
    long tile = (long)BS * R; int grid = int((C + tile - 1) / tile);                          \
    report("rows_b" #BS "_r" #R "_ilp" #ILP "_prologue" #PRO,                                 \
           timeIt([&] { rows<R, ILP, PRO><<<grid, BS, PRO ? 8 * (N + 1) : 0, s>>>(b, C, off, N); }, s)); \
  }
    ROWS(1, 1, false, 1024) ROWS(2, 1, false, 1024) ROWS(2, 2, false, 1024) ROWS(4, 4, false, 256)
    ROWS(4, 2, false, 512) ROWS(8, 4, false, 256) ROWS(2, 1, true, 1024) ROWS(2, 2, true, 1024)
    ROWS(4, 4, true, 256) ROWS(8, 8, true, 256) ROWS(16, 4, true, 256)
    for (int R : {1, 2, 4}) {
      int bs = 256; long tile = 2L * bs * R; int grid = int((C + tile - 1) / tile);
      char name[64]; snprintf(name, sizeof name, "pairs_b256_r%d", R);
      if (R == 1) report(name, timeIt([&] { pairs<1><<<grid, bs, 0, s>>>(b, C, off); }, s));
      if (R == 2) report(name, timeIt([&] { pairs<2><<<grid, bs, 0, s>>>(b, C, off); }, s));
      if (R == 4) report(name, timeIt([&] { pairs<4><<<grid, bs, 0, s>>>(b, C, off); }, s));
    }
    CK(cudaDeviceSynchronize());
  }
  {
    size_t half = size_t(1) << 30; void *a, *c;
    CK(cudaMalloc(&a, half)); CK(cudaMalloc(&c, half));
    double us = timeIt([&] { CK(cudaMemcpyAsync(c, a, half, cudaMemcpyDeviceToDevice, s)); }, s, 20);
    printf("{\"variant\": \"cudaMemcpy_1GiB\", \"us\": %.1f, \"gbs\": %.0f}\n", us, 2.0 * half / us / 1e3);
  }
  return 0;
}
