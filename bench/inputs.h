//===- inputs.h - THD microbatches for the benchmark -----------*- C++ -*-===//
//
// The benchmark's microbatch generator, C++ side (header-only, C++17, no
// dependencies). bench/inputs.py is its Python twin. Both implement the
// algorithm specified once, in bench/README.md, section "The microbatch
// generator", and produce bit-identical data for identical arguments:
// `handwritten_check --digests` and `python3 bench/inputs.py --digests` print
// the same lines.
//
// A microbatch is what megatron_graph_step (examples/megatron_graph_step.mlir)
// takes: C*cp token rows and N+1 cu_seqlens entries, of which only the first
// cu_seqlens_padded[num_seqs] rows and num_seqs+1 entries are meaningful; the
// rest is deterministic garbage.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_BENCH_INPUTS_H
#define THDC_BENCH_INPUTS_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thdc {
namespace bench {

/// Which sequence lengths a microbatch holds.
enum class LengthMix {
  /// 3 to 5 long sequences filling 85-97% of C*cp.
  Long,
  /// N-1 short sequences of varied lengths filling 85-97% of C*cp.
  Short,
};

/// "long" or "short".
inline const char *toString(LengthMix mix) {
  return mix == LengthMix::Long ? "long" : "short";
}

/// Parses "long" or "short".
inline std::optional<LengthMix> parseLengthMix(std::string_view text) {
  if (text == "long")
    return LengthMix::Long;
  if (text == "short")
    return LengthMix::Short;
  return std::nullopt;
}

/// One benchmark configuration: C tokens per CP rank, the CP size, and the
/// sequence capacity N (the dummy included).
struct BenchConfig {
  int64_t C;
  int64_t cp;
  int64_t N;
};

/// The benchmark's configurations (bench/inputs.py: CONFIGS).
inline constexpr BenchConfig kBenchConfigs[] = {
    {8192, 1, 64},    {32768, 2, 64},     {32768, 4, 128},
    {131072, 2, 256}, {1048576, 2, 1024},
};

/// Token ids of real tokens are below kVocab.
inline constexpr int64_t kVocab = 50000;
/// End-of-document id (the last id of every sample).
inline constexpr int64_t kEod = 50000;
/// Pad id of alignment padding (nonzero, so that sanitising is visible).
inline constexpr int64_t kPad = 50001;
/// Label of prompt positions.
inline constexpr int64_t kIgnore = -100;

/// The random streams of the generator (README: "Streams").
enum class Stream : uint64_t {
  Lengths = 0,
  Tokens = 1,
  GarbageTokens = 2,
  GarbageLabels = 3,
  GarbagePositionIds = 4,
  GarbageLossMask = 5,
  GarbageCuSeqlens = 6,
  GarbageCuSeqlensPadded = 7,
};

/// splitmix64's increment.
inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

/// splitmix64's output function.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Output number `index` (from 0) of splitmix64 started in state `state`.
inline uint64_t draw(uint64_t state, uint64_t index) {
  return mix64(state + (index + 1) * kGamma);
}

/// The starting state of `stream` for `seed`.
inline uint64_t streamKey(uint64_t seed, Stream stream) {
  return draw(seed, static_cast<uint64_t>(stream));
}

/// A microbatch in megatron_graph_step's static shapes.
struct Microbatch {
  int64_t C = 0, cp = 0, N = 0;
  LengthMix mix = LengthMix::Long;
  uint64_t seed = 0;
  /// Number n of real sequences (<= N-1).
  int32_t numSeqs = 0;
  /// v_i and p_i = round_up(v_i, G) of the n sequences.
  std::vector<int32_t> validLengths, paddedLengths;
  /// Prompt lengths q_i (labels of the first q_i - 1 rows are kIgnore).
  std::vector<int32_t> promptLengths;
  /// C*cp rows each; rows past cu_seqlens_padded[n] are garbage.
  std::vector<int64_t> tokens, labels, positionIds;
  std::vector<float> lossMask;
  /// N+1 entries each; entries past n are garbage.
  std::vector<int32_t> cuSeqlens, cuSeqlensPadded;

