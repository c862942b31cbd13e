//===- DynamicCp.cpp - S3b dynamic-CP scheduling --------------------------===//
//
// Section S3b of docs/semantics.md: the CP size a sequence needs
// (dynamicCpSizeNeeded) and the dynamic-CP scheduler (dynamicCpGroups),
// which forms each microbatch greedily over sub-groups of the DP x CP
// ranks; its alignment to virtual pipeline stages is in
// DynamicCpAlignment.cpp. The host planner (planner/Planner.h) builds on
// these.
//
//===----------------------------------------------------------------------===//

#include "reference/DynamicCp.h"
#include "reference/Internal.h"

#include <algorithm>
#include <numeric>

namespace thdc {
namespace reference {

using namespace internal;

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

  Result<Microbatch> form() {
    const auto [firstId, firstLength] = sequences.front();
    const int64_t tallest = firstLength;
    cap = static_cast<double>(tallest) * static_cast<double>(maxPerRank) *
          (1.0 + kWorkloadCapDelta);
    const int64_t size = dynamicCpSizeNeeded(firstLength, maxPerRank, minCp);
    if (size > ranks)
      return Status::error(
          concat("sequence ", firstId, " of ", firstLength,
                 " padded tokens needs ", size, " CP ranks of C = ", maxPerRank,
                 " rows; there are ", ranks, " DP x CP ranks"));
    std::vector<int64_t> members(size);
    std::iota(members.begin(), members.end(), int64_t(0));
    newGroup(firstId, firstLength, size, members);

    for (std::size_t i = 1; i < sequences.size(); ++i)
      place(sequences[i]);

    while (std::any_of(lengths.begin(), lengths.end(),
                       [](const auto &l) { return l.empty(); })) {
      Result<bool> filled = fillEmptyRanksOnce();
      if (!filled)
        return filled.status();
      if (!*filled) {
        if (Result<bool> whole = fillWithWholeGroup(); !whole)
          return whole.status();
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
  Result<bool> fillEmptyRanksOnce() {
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
        return Status::error(concat("internal error: dynamic-CP rank ", r,
                                    " holds sequences after the empty rank ",
                                    firstEmpty));
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
        return Status::error(concat(
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
  Result<bool> fillWithWholeGroup() {
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
      return Status::error(
          concat("no sequence fits the whole DP x CP group of ", ranks,
                 " ranks of C = ", maxPerRank, " rows"));
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

Result<DynamicCpGroups>
dynamicCpGroups(const std::vector<int32_t> &paddedLengths, int64_t maxPerRank,
                int64_t ranks, int64_t minCp, std::optional<int64_t> maxNumSeqs,
                int64_t microbatchGroupSize) {
  if (maxPerRank < 1 || ranks < 1)
    return Status::error(concat("max_seqlen_per_dp_cp_rank C = ", maxPerRank,
                                " and the DP x CP rank count ", ranks,
                                " must be >= 1"));
  if (minCp < 1 || (minCp & (minCp - 1)) || minCp > ranks)
    return Status::error(concat("min_dynamic_context_parallel_size = ", minCp,
                                " must be a power of two in [1, ", ranks,
                                "] (the DP x CP rank count)"));
  if (maxNumSeqs && *maxNumSeqs < 1)
    return Status::error(
        concat("sequence cap K = ", *maxNumSeqs, " must be >= 1"));
  std::vector<Sequence> sequences;
  for (std::size_t i = 0; i < paddedLengths.size(); ++i) {
    if (paddedLengths[i] < 0)
      return Status::error(concat("padded length p[", i,
                                  "] = ", paddedLengths[i], " is negative"));
    sequences.emplace_back(static_cast<int32_t>(i), paddedLengths[i]);
  }
  std::stable_sort(sequences.begin(), sequences.end(),
                   [](const Sequence &a, const Sequence &b) {
                     return a.second > b.second;
                   });

  std::vector<RankIds> formed;
  while (!sequences.empty()) {
    MicrobatchFormer former(sequences, ranks, maxPerRank, minCp, maxNumSeqs);
    Result<Microbatch> microbatch = former.form();
    if (!microbatch)
      return microbatch.status();
    formed.push_back(std::move(microbatch->ids));
    sequences = std::move(microbatch->leftovers);
  }
  // With virtual pipeline stages the count is made a multiple of the
  // microbatch group, as the framework does when the group is above one.
  if (microbatchGroupSize != 1) {
    Result<std::vector<RankIds>> aligned =
        alignDynamicCpMicrobatches(std::move(formed), microbatchGroupSize);
    if (!aligned)
      return aligned.status();
    formed = std::move(*aligned);
  }

  DynamicCpGroups result;
  for (RankIds &ids : formed) {
    if (static_cast<int64_t>(ids.size()) != ranks ||
        std::any_of(ids.begin(), ids.end(),
                    [](const auto &v) { return v.empty(); }))
      return Status::error(
          concat("internal error: dynamic-CP microbatch ", result.groups.size(),
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
          return Status::error(
              concat("internal error: dynamic-CP rank ", r, " of microbatch ",
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
