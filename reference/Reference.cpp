//===- Reference.cpp - Reference semantics of THD data preparation --------===//
//
// Implements the steps declared in Reference.h, following
// shared/spec/thd-semantics.md section by section.
//
//===----------------------------------------------------------------------===//

#include "reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

namespace thdc {
namespace reference {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

/// Streams every argument into one string.
template <typename... Args> std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// Formats an array as "[a, b, c]" (long arrays are elided in the middle).
template <typename T> std::string list(const std::vector<T> &values) {
  constexpr std::size_t kShown = 16;
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values.size() > kShown && i == kShown / 2) {
      os << ", ...";
      i = values.size() - kShown / 2;
    }
    if (i)
      os << ", ";
    os << +values[i];
  }
  os << ']';
  return os.str();
}

std::string optionalToString(std::optional<int64_t> value) {
  return value ? std::to_string(*value) : std::string("None");
}

bool fitsInt32(int64_t value) {
  return value >= kInt32Min && value <= kInt32Max;
}

/// Aborts on a broken precondition or an internal inconsistency (the
/// reference has no exceptions; these are programming errors, not data).
[[noreturn]] void fatal(const char *where, const std::string &message) {
  std::fprintf(stderr, "thdc::reference::%s: %s\n", where, message.c_str());
  std::fflush(stderr);
  std::abort();
}

template <typename T> T unwrap(Expected<T> result, const char *where) {
  if (!result)
    fatal(where, "internal error: " + result.error());
  return std::move(*result);
}

/// Checks that a cu array starts at 0 and never decreases.
std::optional<std::string> checkCuArray(const char *name,
                                        const std::vector<int32_t> &cu) {
  if (cu.empty())
    return concat(name, " must have at least one entry");
  if (cu[0] != 0)
    return concat(name, "[0] = ", cu[0], " must be 0 (", name, " = ", list(cu),
                  ")");
  for (std::size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      return concat(name, " decreases: ", name, "[", i, "] = ", cu[i], " < ",
                    name, "[", i - 1, "] = ", cu[i - 1]);
  return std::nullopt;
}

} // namespace

//===----------------------------------------------------------------------===//
// detail
//===----------------------------------------------------------------------===//

std::string detail::sizeMismatch(const char *what, const char *firstName,
                                 std::size_t firstSize, const char *secondName,
                                 std::size_t secondSize) {
  return concat(what, ": ", firstName, " has ", firstSize, " entries but ",
                secondName, " has ", secondSize, "; they must match");
}

std::string detail::truncationRefused(std::size_t length,
                                      int64_t targetLength) {
  return concat("length ", length, " exceeds the target length ", targetLength,
                "; refusing to silently truncate");
}

std::string detail::indexOutOfRange(std::size_t position, int64_t index,
                                    std::size_t size) {
  return concat("index indices[", position, "] = ", index,
                " is out of range for a buffer of ", size, " rows");
}

//===----------------------------------------------------------------------===//
// Common helpers
//===----------------------------------------------------------------------===//

int64_t roundUp(int64_t value, int64_t multiple) {
  assert(multiple > 0 && "roundUp needs a positive multiple");
  int64_t quotient = value / multiple;
  if (value % multiple > 0)
    ++quotient;
  return quotient * multiple;
}

int32_t maxSeqlenFromCu(const std::vector<int32_t> &cuSeqlens) {
  int64_t result = 0;
  for (std::size_t i = 1; i < cuSeqlens.size(); ++i)
    result =
        std::max<int64_t>(result, int64_t(cuSeqlens[i]) - cuSeqlens[i - 1]);
  return static_cast<int32_t>(std::min(result, kInt32Max));
}

//===----------------------------------------------------------------------===//
// S1
//===----------------------------------------------------------------------===//

int64_t padGranularity(int64_t cp, int64_t tp, bool sequenceParallel,
                       int64_t dp, bool dynamicCp) {
  int64_t cpPad = dynamicCp ? 2 * cp * dp : (cp > 1 ? 2 * cp : 1);
  int64_t tpPad = sequenceParallel ? tp : 1;
  return cpPad * tpPad;
}

Expected<std::vector<int32_t>>
alignLengths(const std::vector<int32_t> &validLengths, int64_t granularity) {
  using Result = std::vector<int32_t>;
  if (granularity <= 0)
    return makeError<Result>(
        concat("alignment granularity G = ", granularity, " must be > 0"));
  Result padded;
  padded.reserve(validLengths.size());
  for (std::size_t i = 0; i < validLengths.size(); ++i) {
    if (validLengths[i] < 0)
      return makeError<Result>(concat("valid length v[", i,
                                      "] = ", validLengths[i], " is negative"));
    int64_t p = roundUp(validLengths[i], granularity);
    if (!fitsInt32(p))
      return makeError<Result>(concat("padded length of v[", i,
                                      "] = ", validLengths[i],
                                      " rounded up to G = ", granularity,
                                      " is ", p, ", outside the int32 range"));
    padded.push_back(static_cast<int32_t>(p));
  }
  return padded;
}

Expected<VarlenSample> alignVarlenSample(const std::vector<int64_t> &ids,
                                         const std::vector<int64_t> &targets,
                                         int64_t granularity, int64_t padId,
                                         int64_t ignoreIndex) {
  if (granularity <= 0)
    return makeError<VarlenSample>(
        concat("alignment granularity G = ", granularity, " must be > 0"));
  if (ids.size() < 2)
    return makeError<VarlenSample>(
        concat("a varlen sample needs at least 2 ids (conversation + EOD; an "
               "empty tokenisation is [eod, eod]), got ",
               ids.size()));
  if (targets.size() != ids.size())
    return makeError<VarlenSample>(detail::sizeMismatch(
        "alignVarlenSample", "ids", ids.size(), "targets", targets.size()));
  int64_t valid = static_cast<int64_t>(ids.size()) - 1;
  int64_t padded = roundUp(valid, granularity);
  if (padded + 1 > kInt32Max)
    return makeError<VarlenSample>(
        concat("padded length ", padded, " is outside the int32 range"));
  std::vector<int64_t> paddedIds(ids), paddedTargets(targets);
  paddedIds.resize(static_cast<std::size_t>(padded + 1), padId);
  paddedTargets.resize(static_cast<std::size_t>(padded + 1), padId);

  VarlenSample sample;
  sample.validLength = static_cast<int32_t>(valid);
  sample.paddedLength = static_cast<int32_t>(padded);
  sample.tokens.assign(paddedIds.begin(), paddedIds.end() - 1);
  sample.labels.assign(paddedTargets.begin() + 1, paddedTargets.end());
  for (int64_t k = 0; k < padded; ++k) {
    sample.positionIds.push_back(k);
    bool counted = k < valid && sample.labels[k] != ignoreIndex;
    sample.lossMask.push_back(counted ? 1.0f : 0.0f);
  }
  return sample;
}