  /// T = cu_seqlens_padded[n], the packed length.
  int64_t packedLength() const { return cuSeqlensPadded[numSeqs]; }
};

namespace detail {
[[noreturn]] inline void generatorError(const char *message, int64_t C,
                                        int64_t cp, int64_t N) {
  std::fprintf(stderr,
               "thdc::bench::generateMicrobatch: %s (C = %lld, cp = %lld, "
               "N = %lld)\n",
               message, static_cast<long long>(C), static_cast<long long>(cp),
               static_cast<long long>(N));
  std::abort();
}
} // namespace detail

/// Generates the microbatch of (C, cp, N, mix, seed) as bench/README.md
/// specifies. Preconditions (abort with a message): C >= 1, cp >= 1, N >= 1,
/// C even when cp > 1, C*cp < 2^31.
inline Microbatch generateMicrobatch(int64_t C, int64_t cp, int64_t N,
                                     LengthMix mix, uint64_t seed) {
  if (C < 1 || cp < 1 || N < 1)
    detail::generatorError("needs C >= 1, cp >= 1 and N >= 1", C, cp, N);
  if (cp > 1 && C % 2)
    detail::generatorError("C must be even when cp > 1", C, cp, N);
  if (C * cp > INT32_MAX || N >= INT32_MAX)
    detail::generatorError("C*cp and N must fit int32", C, cp, N);

  Microbatch mb;
  mb.C = C;
  mb.cp = cp;
  mb.N = N;
  mb.mix = mix;
  mb.seed = seed;

  // Lengths.
  const uint64_t lengthKey = streamKey(seed, Stream::Lengths);
  uint64_t next = 0;
  auto nextDraw = [&] { return draw(lengthKey, next++); };
  const int64_t granularity = cp > 1 ? 2 * cp : 1;
  const int64_t units = C * cp / granularity;
  const uint64_t r0 = nextDraw();
  int64_t n = mix == LengthMix::Long ? 3 + static_cast<int64_t>(r0 % 3) : N - 1;
  n = std::min({n, N - 1, units});
  const int64_t fillPercent = 85 + static_cast<int64_t>(nextDraw() % 13);
  const int64_t budget = std::max(units * fillPercent / 100, n);
  std::vector<uint64_t> weights(static_cast<size_t>(n));
  uint64_t weightSum = 0;
  for (uint64_t &weight : weights) {
    const uint64_t r = nextDraw();
    weight = mix == LengthMix::Long ? 32768 + r % 32768 : 1 + r % 65536;
    weightSum += weight;
  }
  mb.numSeqs = static_cast<int32_t>(n);
  mb.paddedLengths.resize(static_cast<size_t>(n));
  mb.validLengths.resize(static_cast<size_t>(n));
  mb.promptLengths.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t share =
        static_cast<uint64_t>(budget - n) * weights[i] / weightSum;
    mb.paddedLengths[i] = static_cast<int32_t>((1 + share) * granularity);
  }
  for (int64_t i = 0; i < n; ++i)
    mb.validLengths[i] =
        mb.paddedLengths[i] - static_cast<int32_t>(nextDraw() % granularity);
  for (int64_t i = 0; i < n; ++i)
    mb.promptLengths[i] = static_cast<int32_t>(
        nextDraw() % static_cast<uint64_t>(mb.validLengths[i] / 4 + 1));

  // Offsets, then garbage past entry n.
  mb.cuSeqlens.assign(static_cast<size_t>(N + 1), 0);
  mb.cuSeqlensPadded.assign(static_cast<size_t>(N + 1), 0);
  for (int64_t i = 0; i < n; ++i) {
    mb.cuSeqlens[i + 1] = mb.cuSeqlens[i] + mb.validLengths[i];
    mb.cuSeqlensPadded[i + 1] = mb.cuSeqlensPadded[i] + mb.paddedLengths[i];
  }
  const uint64_t cuKey = streamKey(seed, Stream::GarbageCuSeqlens);
  const uint64_t cupKey = streamKey(seed, Stream::GarbageCuSeqlensPadded);
  for (int64_t e = n + 1; e <= N; ++e) {
    mb.cuSeqlens[e] =
        static_cast<int32_t>(static_cast<uint32_t>(draw(cuKey, e)));
    mb.cuSeqlensPadded[e] =
        static_cast<int32_t>(static_cast<uint32_t>(draw(cupKey, e)));
  }

