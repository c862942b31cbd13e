//===- Scheduling.cpp - S2, S3 sequence cap and packing -------------------===//
//
// Sections S2 and S3 of docs/semantics.md: the cap K on real sequences per
// pack (schedulerMaxRealNumSeqs) and the in-order next-fit packing of a
// global batch into microbatches, with the DP x CP group mapping
// (dpBalancedGroups); S3b, the dynamic-CP scheduler (dynamicCpGroups) and
// its alignment to virtual pipeline stages (alignDynamicCpMicrobatches). The
// host planner (planner/Planner.h) builds on these.
//
//===----------------------------------------------------------------------===//

#include "reference/Scheduling.h"
#include "reference/DynamicCp.h"
#include "reference/Internal.h"

#include <algorithm>
#include <numeric>

namespace thdc {
namespace reference {

using namespace internal;

//===----------------------------------------------------------------------===//
// S2. Scheduler cap on real sequences
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
// S3. Packing sequences into microbatches
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
  // Every product below is checked: wrapped, an absurd C*cp or dp*vppGroup
  // would become a small budget (or a zero divisor) without a word.
  const std::optional<int64_t> capacity = checkedMul(maxPerRank, cp);
  const std::optional<int64_t> multiple = checkedMul(dp, vppGroup.value_or(1));
  const std::optional<int64_t> ranks = checkedMul(dp, cp);
  if (!capacity)
    return makeError<PackingResult>(
        concat("the pack budget C * cp = ", maxPerRank, " * ", cp,
               " overflows int64"));
  if (!multiple)
    return makeError<PackingResult>(
        concat("the pack multiple dp * vppGroup = ", dp, " * ", *vppGroup,
               " overflows int64"));
  if (!ranks)
    return makeError<PackingResult>(
        concat("the rank count dp * cp = ", dp, " * ", cp, " overflows int64"));