//===----------------------------------------------------------------------===//
// S2
//===----------------------------------------------------------------------===//

Expected<std::optional<int64_t>>
schedulerMaxRealNumSeqs(std::optional<int64_t> maxPackedSequences,
                        bool alignmentSet, bool dummyTail) {
  using Result = std::optional<int64_t>;
  if (!maxPackedSequences)
    return Result();
  int64_t n = *maxPackedSequences;
  if (n < 1)
    return makeError<Result>(
        concat("thd_max_packed_sequences = ", n, " must be >= 1"));
  if (alignmentSet && dummyTail) {
    if (n < 2)
      return makeError<Result>(
          concat("thd_max_packed_sequences = ", n,
                 " must be >= 2 when THD padding appends a dummy sequence "
                 "(one slot is reserved for it)"));
    return Result(n - 1);
  }
  return Result(n);
}

//===----------------------------------------------------------------------===//
// S3
//===----------------------------------------------------------------------===//

Expected<PackingResult>
dpBalancedGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                 int64_t cp, int64_t dp, std::optional<int64_t> maxNumSeqs,
                 std::optional<int64_t> vppGroup) {
  if (maxPerRank < 1 || cp < 1 || dp < 1)
    return makeError<PackingResult>(
        concat("max_seqlen_per_dp_cp_rank C = ", maxPerRank, ", cp = ", cp,
               " and dp = ", dp, " must all be >= 1"));
  if (maxNumSeqs && *maxNumSeqs < 1)
    return makeError<PackingResult>(
        concat("sequence cap K = ", *maxNumSeqs, " must be >= 1"));
  if (vppGroup && *vppGroup < 1)
    return makeError<PackingResult>(concat(
        "microbatch_group_size_per_vp_stage = ", *vppGroup, " must be >= 1"));
  const int64_t capacity = maxPerRank * cp;

  std::vector<std::vector<int32_t>> packs;
  std::vector<int32_t> current;
  int64_t currentTokens = 0;
  for (std::size_t i = 0; i < paddedLengths.size(); ++i) {
    int64_t length = paddedLengths[i];
    if (length < 0)
      return makeError<PackingResult>(
          concat("padded length p[", i, "] = ", length, " is negative"));
    bool fits = currentTokens + length <= capacity &&
                (!maxNumSeqs || int64_t(current.size()) < *maxNumSeqs);
    if (fits) {
      current.push_back(static_cast<int32_t>(i));
      currentTokens += length;
    } else {
      // Next-fit: close the current pack even when it is empty.
      packs.push_back(std::move(current));
      current = {static_cast<int32_t>(i)};
      currentTokens = length;
    }
  }
  if (!current.empty())
    packs.push_back(std::move(current));

  const int64_t multiple = dp * vppGroup.value_or(1);
  const int64_t initialPacks = static_cast<int64_t>(packs.size());
  if (initialPacks % multiple) {
    int64_t need = multiple - initialPacks % multiple;
    int64_t k = initialPacks - 1;
    while (need > 0) {
      if (k < 0)
        return makeError<PackingResult>(concat(
            "Not enough samples to move: ", initialPacks,
            " packs must be split into a multiple of dp * vppGroup = ",
            multiple, " but ", need,
            " more packs are needed and no pack has more than one sequence "
            "left"));
      if (packs[k].size() > 1) {
        int32_t moved = packs[k].back();
        packs[k].pop_back();
        packs.push_back({moved});
        --need;
      } else {
        --k;
      }
    }
  }

  PackingResult result;
  const int64_t numMicrobatches = static_cast<int64_t>(packs.size()) / dp;
  for (int64_t m = 0; m < numMicrobatches; ++m) {
    std::vector<std::vector<int32_t>> group;
    for (int64_t j = 0; j < cp * dp; ++j)
      group.push_back(packs[m * dp + j / cp]);
    result.groups.push_back(std::move(group));
  }
  result.packs = std::move(packs);
  return result;
}

//===----------------------------------------------------------------------===//
// S4
//===----------------------------------------------------------------------===//

Expected<std::vector<int32_t>>
cumulativeLengths(const std::vector<int32_t> &lengths) {
  using Result = std::vector<int32_t>;
  Result cu = {0};
  int64_t sum = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0)
      return makeError<Result>(
          concat("length lens[", i, "] = ", lengths[i], " is negative"));
    sum += lengths[i];
    if (sum > kInt32Max)
      return makeError<Result>(concat("cumulative length after lens[", i,
                                      "] = ", lengths[i], " is ", sum,
                                      ", outside the int32 range"));
    cu.push_back(static_cast<int32_t>(sum));
  }
  return cu;
}

Expected<PackMetadata> packMetadata(const std::vector<int32_t> &validLengths,
                                    const std::vector<int32_t> &paddedLengths) {
  if (validLengths.size() != paddedLengths.size())
    return makeError<PackMetadata>(detail::sizeMismatch(
        "packMetadata", "valid lengths", validLengths.size(), "padded lengths",
        paddedLengths.size()));
  for (std::size_t i = 0; i < validLengths.size(); ++i)
    if (validLengths[i] > paddedLengths[i])
      return makeError<PackMetadata>(
          concat("valid length v[", i, "] = ", validLengths[i],
                 " exceeds padded length p[", i, "] = ", paddedLengths[i]));
  Expected<std::vector<int32_t>> cu = cumulativeLengths(validLengths);
  if (!cu)
    return makeError<PackMetadata>("valid lengths: " + cu.error());
  Expected<std::vector<int32_t>> cup = cumulativeLengths(paddedLengths);
  if (!cup)
    return makeError<PackMetadata>("padded lengths: " + cup.error());
  PackMetadata metadata;
  metadata.cuSeqlens = std::move(*cu);
  metadata.cuSeqlensPadded = std::move(*cup);
  metadata.maxSeqlen = 0;
  for (int32_t p : paddedLengths)
    metadata.maxSeqlen = std::max(metadata.maxSeqlen, p);
  return metadata;
}