  // Rows of the packed sequences (the varlen dataset's layout, S1 of docs/semantics.md).
  const size_t rows = static_cast<size_t>(C * cp);
  mb.tokens.resize(rows);
  mb.labels.resize(rows);
  mb.positionIds.resize(rows);
  mb.lossMask.resize(rows);
  const uint64_t tokenKey = streamKey(seed, Stream::Tokens);
  auto token = [&](int64_t row) {
    return static_cast<int64_t>(draw(tokenKey, static_cast<uint64_t>(row)) %
                                static_cast<uint64_t>(kVocab));
  };
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = mb.validLengths[i], q = mb.promptLengths[i];
    for (int64_t k = 0; k < mb.paddedLengths[i]; ++k) {
      const int64_t row = mb.cuSeqlensPadded[i] + k;
      const int64_t label = k + 1 < q    ? kIgnore
                            : k < v - 1  ? token(row + 1)
                            : k == v - 1 ? kEod
                                         : kPad;
      mb.tokens[row] = k < v ? token(row) : k == v ? kEod : kPad;
      mb.labels[row] = label;
      mb.positionIds[row] = k;
      mb.lossMask[row] = k < v && label != kIgnore ? 1.0f : 0.0f;
    }
  }
  const uint64_t garbageTokenKey = streamKey(seed, Stream::GarbageTokens);
  const uint64_t garbageLabelKey = streamKey(seed, Stream::GarbageLabels);
  const uint64_t garbagePositionKey =
      streamKey(seed, Stream::GarbagePositionIds);
  const uint64_t garbageLossKey = streamKey(seed, Stream::GarbageLossMask);
  for (size_t row = static_cast<size_t>(mb.packedLength()); row < rows; ++row) {
    mb.tokens[row] = static_cast<int64_t>(draw(garbageTokenKey, row));
    mb.labels[row] = static_cast<int64_t>(draw(garbageLabelKey, row));
    mb.positionIds[row] = static_cast<int64_t>(draw(garbagePositionKey, row));
    mb.lossMask[row] = static_cast<float>(
        static_cast<int64_t>(draw(garbageLossKey, row) >> 54) - 512);
  }
  return mb;
}

/// Order-sensitive digest of an array (README: "Digests"): the sum modulo
/// 2^64 of draw(bits_i, i), bits_i the element's bit pattern zero-extended to
/// 64 bits.
template <typename T> uint64_t digest(const std::vector<T> &values) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte elements");
  uint64_t sum = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t bits = 0;
    if constexpr (sizeof(T) == 4) {
      uint32_t narrow;
      std::memcpy(&narrow, &values[i], 4);
      bits = narrow;
    } else {
      std::memcpy(&bits, &values[i], 8);
    }
    sum += draw(bits, i);
  }
  return sum;
}

/// The line `--digests` prints for a microbatch: its arguments, n, T, and
/// the digests of tokens, labels, position_ids, loss_mask, cu_seqlens and
/// cu_seqlens_padded in hex.
inline std::string digestLine(const Microbatch &mb) {
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "C=%lld cp=%lld N=%lld mix=%s seed=%llu n=%d T=%lld %016llx %016llx "
      "%016llx %016llx %016llx %016llx",
      static_cast<long long>(mb.C), static_cast<long long>(mb.cp),
      static_cast<long long>(mb.N), toString(mb.mix),
      static_cast<unsigned long long>(mb.seed), mb.numSeqs,
      static_cast<long long>(mb.packedLength()),
      static_cast<unsigned long long>(digest(mb.tokens)),
      static_cast<unsigned long long>(digest(mb.labels)),
      static_cast<unsigned long long>(digest(mb.positionIds)),
      static_cast<unsigned long long>(digest(mb.lossMask)),
      static_cast<unsigned long long>(digest(mb.cuSeqlens)),
      static_cast<unsigned long long>(digest(mb.cuSeqlensPadded)));
  return line;
}

} // namespace bench
} // namespace thdc

#endif // THDC_BENCH_INPUTS_H