  std::vector<std::vector<int32_t>> packs;
  std::vector<int32_t> current;
  int64_t currentTokens = 0;
  for (std::size_t i = 0; i < paddedLengths.size(); ++i) {
    int64_t length = paddedLengths[i];
    if (length < 0)
      return makeError<PackingResult>(
          concat("padded length p[", i, "] = ", length, " is negative"));
    bool fits = currentTokens + length <= *capacity &&
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

  const int64_t initialPacks = static_cast<int64_t>(packs.size());
  if (initialPacks % *multiple) {
    int64_t need = *multiple - initialPacks % *multiple;
    int64_t k = initialPacks - 1;
    while (need > 0) {
      if (k < 0)
        return makeError<PackingResult>(concat(
            "Not enough samples to move: ", initialPacks,
            " packs must be split into a multiple of dp * vppGroup = ",
            *multiple, " but ", need,
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
    for (int64_t j = 0; j < *ranks; ++j)
      group.push_back(packs[m * dp + j / cp]);
    result.groups.push_back(std::move(group));
  }
  result.packs = std::move(packs);
  return result;
}

//===----------------------------------------------------------------------===//
// S3b. Dynamic-CP scheduling
//===----------------------------------------------------------------------===//

int64_t dynamicCpSizeNeeded(int64_t length, int64_t maxPerRank,
                            int64_t minCp) {
  // The smallest power of two p with p*C >= length. p*C stays below
  // 2*length, so nothing wraps for lengths within int32.
  int64_t p = 1;
  while (p * maxPerRank < length)
    p *= 2;
  return std::max(minCp, p);
}

namespace {

using Sequence = std::pair<int32_t, int64_t>; // (id, padded length)

/// The work a rank of a sub-group of `size` ranks does for a sequence of
/// `length` tokens (attention's quadratic term, the scheduler's measure).
double workload(int64_t length, int64_t size) {
  return static_cast<double>(length * length) / static_cast<double>(size);
}

/// One microbatch of the dynamic-CP scheduler over the sequences left,
/// longest first: every rank's ids, and the sequences it leaves.
struct Microbatch {
  std::vector<std::vector<int32_t>> ids;
  std::vector<Sequence> leftovers;
};

/// Forms one microbatch (S3b's step): the placement, then the fill.
class MicrobatchFormer {
public:
  MicrobatchFormer(const std::vector<Sequence> &sequences, int64_t ranks,
                   int64_t maxPerRank, int64_t minCp,
                   std::optional<int64_t> maxNumSeqs)
      : sequences(sequences), ranks(ranks), maxPerRank(maxPerRank),
        minCp(minCp), maxNumSeqs(maxNumSeqs), lengths(ranks), ids(ranks),
        work(ranks, 0.0), rankGroup(ranks, -1) {}

  Expected<Microbatch> form() {
    const auto [firstId, firstLength] = sequences.front();
    const int64_t tallest = firstLength;
    cap = static_cast<double>(tallest) * static_cast<double>(maxPerRank) *
          (1.0 + kWorkloadCapDelta);
    const int64_t size = dynamicCpSizeNeeded(firstLength, maxPerRank, minCp);
    if (size > ranks)
      return makeError<Microbatch>(concat(
          "sequence ", firstId, " of ", firstLength, " padded tokens needs ",
          size, " CP ranks of C = ", maxPerRank, " rows; there are ", ranks,
          " DP x CP ranks"));
    std::vector<int64_t> members(size);
    std::iota(members.begin(), members.end(), int64_t(0));
    newGroup(firstId, firstLength, size, members);

    for (std::size_t i = 1; i < sequences.size(); ++i)
      place(sequences[i]);

    while (std::any_of(lengths.begin(), lengths.end(),
                       [](const auto &l) { return l.empty(); })) {
      Expected<bool> filled = fillEmptyRanksOnce();
      if (!filled)
        return makeError<Microbatch>(filled.error());
      if (!*filled) {
        if (Expected<bool> whole = fillWithWholeGroup(); !whole)
          return makeError<Microbatch>(whole.error());
        break;
      }
    }
    return Microbatch{std::move(ids), std::move(leftovers)};
  }

private:
  /// The reference scheduler's slack on the busiest rank's work.
  static constexpr double kWorkloadCapDelta = 0.05;

  struct Candidate {
    double projected;
    int64_t size;
    int64_t group; // -1: a new sub-group of `members`
    std::vector<int64_t> members;
  };

  double projectedMax(const std::vector<int64_t> &members, double cost) const {
    std::vector<bool> in(ranks, false);
    for (int64_t r : members)
      in[r] = true;
    double result = 0.0;
    for (int64_t r = 0; r < ranks; ++r)
      result = std::max(result, in[r] ? work[r] + cost : work[r]);
    return result;
  }

  void addTo(int64_t group, int32_t id, int64_t length) {
    const int64_t size = groupSize[group];
    packed[group] += static_cast<double>(length) / static_cast<double>(size);
    ++groupSeqs[group];
    for (int64_t r : groupMembers[group]) {
      lengths[r].push_back(length);
      work[r] += workload(length, size);
      ids[r].push_back(id);
    }
  }

  void newGroup(int32_t id, int64_t length, int64_t size,
                const std::vector<int64_t> &members) {
    const int64_t group = static_cast<int64_t>(groupSize.size());
    groupSize.push_back(size);
    groupMembers.push_back(members);
    packed.push_back(0.0);
    groupSeqs.push_back(0);
    for (int64_t r : members)
      rankGroup[r] = group;
    addTo(group, id, length);
  }

  /// A sequence joins the placement that keeps the busiest rank's work
  /// lowest (and within the cap): an existing sub-group of its size, or
  /// free ranks, for each power-of-two size from the one it needs.
  void place(const Sequence &sequence) {
    const auto [id, length] = sequence;
    std::optional<Candidate> best;
    for (int64_t size = dynamicCpSizeNeeded(length, maxPerRank, minCp);
         size <= ranks; size *= 2) {
      const double cost = workload(length, size);
      for (int64_t g = 0; g < static_cast<int64_t>(groupSize.size()); ++g) {
        if (groupSize[g] != size)
          continue;
        if (packed[g] + static_cast<double>(length) /
                            static_cast<double>(size) >
            static_cast<double>(maxPerRank))
          continue;
        if (maxNumSeqs && groupSeqs[g] >= *maxNumSeqs)
          continue;
        const double projected = projectedMax(groupMembers[g], cost);
        if (projected <= cap && (!best || projected < best->projected))
          best = Candidate{projected, size, g, {}};
      }
      std::vector<int64_t> free;
      for (int64_t r = 0; r < ranks; ++r)
        if (rankGroup[r] < 0)
          free.push_back(r);
      if (static_cast<int64_t>(free.size()) >= size) {
        std::stable_sort(free.begin(), free.end(), [&](int64_t a, int64_t b) {
          return work[a] < work[b];
        });
        free.resize(size);
        const double projected = projectedMax(free, cost);
        if (projected <= cap && (!best || projected < best->projected))
          best = Candidate{projected, size, -1, free};
      }
    }
    if (!best) {
      leftovers.push_back(sequence);
      return;
    }
    if (best->group >= 0)
      addTo(best->group, id, length);
    else
      newGroup(id, length, best->size, best->members);
  }

  /// Empty ranks (a tail of the ranks) are taken by doubling a smallest
  /// sub-group that can grow into them, the sub-groups after it moving up;
  /// false when none can.
  Expected<bool> fillEmptyRanksOnce() {
    int64_t firstEmpty = -1;
    for (int64_t r = 0; r < ranks; ++r)
      if (lengths[r].empty()) {
        firstEmpty = r;
        break;
      }
    if (firstEmpty < 0)
      return false;
    for (int64_t r = firstEmpty; r < ranks; ++r)
      if (!lengths[r].empty())
        return makeError<bool>(concat(
            "internal error: dynamic-CP rank ", r,
            " holds sequences after the empty rank ", firstEmpty));
    if (groupSize.empty())
      return false;
    const int64_t smallest =
        *std::min_element(groupSize.begin(), groupSize.end());
    const int64_t grown = std::min(smallest * 2, ranks);
    const int64_t needed = grown - smallest;
    for (int64_t g = 0; g < static_cast<int64_t>(groupSize.size()); ++g) {
      if (groupSize[g] != smallest)
        continue;
      const int64_t start = groupMembers[g].front();
      const int64_t end = groupMembers[g].back();
      if (end + 1 > firstEmpty || end + needed >= ranks)
        continue;
      // The sub-groups between it and the empty ranks move up by `needed`:
      // they need that many empty ranks. megatron-core's scheduler checks
      // only the doubled group too, and fails here with an IndexError
      // (fill_empty_gpus_once, data_schedule_utils.py:771-775 on dev).
      if (firstEmpty > end + 1 && firstEmpty + needed > ranks)
        return makeError<bool>(concat(
            "dynamic CP over ", ranks, " ranks cannot fill the empty ranks ",
            firstEmpty, "..", ranks - 1, ": doubling the sub-group of ranks ",
            start, "..", end, " to ", grown,
            " ranks pushes the sub-groups after it past rank ", ranks - 1,
            " (megatron-core's scheduler fails on this batch too: an "
            "IndexError in fill_empty_gpus_once)"));
      std::vector<std::vector<int64_t>> newLengths(ranks);
      std::vector<std::vector<int32_t>> newIds(ranks);
      std::vector<double> newWork(ranks, 0.0);
      for (int64_t r = 0; r < start; ++r) {
        newLengths[r] = lengths[r];
        newIds[r] = ids[r];
        newWork[r] = work[r];
      }
      double grownWork = 0.0;
      for (int64_t length : lengths[end])
        grownWork += workload(length, grown);
      for (int64_t r = start; r <= end + needed; ++r) {
        newLengths[r] = lengths[end];
        newIds[r] = ids[end];
        newWork[r] = grownWork;
      }
      for (int64_t r = end + 1; r < firstEmpty; ++r) {
        newLengths[r + needed] = lengths[r];
        newIds[r + needed] = ids[r];
        newWork[r + needed] = work[r];
      }
      groupSize[g] = grown;
      groupMembers[g].resize(end + needed - start + 1);
      std::iota(groupMembers[g].begin(), groupMembers[g].end(), start);
      for (int64_t other = 0; other < static_cast<int64_t>(groupSize.size());
           ++other) {
        if (other == g)
          continue;
        std::vector<int64_t> &members = groupMembers[other];
        if (*std::min_element(members.begin(), members.end()) > end)
          for (int64_t &r : members)
            r += needed;
      }
      lengths = std::move(newLengths);
      ids = std::move(newIds);
      work = std::move(newWork);
      return true;
    }
    return false;
  }

  /// The fallback: the whole DP x CP group takes the longest sequences that
  /// fit its C rows per rank; the rest are left for the next microbatch.
  Expected<bool> fillWithWholeGroup() {
    std::vector<int64_t> selectedLengths;
    std::vector<int32_t> selectedIds;
    std::vector<Sequence> rest;
    double share = 0.0;
    for (const Sequence &sequence : sequences) {
      const double perRank = static_cast<double>(sequence.second) /
                             static_cast<double>(ranks);
      const bool room =
          !maxNumSeqs ||
          static_cast<int64_t>(selectedIds.size()) < *maxNumSeqs;
      if (room && share + perRank <= static_cast<double>(maxPerRank)) {
        selectedLengths.push_back(sequence.second);
        selectedIds.push_back(sequence.first);
        share += perRank;
      } else {
        rest.push_back(sequence);
      }
    }
    if (selectedIds.empty())
      return makeError<bool>(concat("no sequence fits the whole DP x CP group of ",
                              ranks, " ranks of C = ", maxPerRank, " rows"));
    lengths.assign(ranks, selectedLengths);
    ids.assign(ranks, selectedIds);
    leftovers = std::move(rest);
    return true;
  }

  const std::vector<Sequence> &sequences;
  const int64_t ranks, maxPerRank, minCp;
  const std::optional<int64_t> maxNumSeqs;
  double cap = 0.0;
  std::vector<std::vector<int64_t>> lengths;
  std::vector<std::vector<int32_t>> ids;
  std::vector<double> work;
  std::vector<int64_t> rankGroup;
  std::vector<int64_t> groupSize;
  std::vector<std::vector<int64_t>> groupMembers;
  std::vector<double> packed;
  std::vector<int64_t> groupSeqs;
  std::vector<Sequence> leftovers;
};

} // namespace

namespace {

/// One microbatch of dynamic CP: the ids of each DP x CP rank.
using RankIds = std::vector<std::vector<int32_t>>;

bool holds(const std::vector<int32_t> &ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

/// The [lo, hi) of Python's list[start:stop] on a list of `size` entries:
/// each bound negative from the end and clamped to [0, size], none the
/// list's end, hi at least lo.
std::pair<int64_t, int64_t> sliceRange(std::optional<int64_t> start,
                                       std::optional<int64_t> stop,
                                       int64_t size) {
  auto bound = [size](std::optional<int64_t> b, int64_t otherwise) {
    if (!b)
      return otherwise;
    return std::clamp<int64_t>(*b < 0 ? *b + size : *b, 0, size);
  };
  const int64_t lo = bound(start, 0);
  return {lo, std::max(lo, bound(stop, size))};
}

/// Python's list[start:stop], a copy.
RankIds sliceOf(const RankIds &list, std::optional<int64_t> start,
                std::optional<int64_t> stop) {
  auto [lo, hi] = sliceRange(start, stop, static_cast<int64_t>(list.size()));
  return RankIds(list.begin() + lo, list.begin() + hi);
}

/// Python's list[start:stop] = values: the slice is replaced, and the list
/// grows or shrinks when the lengths differ, as Python's does.
void assignSlice(RankIds &list, std::optional<int64_t> start,
                 std::optional<int64_t> stop, RankIds values) {
  auto [lo, hi] = sliceRange(start, stop, static_cast<int64_t>(list.size()));
  list.erase(list.begin() + lo, list.begin() + hi);
  list.insert(list.begin() + lo, std::make_move_iterator(values.begin()),
              std::make_move_iterator(values.end()));
}

/// A slice end of Python's `-empty + size if -empty + size < 0 else None`.
std::optional<int64_t> endBefore(int64_t empty, int64_t size) {
  if (size - empty < 0)
    return size - empty;
  return std::nullopt;
}

/// One step of filling a microbatch whose last ranks are empty: the
/// leftmost sub-group of the smallest size (the sub-groups are in
/// non-increasing size order) is doubled onto the next ranks, those after
/// it moving right; when all have one size, the first is. The framework's
/// fill_empty (data_schedule_utils.py:876-902 on dev), with its slice
/// arithmetic. Returns whether it changed anything.
Expected<bool> fillEmptyStep(RankIds &ranks) {
  const int64_t count = static_cast<int64_t>(ranks.size());
  const int64_t empty = std::count_if(
      ranks.begin(), ranks.end(), [](const auto &ids) { return ids.empty(); });
  int64_t i = count - 1 - empty;
  int64_t previous = 0;
  while (i >= 0) {
    if (ranks[i].empty())
      return makeError<bool>(concat("an empty rank ", i,
                                    " before the last non-empty one"));
    const int32_t first = ranks[i].front();
    int64_t size = 0;
    while (i >= 0 && holds(ranks[i], first)) {
      ++size;
      --i;
    }
    if (size > previous && previous != 0) {
      const int64_t start = i + 1 + size;
      assignSlice(ranks, start + 2 * previous, endBefore(empty, previous),
                  sliceOf(ranks, start + previous, -empty));
      assignSlice(ranks, start + previous, start + 2 * previous,
                  sliceOf(ranks, start, start + previous));
      return true;
    }
    if (size <= empty && i == -1) {
      assignSlice(ranks, 2 * size, endBefore(empty, size),
                  sliceOf(ranks, size, -empty));
      assignSlice(ranks, size, 2 * size, sliceOf(ranks, 0, size));
      return true;
    }
    previous = size;
  }
  return false;
}

/// The framework's fill_empty_by_expanding_cp: fill steps until the last
/// rank holds sequences.
Expected<RankIds> fillByExpandingCp(RankIds ranks) {
  while (!ranks.empty() && ranks.back().empty()) {
    Expected<bool> changed = fillEmptyStep(ranks);
    if (!changed)
      return makeError<RankIds>(changed.error());
    if (!*changed)
      return makeError<RankIds>(
          "no sub-group can be widened onto the empty ranks");
  }
  if (ranks.empty())
    return makeError<RankIds>("a microbatch with no ranks");
  return ranks;
}

/// The framework's split_group (data_schedule_utils.py:843-873 on dev): the
/// sub-groups (non-increasing sizes) cut where the ranks reach half, each
/// half widened onto the whole DP x CP group; (second half, first half), or
/// none for a microbatch of one sub-group.
Expected<std::optional<std::pair<RankIds, RankIds>>>
splitMicrobatch(const RankIds &ranks) {
  using Result = std::optional<std::pair<RankIds, RankIds>>;
  const int64_t total = static_cast<int64_t>(ranks.size());
  std::vector<int64_t> bounds{0};
  int64_t previous = 0;
  while (bounds.back() != total) {
    const int64_t start = bounds.back();
    if (ranks[start].empty())
      return makeError<Result>(concat("rank ", start, " holds no sequence"));
    const int32_t first = ranks[start].front();
    int64_t size = 0;
    for (int64_t r = start; r < total && holds(ranks[r], first); ++r)
      ++size;
    if (previous != 0 && size > previous)
      return makeError<Result>(concat(
          "its sub-group sizes are not non-increasing (", previous, " then ",
          size, ")"));
    bounds.push_back(start + size);
    previous = size;
  }
  if (bounds.size() == 2)
    return Result();
  std::size_t k = 0;
  while (bounds[k] < total / 2)
    ++k;
  const int64_t cut = bounds[k];
  RankIds first = sliceOf(ranks, 0, cut), second = sliceOf(ranks, cut, total);
  first.resize(total);
  second.resize(total);
  Expected<RankIds> widenedFirst = fillByExpandingCp(std::move(first));
  if (!widenedFirst)
    return makeError<Result>(widenedFirst.error());
  Expected<RankIds> widenedSecond = fillByExpandingCp(std::move(second));
  if (!widenedSecond)
    return makeError<Result>(widenedSecond.error());
  return Result(std::make_pair(std::move(*widenedSecond),
                               std::move(*widenedFirst)));
}

} // namespace

Expected<std::vector<std::vector<std::vector<int32_t>>>>
alignDynamicCpMicrobatches(std::vector<std::vector<std::vector<int32_t>>> groups,
                           int64_t multiple) {
  using Result = std::vector<std::vector<std::vector<int32_t>>>;
  if (multiple < 1)
    return makeError<Result>(concat("microbatch_group_size_per_vp_stage = ",
                                    multiple, " must be >= 1"));
  const int64_t count = static_cast<int64_t>(groups.size());
  int64_t remainder = (multiple - count % multiple) % multiple;
  int64_t i = count - 1;
  int64_t attempts = 0;
  while (remainder > 0) {
    if (i < 0) {
      if (attempts >= static_cast<int64_t>(groups.size()))
        return makeError<Result>(concat(
            "cannot make the ", count,
            " microbatches a multiple of microbatch_group_size_per_vp_stage = ",
            multiple, " (", groups.size(),
            " after splitting): no microbatch has more than one sub-group to "
            "split"));
      i = static_cast<int64_t>(groups.size()) - 1;
    }
    Expected<std::optional<std::pair<RankIds, RankIds>>> halves =
        splitMicrobatch(groups[i]);
    if (!halves)
      return makeError<Result>(
          concat("splitting microbatch ", i, ": ", halves.error()));
    if (*halves) {
      groups[i] = std::move((*halves)->first);
      groups.push_back(std::move((*halves)->second));
      --remainder;
      attempts = 0;
    } else {
      ++attempts;
    }
    --i;
  }
  return groups;
}

Expected<DynamicCpGroups>
dynamicCpGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                int64_t ranks, int64_t minCp,
                std::optional<int64_t> maxNumSeqs, int64_t microbatchGroupSize) {
  if (maxPerRank < 1 || ranks < 1)
    return makeError<DynamicCpGroups>(
        concat("max_seqlen_per_dp_cp_rank C = ", maxPerRank,
               " and the DP x CP rank count ", ranks, " must be >= 1"));
  if (minCp < 1 || (minCp & (minCp - 1)) || minCp > ranks)
    return makeError<DynamicCpGroups>(
        concat("min_dynamic_context_parallel_size = ", minCp,
               " must be a power of two in [1, ", ranks,
               "] (the DP x CP rank count)"));
  if (maxNumSeqs && *maxNumSeqs < 1)
    return makeError<DynamicCpGroups>(
        concat("sequence cap K = ", *maxNumSeqs, " must be >= 1"));
  std::vector<Sequence> sequences;
  for (std::size_t i = 0; i < paddedLengths.size(); ++i) {
    if (paddedLengths[i] < 0)
      return makeError<DynamicCpGroups>(concat(
          "padded length p[", i, "] = ", paddedLengths[i], " is negative"));
    sequences.emplace_back(static_cast<int32_t>(i), paddedLengths[i]);
  }
  std::stable_sort(sequences.begin(), sequences.end(),
                   [](const Sequence &a, const Sequence &b) {
                     return a.second > b.second;
                   });

  std::vector<RankIds> formed;
  while (!sequences.empty()) {
    MicrobatchFormer former(sequences, ranks, maxPerRank, minCp, maxNumSeqs);
    Expected<Microbatch> microbatch = former.form();
    if (!microbatch)
      return makeError<DynamicCpGroups>(microbatch.error());
    formed.push_back(std::move(microbatch->ids));
    sequences = std::move(microbatch->leftovers);
  }
  // With virtual pipeline stages the count is made a multiple of the
  // microbatch group, as the framework does when the group is above one.
  if (microbatchGroupSize != 1) {
    Expected<std::vector<RankIds>> aligned =
        alignDynamicCpMicrobatches(std::move(formed), microbatchGroupSize);
    if (!aligned)
      return makeError<DynamicCpGroups>(aligned.error());
    formed = std::move(*aligned);
  }

  DynamicCpGroups result;
  for (RankIds &ids : formed) {
    if (static_cast<int64_t>(ids.size()) != ranks ||
        std::any_of(ids.begin(), ids.end(),
                    [](const auto &v) { return v.empty(); }))
      return makeError<DynamicCpGroups>(concat(
          "internal error: dynamic-CP microbatch ", result.groups.size(),
          " does not give each of the ", ranks, " ranks sequences"));
    // A rank's CP size: the ranks that share its ids; its sub-group is
    // the block of that many ranks holding it, as the framework's dynamic
    // process groups are (blocks of each power of two over the DP x CP
    // ranks). The scheduler places them so; checked here.
    std::vector<int32_t> sizes(ranks);
    for (int64_t r = 0; r < ranks; ++r) {
      const int32_t first = ids[r].front();
      sizes[r] = static_cast<int32_t>(
          std::count_if(ids.begin(), ids.end(),
                        [&](const std::vector<int32_t> &v) {
                          return holds(v, first);
                        }));
    }
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t start = r - r % sizes[r];
      for (int64_t k = start; k < start + sizes[r]; ++k)
        if (k >= ranks || ids[k] != ids[r])
          return makeError<DynamicCpGroups>(concat(
              "internal error: dynamic-CP rank ", r, " of microbatch ",
              result.groups.size(), " has CP size ", sizes[r],
              " but its block of ranks does not share its sequences"));
    }
    result.groups.push_back(std::move(ids));
    result.cpSizes.push_back(std::move(sizes));
  }
  return result;
}

} // namespace reference
} // namespace thdc