Expected<PackLayout> packLayout(std::size_t poolSize,
                                const std::vector<int64_t> &sampleOffsets,
                                const std::vector<int32_t> &sampleIds,
                                const std::vector<int32_t> &validLengths,
                                const std::vector<int32_t> &paddedLengths) {
  if (sampleIds.size() != validLengths.size())
    return makeError<PackLayout>(
        detail::sizeMismatch("packLayout", "sample ids", sampleIds.size(),
                             "valid lengths", validLengths.size()));
  Expected<PackMetadata> metadata = packMetadata(validLengths, paddedLengths);
  if (!metadata)
    return makeError<PackLayout>(metadata.error());

  PackLayout layout;
  for (std::size_t i = 0; i < sampleIds.size(); ++i) {
    int64_t id = sampleIds[i];
    if (id < 0 || id >= static_cast<int64_t>(sampleOffsets.size()))
      return makeError<PackLayout>(concat("sample id sampleIds[", i, "] = ", id,
                                          " is out of range for ",
                                          sampleOffsets.size(), " samples"));
    int64_t offset = sampleOffsets[id];
    int64_t end = offset + validLengths[i];
    if (offset < 0 || end > static_cast<int64_t>(poolSize))
      return makeError<PackLayout>(
          concat("sequence ", i, " (sample ", id, ") reads pool rows [", offset,
                 ", ", end, ") outside the pool of ", poolSize, " rows"));
    for (int64_t k = 0; k < paddedLengths[i]; ++k)
      layout.sourceRows.push_back(k < validLengths[i] ? offset + k : -1);
  }
  layout.metadata = std::move(*metadata);
  return layout;
}

//===----------------------------------------------------------------------===//
// S5
//===----------------------------------------------------------------------===//

Expected<std::vector<uint8_t>>
paddingMask(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded) {
  using Result = std::vector<uint8_t>;
  const std::vector<int32_t> &cu = cuSeqlens;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  if (cu.size() != cup.size())
    return makeError<Result>(
        detail::sizeMismatch("paddingMask", "cu_seqlens", cu.size(),
                             "cu_seqlens_padded", cup.size()));
  if (cu.empty())
    return makeError<Result>("paddingMask: cu_seqlens and cu_seqlens_padded "
                             "must have at least one entry");
  const int64_t total = cup.back();
  if (total < 0)
    return makeError<Result>(concat("paddingMask: cu_seqlens_padded[",
                                    cup.size() - 1, "] = ", total,
                                    " is negative; the mask length must be "
                                    ">= 0"));
  if (total == 0)
    return Result();
  const std::size_t n = cu.size() - 1;
  if (n == 0)
    return Result(static_cast<std::size_t>(total), 1);

  // s = #{entries of cup[1:] <= pos}; a binary search gives the same count on
  // the (normal) non-decreasing arrays. Since cup[n] = total > pos, s < n.
  const bool sorted = std::is_sorted(cup.begin() + 1, cup.end());
  Result mask(static_cast<std::size_t>(total));
  for (int64_t pos = 0; pos < total; ++pos) {
    std::size_t s;
    if (sorted)
      s = std::upper_bound(cup.begin() + 1, cup.end(), pos) - (cup.begin() + 1);
    else
      s = std::count_if(cup.begin() + 1, cup.end(),
                        [pos](int32_t c) { return c <= pos; });
    int64_t validLength = std::max<int64_t>(int64_t(cu[s + 1]) - cu[s], 0);
    mask[pos] = pos >= cup[s] + validLength;
  }
  return mask;
}

//===----------------------------------------------------------------------===//
// S7
//===----------------------------------------------------------------------===//

Expected<std::vector<int32_t>>
cpPartitionIndices(const std::vector<int32_t> &cuSeqlensPadded,
                   int64_t totalTokens, int64_t cp, int64_t rank, CpMode mode) {
  using Result = std::vector<int32_t>;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  if (cp < 1)
    return makeError<Result>(concat("cp = ", cp, " must be >= 1"));
  if (rank < 0 || rank >= cp)
    return makeError<Result>(
        concat("CP rank ", rank, " is outside [0, cp = ", cp, ")"));
  if (totalTokens < 0 || totalTokens > kInt32Max)
    return makeError<Result>(
        concat("total_tokens = ", totalTokens, " is outside [0, int32 max]"));
  Result indices;
  if (cp == 1) {
    for (int64_t t = 0; t < totalTokens; ++t)
      indices.push_back(static_cast<int32_t>(t));
    return indices;
  }
  if (mode == CpMode::Contiguous) {
    if (totalTokens % cp)
      return makeError<Result>(concat("total_tokens = ", totalTokens,
                                      " is not divisible by cp = ", cp,
                                      " (contiguous CP partitioning)"));
    const int64_t local = totalTokens / cp;
    for (int64_t t = 0; t < local; ++t)
      indices.push_back(static_cast<int32_t>(rank * local + t));
    return indices;
  }

  const int64_t twoCp = 2 * cp;
  if (cup.size() < 2)
    return makeError<Result>(
        concat("cu_seqlens_padded needs at least 2 entries for zigzag CP "
               "partitioning, got ",
               cup.size(), " (", list(cup), ")"));
  if (totalTokens <= 0)
    return makeError<Result>(concat("total_tokens = ", totalTokens,
                                    " must be > 0 for zigzag CP partitioning "
                                    "with cp = ",
                                    cp));
  if (totalTokens % twoCp)
    return makeError<Result>(concat("total_tokens = ", totalTokens,
                                    " is not divisible by 2*cp = ", twoCp));
  for (std::size_t i = 0; i < cup.size(); ++i)
    if (cup[i] % twoCp)
      return makeError<Result>(concat("cu_seqlens_padded[", i, "] = ", cup[i],
                                      " is not divisible by 2*cp = ", twoCp));

  std::vector<int64_t> cs;
  for (int32_t c : cup)
    cs.push_back(c / cp);
  const int64_t b = static_cast<int64_t>(cup.size()) - 1;
  for (int64_t t = 0; t < totalTokens / cp; ++t) {
    // TE's binary search over cs[1..b]; rows past cs[b] end at s = b-1.
    int64_t lo = 1, hi = b;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (cs[mid] <= t)
        lo = mid + 1;
      else
        hi = mid;
    }
    const int64_t s = lo - 1;
    const int64_t halfLength = (cs[s + 1] - cs[s]) / 2;
    const int64_t k = t - cs[s];
    const int64_t chunk = k < halfLength ? rank : 2 * (cp - 1) - rank;
    indices.push_back(
        static_cast<int32_t>(k + cs[s] * cp + halfLength * chunk));
  }
  return indices;
}

