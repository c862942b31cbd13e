//===- Sha256.cpp - SHA-256 of bundle files -------------------------------===//

#include "runtime/Sha256.h"

#include <array>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define THDC_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace {
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotateRight(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress(std::array<uint32_t, 8> &state, const unsigned char *block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 |
           uint32_t(block[4 * i + 2]) << 8 | uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotateRight(w[i - 15], 7) ^ rotateRight(w[i - 15], 18) ^
                  (w[i - 15] >> 3);
    uint32_t s1 = rotateRight(w[i - 2], 17) ^ rotateRight(w[i - 2], 19) ^
                  (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3],
           e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t s1 = rotateRight(e, 6) ^ rotateRight(e, 11) ^ rotateRight(e, 25);
    uint32_t choice = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + choice + kRoundConstants[i] + w[i];
    uint32_t s0 = rotateRight(a, 2) ^ rotateRight(a, 13) ^ rotateRight(a, 22);
    uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = s0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}
using CompressFn = void (*)(std::array<uint32_t, 8> &, const unsigned char *,
                            size_t);

void compressPortable(std::array<uint32_t, 8> &state,
                      const unsigned char *blocks, size_t count) {
  for (size_t i = 0; i < count; ++i)
    compress(state, blocks + 64 * i);
}

#ifdef THDC_SHA256_X86
/// `count` blocks through the SHA extensions. The instructions keep the
/// state as the lanes ABEF and CDGH and do two rounds per sha256rnds2;
/// sha256msg1/sha256msg2 extend the message schedule four words at a time.
__attribute__((target("sha,sse4.1,ssse3"))) void
compressSha(std::array<uint32_t, 8> &state, const unsigned char *blocks,
            size_t count) {
  const __m128i byteSwap =
      _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&state[0]));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&state[4]));
  __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (size_t block = 0; block < count; ++block) {
    const unsigned char *data = blocks + 64 * block;
    __m128i abefBefore = abef, cdghBefore = cdgh;
    __m128i w[4]; // the schedule's last 16 words, four to a lane group
    for (int group = 0; group < 16; ++group) {
      __m128i words;
      if (group < 4) {
        words = _mm_shuffle_epi8(
            _mm_loadu_si128(
                reinterpret_cast<const __m128i *>(data + 16 * group)),
            byteSwap);
      } else {
        // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], for four t.
        __m128i partial = _mm_add_epi32(
            _mm_sha256msg1_epu32(w[group & 3], w[(group + 1) & 3]),
            _mm_alignr_epi8(w[(group + 3) & 3], w[(group + 2) & 3], 4));
        words = _mm_sha256msg2_epu32(partial, w[(group + 3) & 3]);
      }
      w[group & 3] = words;
      __m128i rounds = _mm_add_epi32(
          words, _mm_loadu_si128(reinterpret_cast<const __m128i *>(
                     &kRoundConstants[4 * group])));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, rounds);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(rounds, 0x0E));
    }
    abef = _mm_add_epi32(abef, abefBefore);
    cdgh = _mm_add_epi32(cdgh, cdghBefore);
  }
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  dcba = _mm_blend_epi16(feba, dchg, 0xF0);
  hgfe = _mm_alignr_epi8(dchg, feba, 8);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(&state[0]), dcba);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(&state[4]), hgfe);
}

bool processorHasSha() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return false;
  bool ssse3 = ecx & (1u << 9), sse41 = ecx & (1u << 19);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
    return false;
  return ssse3 && sse41 && (ebx & (1u << 29));
}
#endif

CompressFn chosenCompress() {
#ifdef THDC_SHA256_X86
  static const CompressFn chosen =
      processorHasSha() ? compressSha : compressPortable;
  return chosen;
#else
  return compressPortable;
#endif
}

std::string sha256With(CompressFn compressBlocks, std::string_view bytes) {
  std::array<uint32_t, 8> state = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                   0xa54ff53a, 0x510e527f, 0x9b05688c,
                                   0x1f83d9ab, 0x5be0cd19};
  const auto *data = reinterpret_cast<const unsigned char *>(bytes.data());
  size_t full = bytes.size() / 64 * 64;
  compressBlocks(state, data, full / 64);
  // The tail, a 1 bit, zeros, and the length in bits: one or two blocks.
  unsigned char tail[128] = {0};
  size_t rest = bytes.size() - full;
  for (size_t i = 0; i < rest; ++i)
    tail[i] = data[full + i];
  tail[rest] = 0x80;
  size_t tailBlocks = rest + 9 <= 64 ? 1 : 2;
  uint64_t bits = uint64_t(bytes.size()) * 8;
  for (int i = 0; i < 8; ++i)
    tail[tailBlocks * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  compressBlocks(state, tail, tailBlocks);
  static const char *digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (uint32_t word : state)
    for (int shift = 28; shift >= 0; shift -= 4)
      hex.push_back(digits[(word >> shift) & 0xf]);
  return hex;
}
} // namespace

std::string thdc::runtime::sha256Hex(std::string_view bytes) {
  return sha256With(chosenCompress(), bytes);
}

std::string thdc::runtime::detail::sha256HexPortable(std::string_view bytes) {
  return sha256With(compressPortable, bytes);
}

bool thdc::runtime::detail::sha256UsesProcessorInstructions() {
  return chosenCompress() != compressPortable;
}