Expected<std::vector<int32_t>>
sequenceOrderToCpRankOrder(const std::vector<int32_t> &cuSeqlensPadded,
                           int64_t cp) {
  using Result = std::vector<int32_t>;
  if (cuSeqlensPadded.empty())
    return makeError<Result>("cu_seqlens_padded must have at least one entry");
  if (cp < 1)
    return makeError<Result>(concat("cp = ", cp, " must be >= 1"));
  Result order;
  for (int64_t rank = 0; rank < cp; ++rank) {
    Expected<Result> indices = cpPartitionIndices(
        cuSeqlensPadded, cuSeqlensPadded.back(), cp, rank, CpMode::Zigzag);
    if (!indices)
      return indices;
    order.insert(order.end(), indices->begin(), indices->end());
  }
  return order;
}

//===----------------------------------------------------------------------===//
// S8
//===----------------------------------------------------------------------===//

Expected<std::vector<int64_t>>
positionIds(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded) {
  using Result = std::vector<int64_t>;
  if (std::optional<std::string> problem =
          checkCuArray("cu_seqlens_padded", cuSeqlensPadded))
    return makeError<Result>("positionIds: " + *problem);
  Expected<std::vector<uint8_t>> mask = paddingMask(cuSeqlens, cuSeqlensPadded);
  if (!mask)
    return makeError<Result>(mask.error());
  Result positions;
  for (std::size_t i = 0; i + 1 < cuSeqlensPadded.size(); ++i)
    for (int64_t k = 0; k < cuSeqlensPadded[i + 1] - cuSeqlensPadded[i]; ++k)
      positions.push_back(k);
  return sanitize(positions, *mask, 0);
}

namespace {
/// Per local row: RoPE position (before the absolute shift) and sequence.
struct RopeRows {
  std::vector<int64_t> positions;
  std::vector<int64_t> sequences;
};

Expected<RopeRows> computeRopeRows(const std::vector<int32_t> &cuPadded,
                                   int64_t cp, int64_t rank,
                                   int64_t localLength) {
  if (cuPadded.size() < 2)
    return makeError<RopeRows>(
        concat("RoPE positions need a cu array with at least 2 entries, got ",
               list(cuPadded)));
  if (cp < 1 || rank < 0 || rank >= cp)
    return makeError<RopeRows>(
        concat("CP rank ", rank, " is outside [0, cp = ", cp, ")"));
  if (localLength < 0)
    return makeError<RopeRows>(
        concat("local length ", localLength, " is negative"));
  for (std::size_t i = 1; i < cuPadded.size(); ++i)
    if (cuPadded[i] < cuPadded[i - 1])
      return makeError<RopeRows>(
          concat("cu_seqlens_padded decreases: cu_seqlens_padded[", i,
                 "] = ", cuPadded[i], " < cu_seqlens_padded[", i - 1,
                 "] = ", cuPadded[i - 1]));

  const std::size_t n = cuPadded.size() - 1;
  std::vector<int64_t> localLengths, localCu = {0};
  for (std::size_t i = 0; i < n; ++i) {
    int64_t global = int64_t(cuPadded[i + 1]) - cuPadded[i];
    localLengths.push_back(cp > 1 ? global / cp : global);
    localCu.push_back(localCu.back() + localLengths.back());
  }
  RopeRows rows;
  for (int64_t t = 0; t < localLength; ++t) {
    int64_t s = (std::upper_bound(localCu.begin(), localCu.end(), t) -
                 localCu.begin()) -
                1;
    s = std::clamp<int64_t>(s, 0, static_cast<int64_t>(n) - 1);
    const int64_t k = t - localCu[s];
    const int64_t length = localLengths[s];
    const int64_t half = length / 2;
    int64_t position;
    if (cp == 1)
      position = k;
    else if (k < half)
      position = rank * half + k;
    else
      position = length * cp - (rank + 1) * half + (k - half);
    rows.positions.push_back(position);
    rows.sequences.push_back(s);
  }
  return rows;
}
} // namespace

Expected<std::vector<int64_t>>
ropePositions(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength) {
  Expected<RopeRows> rows =
      computeRopeRows(cuSeqlensPadded, cp, rank, localLength);
  if (!rows)
    return makeError<std::vector<int64_t>>(rows.error());
  return std::move(rows->positions);
}

Expected<std::vector<int64_t>>
ropeTableRows(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength, int64_t maxSeqlen,
              int64_t freqRows) {
  using Result = std::vector<int64_t>;
  if (freqRows < 1)
    return makeError<Result>(
        concat("the RoPE table has ", freqRows, " rows; it needs at least 1"));
  Expected<RopeRows> rows =
      computeRopeRows(cuSeqlensPadded, cp, rank, localLength);
  if (!rows)
    return makeError<Result>(rows.error());
  const bool absoluteTable = freqRows > maxSeqlen;
  Result table;
  for (std::size_t t = 0; t < rows->positions.size(); ++t) {
    int64_t position = rows->positions[t];
    if (absoluteTable)
      position += cuSeqlensPadded[rows->sequences[t]];
    table.push_back(std::clamp<int64_t>(position, 0, freqRows - 1));
  }
  return table;
}

Expected<std::vector<int32_t>> seqIdx(const std::vector<int32_t> &cuSeqlens,
                                      int64_t totalTokens) {
  using Result = std::vector<int32_t>;
  if (cuSeqlens.empty())
    return makeError<Result>("seqIdx: cu_seqlens must have at least one entry");
  std::vector<int64_t> bounds(cuSeqlens.begin(), cuSeqlens.end());
  bounds.push_back(totalTokens);
  Result index;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
    for (int64_t k = 0; k < bounds[i + 1] - bounds[i]; ++k)
      index.push_back(static_cast<int32_t>(i));
  if (static_cast<int64_t>(index.size()) != totalTokens)
    return makeError<Result>(concat("seqIdx: cu_seqlens = ", list(cuSeqlens),
                                    " with total_tokens = ", totalTokens,
                                    " covers ", index.size(),
                                    " rows instead of ", totalTokens));
  return index;
}

//===----------------------------------------------------------------------===//
// S9
//===----------------------------------------------------------------------===//

Expected<ThdPaddingKwargs>
thdPaddingKwargs(PadAlignment alignment, int64_t maxSeqlenPerRank,
                 std::optional<int64_t> maxPackedSequences, bool cudaGraph,
                 bool schedulerOrDynamicCp, SemanticsVersion version) {
  const int64_t c = maxSeqlenPerRank;
  if (c < 1)
    return makeError<ThdPaddingKwargs>(
        concat("max_seqlen_per_dp_cp_rank = ", c, " must be set and >= 1"));
  if (!alignment.isMax && (alignment.value < 1 || alignment.value > c))
    return makeError<ThdPaddingKwargs>(
        concat("pad_packed_seq_alignment = ", alignment.value,
               " must be \"max\" or a positive integer <= "
               "max_seqlen_per_dp_cp_rank = ",
               c));
  if (cudaGraph && schedulerOrDynamicCp && !alignment.isMax &&
      alignment.value != c)
    return makeError<ThdPaddingKwargs>(
        concat("with CUDA graphs and the sequence-packing scheduler "
               "pad_packed_seq_alignment must be \"max\" or exactly "
               "max_seqlen_per_dp_cp_rank = ",
               c, ", got ", alignment.value));
  const bool dev = version == SemanticsVersion::DevLater;
  if (cudaGraph && dev && !maxPackedSequences)
    return makeError<ThdPaddingKwargs>(
        "CUDA-graph THD padding requires --thd-max-packed-sequences");

  ThdPaddingKwargs kwargs;
  if (cudaGraph) {
    kwargs.targetLength = c;
    kwargs.maxNumSeqs = maxPackedSequences;
  } else if (alignment.isMax) {
    kwargs.targetLength = c;
    if (dev)
      kwargs.maxNumSeqs = maxPackedSequences;
  } else {
    kwargs.alignment = alignment.value;
    if (dev)
      kwargs.maxNumSeqs = maxPackedSequences;
  }
  return kwargs;
}

//===----------------------------------------------------------------------===//
// S10
//===----------------------------------------------------------------------===//

Expected<std::vector<int32_t>> padCuSeqlens(const std::vector<int32_t> &cu,
                                            int64_t entries) {
  using Result = std::vector<int32_t>;
  if (cu.empty())
    return makeError<Result>("padCuSeqlens: the cu array is empty");
  if (entries < 1)
    return makeError<Result>(
        concat("padCuSeqlens: entries = ", entries, " must be >= 1"));
  if (static_cast<int64_t>(cu.size()) > entries)
    return makeError<Result>(concat("Actual num_seqs (", cu.size() - 1,
                                    ") exceeds thd_max_packed_sequences (",
                                    entries - 1, ")"));
  Result padded(cu);
  padded.resize(static_cast<std::size_t>(entries), cu.back());
  return padded;
}

Expected<TailPaddingResult>
padTailMetadata(const std::vector<int32_t> &cuSeqlens,
                const std::vector<int32_t> &cuSeqlensPadded, int32_t maxSeqlen,
                int64_t localLength, const TailPaddingConfig &config) {
  using Result = TailPaddingResult;
  const std::vector<int32_t> &cu = cuSeqlens;
  const std::vector<int32_t> &cup = cuSeqlensPadded;
  const int64_t cp = config.cp;
  if (config.alignment.has_value() == config.target.has_value())
    return makeError<Result>(
        concat("exactly one of alignment and target must be set (got "
               "alignment = ",
               optionalToString(config.alignment),
               ", target = ", optionalToString(config.target), ")"));
  if (config.alignment && *config.alignment <= 0)
    return makeError<Result>(
        concat("alignment = ", *config.alignment, " must be > 0"));
  if (config.target && *config.target <= 0)
    return makeError<Result>(
        concat("target = ", *config.target, " must be > 0"));
  if (cp < 1)
    return makeError<Result>(concat("cp = ", cp, " must be >= 1"));
  if (config.maxNumSeqs && *config.maxNumSeqs < 1)
    return makeError<Result>(concat(
        "thd_max_packed_sequences = ", *config.maxNumSeqs, " must be >= 1"));
  if (cu.size() != cup.size())
    return makeError<Result>(
        detail::sizeMismatch("padTailMetadata", "cu_seqlens", cu.size(),
                             "cu_seqlens_padded", cup.size()));
  if (cup.empty())
    return makeError<Result>(
        "padTailMetadata: the cu arrays must have at least one entry");
  if (localLength < 0)
    return makeError<Result>(
        concat("local length ", localLength, " is negative"));

  const int64_t localTarget =
      config.target ? *config.target : roundUp(localLength, *config.alignment);
  if (localTarget > kInt32Max / cp)
    return makeError<Result>(
        concat("global target length Lt * cp = ", localTarget, " * ", cp,
               " is outside the int32 range"));
  const int64_t globalTarget = localTarget * cp;
  const int64_t globalActual = cup.back();
  const std::size_t n = cup.size() - 1;

  for (std::size_t i = 0; i < n; ++i) {
    int64_t length = int64_t(cup[i + 1]) - cup[i];
    if (length > globalTarget)
      return makeError<Result>(
          concat("Individual request length ", length, " (sequence ", i,
                 ") exceeds the global target length gT = ", globalTarget,
                 " (Lt ", localTarget, " * cp ", cp, ")"));
  }
  if (localLength > localTarget)
    return makeError<Result>(
        concat("local length ", localLength,
               " exceeds the local target length Lt = ", localTarget,
               "; refusing to silently truncate"));
  if (globalActual > globalTarget)
    return makeError<Result>(concat(
        "total padded length cu_seqlens_padded[", n, "] = ", globalActual,
        " exceeds the global target length gT = ", globalTarget,
        "; refusing to silently truncate"));

  const bool zigzagCp = cp > 1 && config.mode == CpMode::Zigzag;
  std::vector<int32_t> outCu(cu), outCup(cup);
  int64_t newMaxSeqlen = maxSeqlen;
  switch (config.policy) {
  case TailPolicy::AppendDummySequence:
    if (globalTarget > globalActual) {
      const int64_t dummy = globalTarget - globalActual;
      if (zigzagCp && dummy % (2 * cp))
        return makeError<Result>(
            concat("dummy sequence length ", dummy, " (gT ", globalTarget,
                   " - cu_seqlens_padded[", n, "] ", globalActual,
                   ") is not divisible by 2*cp = ", 2 * cp,
                   "; zigzag CP partitioning requires it"));
      const int64_t validEnd = int64_t(cu.back()) + dummy;
      if (!fitsInt32(validEnd))
        return makeError<Result>(concat("dummy end cu_seqlens[", n, "] + ",
                                        dummy, " = ", validEnd,
                                        " is outside the int32 range"));
      outCup.push_back(static_cast<int32_t>(globalTarget));
      outCu.push_back(static_cast<int32_t>(validEnd));
      newMaxSeqlen = std::max(newMaxSeqlen, dummy);
    }
    break;
  case TailPolicy::ExtendLast:
    if (zigzagCp && globalTarget % (2 * cp))
      return makeError<Result>(
          concat("global target length gT = ", globalTarget,
                 " is not divisible by 2*cp = ", 2 * cp,
                 "; extend_last under zigzag CP requires it"));
    if (globalTarget > globalActual) {
      if (n == 0)
        return makeError<Result>(
            concat("extend_last needs at least one real sequence to extend "
                   "(cu_seqlens_padded = ",
                   list(cup), ")"));
      outCup.back() = static_cast<int32_t>(globalTarget);
      newMaxSeqlen =
          std::max<int64_t>(newMaxSeqlen, int64_t(outCup[n]) - outCup[n - 1]);
    }
    break;
  case TailPolicy::None:
    break;
  }

  Result result;
  result.localTarget = localTarget;
  result.globalTarget = globalTarget;
  if (config.maxNumSeqs) {
    Expected<std::vector<int32_t>> paddedCu =
        padCuSeqlens(outCu, *config.maxNumSeqs + 1);
    if (!paddedCu)
      return makeError<Result>(paddedCu.error());
    Expected<std::vector<int32_t>> paddedCup =
        padCuSeqlens(outCup, *config.maxNumSeqs + 1);
    if (!paddedCup)
      return makeError<Result>(paddedCup.error());
    result.cuSeqlens = std::move(*paddedCu);
    result.cuSeqlensPadded = std::move(*paddedCup);
    result.maxSeqlen = static_cast<int32_t>(globalTarget);
  } else {
    result.cuSeqlens = std::move(outCu);
    result.cuSeqlensPadded = std::move(outCup);
    result.maxSeqlen = static_cast<int32_t>(newMaxSeqlen);
    result.totalTokens = localTarget;
  }
  for (int64_t row = 0; row < localTarget; ++row)
    result.tailMask.push_back(row >= localLength);
  return result;
}

Expected<std::vector<uint8_t>>
mergeTailMask(const std::vector<uint8_t> &oldMask, int64_t localLength,
              int64_t localTarget) {
  using Result = std::vector<uint8_t>;
  if (localLength > localTarget)
    return makeError<Result>(
        concat("local length ", localLength,
               " exceeds the local target length Lt = ", localTarget,
               "; refusing to silently truncate"));
  Expected<Result> merged = padTail(oldMask, localTarget, 1);
  if (!merged)
    return merged;
  for (int64_t row = std::max<int64_t>(localLength, 0); row < localTarget;
       ++row)
    (*merged)[row] = 1;
  return merged;
}

Expected<int64_t> metadataOnlyGlobalTarget(int64_t totalPadded, int64_t cp,
                                           std::optional<int64_t> alignment,
                                           std::optional<int64_t> target) {
  if (alignment.has_value() == target.has_value())
    return makeError<int64_t>(
        concat("exactly one of alignment and target must be set (got "
               "alignment = ",
               optionalToString(alignment),
               ", target = ", optionalToString(target), ")"));
  if (cp < 1)
    return makeError<int64_t>(concat("cp = ", cp, " must be >= 1"));
  if (target) {
    if (*target <= 0)
      return makeError<int64_t>(concat("target = ", *target, " must be > 0"));
    return *target * cp;
  }
  if (*alignment <= 0)
    return makeError<int64_t>(
        concat("alignment = ", *alignment, " must be > 0"));
  return roundUp(totalPadded, *alignment);
}

//===----------------------------------------------------------------------===//
// S11
//===----------------------------------------------------------------------===//

std::vector<int32_t> graphCaptureCuSeed(int64_t maxSeqlenPerRank, int64_t cp,
                                        int64_t maxPackedSequences) {
  if (maxSeqlenPerRank < 1 || cp < 1 || maxPackedSequences < 1 ||
      maxSeqlenPerRank * cp > kInt32Max)
    fatal("graphCaptureCuSeed",
          concat("needs C >= 1, cp >= 1, N >= 1 and C*cp in int32 (C = ",
                 maxSeqlenPerRank, ", cp = ", cp, ", N = ", maxPackedSequences,
                 ")"));
  std::vector<int32_t> seed(static_cast<std::size_t>(maxPackedSequences + 1),
                            static_cast<int32_t>(maxSeqlenPerRank * cp));
  seed[0] = 0;
  return seed;
}

//===----------------------------------------------------------------------===//
// S12
//===----------------------------------------------------------------------===//

Expected<int64_t> maxMicrobatchesUpperBound(int64_t globalBatchSize, int64_t dp,
                                            int64_t cp, int64_t maxPerRank,
                                            int64_t maxSeqLen,
                                            std::optional<int64_t> vppGroup,
                                            std::optional<int64_t> maxNumSeqs) {
  if (globalBatchSize < 1 || dp < 1 || cp < 1 || maxPerRank < 1 ||
      maxSeqLen < 1 || (vppGroup && *vppGroup < 1))
    return makeError<int64_t>(
        concat("maxMicrobatchesUpperBound needs positive inputs (GBS = ",
               globalBatchSize, ", dp = ", dp, ", cp = ", cp,
               ", C = ", maxPerRank, ", Lmax = ", maxSeqLen,
               ", vppGroup = ", optionalToString(vppGroup), ")"));
  int64_t perPack = std::max<int64_t>(1, maxPerRank * cp / maxSeqLen);
  if (maxNumSeqs)
    perPack = std::min(perPack, std::max<int64_t>(1, *maxNumSeqs));
  const int64_t packs = (globalBatchSize + perPack - 1) / perPack;
  const int64_t multiple = dp * vppGroup.value_or(1);
  return std::max<int64_t>(1, roundUp(packs, multiple) / dp);
}

int64_t graphCaptureCount(int64_t runtimeNumMicrobatches, int64_t upperBound,
                          bool useRuntimeCount) {
  if (useRuntimeCount)
    return runtimeNumMicrobatches;
  return std::max(runtimeNumMicrobatches, upperBound);
}

Expected<int64_t> graphSlotsNeeded(const std::vector<int64_t> &order) {
  std::map<int64_t, int64_t> outstanding;
  int64_t need = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] == 0)
      return makeError<int64_t>(
          concat("order[", i, "] = 0 is not a (1-based) chunk id"));
    int64_t &live = outstanding[order[i] > 0 ? order[i] : -order[i]];
    live += order[i] > 0 ? 1 : -1;
    need = std::max(need, live);
  }
  return need;
}

//===----------------------------------------------------------------------===//
// S14
//===----------------------------------------------------------------------===//

Expected<std::vector<int32_t>> readHalfRows(const std::vector<int32_t> &cuLocal,
                                            int half, std::size_t rows) {
  using Result = std::vector<int32_t>;
  if (half != 0 && half != 1)
    return makeError<Result>(concat("half = ", half, " must be 0 or 1"));
  if (cuLocal.size() < 2)
    return makeError<Result>(
        concat("readHalf needs a local cu array with at least 2 entries, got ",
               list(cuLocal)));
  for (std::size_t i = 0; i < cuLocal.size(); ++i) {
    if (cuLocal[i] % 2)
      return makeError<Result>(
          concat("local cu_seqlens[", i, "] = ", cuLocal[i], " is not even"));
    if (i && cuLocal[i] < cuLocal[i - 1])
      return makeError<Result>(concat("local cu_seqlens decreases at entry ", i,
                                      ": ", list(cuLocal)));
  }
  const std::size_t n = cuLocal.size() - 1;
  std::vector<int64_t> halves;
  for (int32_t c : cuLocal)
    halves.push_back(c / 2);
  Result source;
  std::size_t s = 0;
  for (int64_t j = 0; j < halves[n]; ++j) {
    while (s + 1 < n && halves[s + 1] <= j)
      ++s;
    int64_t row = j + halves[s + half];
    if (row < 0 || row >= static_cast<int64_t>(rows))
      return makeError<Result>(concat("readHalf row ", row,
                                      " is outside the local buffer of ", rows,
                                      " rows"));
    source.push_back(static_cast<int32_t>(row));
  }
  return source;
}

double lseMerge(double a, double b) {
  const double high = std::max(a, b);
  const double low = std::min(a, b);
  if (std::isinf(high) && high < 0)
    return high;
  return high + std::log1p(std::exp(low - high));
}

double correctOutput(double out, double outStep, double lseStep,
                     double lseFinal) {
  if (outStep == 0.0)
    return out;
  return out + outStep * std::exp(lseStep - lseFinal);
}

//===----------------------------------------------------------------------===//
// Composite
//===----------------------------------------------------------------------===//

namespace {

void checkGraphStepPreconditions(const GraphStepInput &input, int64_t c,
                                 int64_t cp, int64_t n) {
  if (c < 1 || cp < 1 || n < 1)
    fatal("megatronGraphStep", concat("needs C >= 1, cp >= 1 and N >= 1 (C = ",
                                      c, ", cp = ", cp, ", N = ", n, ")"));
  if (cp > 1 && c % 2)
    fatal("megatronGraphStep",
          concat("C = ", c, " must be even when cp = ", cp,
                 " > 1 (the dummy length C*cp - T must be divisible by 2*cp)"));
  if (c * cp > kInt32Max)
    fatal("megatronGraphStep",
          concat("C * cp = ", c * cp, " is outside the int32 range"));
  const std::size_t rows = static_cast<std::size_t>(c * cp);
  const std::size_t entries = static_cast<std::size_t>(n + 1);
  if (input.tokens.size() != rows || input.labels.size() != rows ||
      input.positionIds.size() != rows || input.lossMask.size() != rows)
    fatal("megatronGraphStep",
          concat("tokens/labels/position_ids/loss_mask have ",
                 input.tokens.size(), "/", input.labels.size(), "/",
                 input.positionIds.size(), "/", input.lossMask.size(),
                 " rows; all must have C*cp = ", rows));
  if (input.cuSeqlens.size() != entries ||
      input.cuSeqlensPadded.size() != entries)
    fatal("megatronGraphStep",
          concat("cu_seqlens/cu_seqlens_padded have ", input.cuSeqlens.size(),
                 "/", input.cuSeqlensPadded.size(),
                 " entries; both must have N+1 = ", entries));
}

/// S6 -> S7 -> S10 for one data key: sanitise the first mask.size() rows,
/// gather the CP slice and right-pad with 0 to the local target.
template <typename T>
std::vector<T>
prepareDataKey(const std::vector<T> &values, const std::vector<uint8_t> &mask,
               const std::vector<int32_t> &indices, int64_t localTarget) {
  std::vector<T> buffer(values.begin(), values.begin() + mask.size());
  std::vector<T> clean =
      unwrap(sanitize(buffer, mask, T(0)), "megatronGraphStep (S6)");
  std::vector<T> local =
      unwrap(cpSlice(clean, indices), "megatronGraphStep (S7)");
  return unwrap(padTail(local, localTarget, T(0)), "megatronGraphStep (S10)");
}

/// The valid-microbatch pipeline on the meaningful prefix cu/cup.
GraphStepOutput runGraphStep(const GraphStepInput &input,
                             const std::vector<int32_t> &cu,
                             const std::vector<int32_t> &cup, int64_t rank,
                             int64_t c, int64_t cp, int64_t n) {
  std::vector<uint8_t> mask =
      unwrap(paddingMask(cu, cup), "megatronGraphStep (S5)");
  const int64_t total = static_cast<int64_t>(mask.size());
  // An empty microbatch has an empty slice (TE would reject T == 0 under CP).
  std::vector<int32_t> indices;
  if (cp == 1 || total > 0)
    indices = unwrap(cpPartitionIndices(cup, total, cp, rank, CpMode::Zigzag),
                     "megatronGraphStep (S7)");
  const int64_t localLength = static_cast<int64_t>(indices.size());

  TailPaddingConfig config;
  config.cp = cp;
  config.mode = CpMode::Zigzag;
  config.target = c;
  config.maxNumSeqs = n;
  config.policy = TailPolicy::AppendDummySequence;
  TailPaddingResult tail = unwrap(
      padTailMetadata(cu, cup, maxSeqlenFromCu(cup), localLength, config),
      "megatronGraphStep (S10)");

  GraphStepOutput output;
  output.tokens = prepareDataKey(input.tokens, mask, indices, tail.localTarget);
  output.labels = prepareDataKey(input.labels, mask, indices, tail.localTarget);
  output.positionIds =
      prepareDataKey(input.positionIds, mask, indices, tail.localTarget);
  output.lossMask =
      prepareDataKey(input.lossMask, mask, indices, tail.localTarget);
  std::vector<uint8_t> localMask =
      unwrap(cpSlice(mask, indices), "megatronGraphStep (S7)");
  output.paddingMask =
      unwrap(mergeTailMask(localMask, localLength, tail.localTarget),
             "megatronGraphStep (S10)");
  output.cuSeqlensPadded = std::move(tail.cuSeqlensPadded);
  output.cuSeqlens = std::move(tail.cuSeqlens);
  output.maxSeqlen = tail.maxSeqlen;
  return output;
}

} // namespace

int32_t sampleStatus(const std::vector<int32_t> &sampleOffsets,
                     const std::vector<int32_t> &sampleLengths,
                     const std::vector<int32_t> &sampleIds, int64_t numSeqs,
                     int64_t poolRows) {
  int64_t n = std::clamp<int64_t>(numSeqs, 0, int64_t(sampleIds.size()));
  int64_t samples =
      int64_t(std::min(sampleOffsets.size(), sampleLengths.size()));
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = sampleIds[std::size_t(i)];
    if (id < 0 || id >= samples)
      return StatusSampleOutOfRange;
    int64_t offset = sampleOffsets[std::size_t(id)];
    int64_t length = sampleLengths[std::size_t(id)];
    if (offset < 0 || length < 0 || offset + length > poolRows)
      return StatusSampleOutOfRange;
  }
  return 0;
}

int32_t graphStepStatus(const GraphStepInput &input, int64_t maxSeqlenPerRank,
                        int64_t cp, int64_t maxPackedSequences) {
  checkGraphStepPreconditions(input, maxSeqlenPerRank, cp, maxPackedSequences);
  const std::vector<int32_t> &cu = input.cuSeqlens;
  const std::vector<int32_t> &cup = input.cuSeqlensPadded;
  int32_t status = 0;
  if (input.numSeqs < 0 || input.numSeqs > maxPackedSequences - 1)
    status |= StatusNumSeqsOutOfRange;
  if (input.cpRank < 0 || input.cpRank >= cp)
    status |= StatusCpRankOutOfRange;
  const std::size_t n = static_cast<std::size_t>(
      std::clamp<int64_t>(input.numSeqs, 0, maxPackedSequences));
  if (cu[0] != 0 || cup[0] != 0)
    status |= StatusNotMonotonic;
  for (std::size_t i = 1; i <= n; ++i)
    if (cu[i] < cu[i - 1] || cup[i] < cup[i - 1])
      status |= StatusNotMonotonic;
  if (cup[n] > maxSeqlenPerRank * cp)
    status |= StatusTotalExceedsCapacity;
  if (cp > 1)
    for (std::size_t i = 0; i <= n; ++i)
      if (cup[i] % (2 * cp))
        status |= StatusNotDivisibleBy2Cp;
  for (std::size_t i = 0; i < n; ++i)
    if (int64_t(cu[i + 1]) - cu[i] > int64_t(cup[i + 1]) - cup[i])
      status |= StatusValidExceedsPadded;
  return status;
}

GraphStepOutput megatronGraphStep(const GraphStepInput &input,
                                  int64_t maxSeqlenPerRank, int64_t cp,
                                  int64_t maxPackedSequences) {
  const int32_t status =
      graphStepStatus(input, maxSeqlenPerRank, cp, maxPackedSequences);
  GraphStepOutput output;
  if (status == 0) {
    const auto end = static_cast<std::ptrdiff_t>(input.numSeqs) + 1;
    std::vector<int32_t> cu(input.cuSeqlens.begin(),
                            input.cuSeqlens.begin() + end);
    std::vector<int32_t> cup(input.cuSeqlensPadded.begin(),
                             input.cuSeqlensPadded.begin() + end);
    output = runGraphStep(input, cu, cup, input.cpRank, maxSeqlenPerRank, cp,
                          maxPackedSequences);
  } else {
    // An invalid microbatch is replaced by an empty one: its dummy sequence
    // covers the whole buffer and every row is padding.
    output = runGraphStep(input, {0}, {0}, /*rank=*/0, maxSeqlenPerRank, cp,
                          maxPackedSequences);
  }
  output.status = status;
  return output;
}

} // namespace reference
} // namespace thdc
