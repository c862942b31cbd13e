//===- DynamicCpAlignment.cpp - S3b with virtual pipeline stages ----------===//
//
// Section S3b of docs/semantics.md with virtual pipeline stages: the
// framework's align_sample_id_groups (alignDynamicCpMicrobatches), which
// splits microbatches until their count is a multiple of the microbatch
// group, written with its Python slice arithmetic.
//
//===----------------------------------------------------------------------===//

#include "reference/DynamicCp.h"
#include "reference/Internal.h"

#include <algorithm>

namespace thdc {
namespace reference {

using namespace internal;

namespace {

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
Result<bool> fillEmptyStep(RankIds &ranks) {
  const int64_t count = static_cast<int64_t>(ranks.size());
  const int64_t empty = std::count_if(
      ranks.begin(), ranks.end(), [](const auto &ids) { return ids.empty(); });
  int64_t i = count - 1 - empty;
  int64_t previous = 0;
  while (i >= 0) {
    if (ranks[i].empty())
      return Status::error(
          concat("an empty rank ", i, " before the last non-empty one"));
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
/// rank holds sequences. A step whose slice assignment changes the list's
/// length (a sub-group doubled past the last rank, when the rank count is
/// not a power of two) is refused: the framework returns such a microbatch,
/// of more or fewer ranks than there are.
Result<RankIds> fillByExpandingCp(RankIds ranks) {
  const int64_t count = static_cast<int64_t>(ranks.size());
  while (!ranks.empty() && ranks.back().empty()) {
    Result<bool> changed = fillEmptyStep(ranks);
    if (!changed)
      return changed.status();
    if (!*changed)
      return Status::error("no sub-group can be widened onto the empty ranks");
    if (static_cast<int64_t>(ranks.size()) != count)
      return Status::error(concat(
          "widening a sub-group onto the empty ranks makes a microbatch of ",
          ranks.size(), " ranks, not the ", count,
          " DP x CP ranks (megatron-core's align_sample_id_groups returns "
          "such a microbatch for this batch)"));
  }
  if (ranks.empty())
    return Status::error("a microbatch with no ranks");
  return ranks;
}

/// The framework's split_group (data_schedule_utils.py:843-873 on dev): the
/// sub-groups (non-increasing sizes) cut where the ranks reach half, each
/// half widened onto the whole DP x CP group; (second half, first half), or
/// none for a microbatch of one sub-group.
Result<std::optional<std::pair<RankIds, RankIds>>>
splitMicrobatch(const RankIds &ranks) {
  using Output = std::optional<std::pair<RankIds, RankIds>>;
  const int64_t total = static_cast<int64_t>(ranks.size());
  std::vector<int64_t> bounds{0};
  int64_t previous = 0;
  while (bounds.back() != total) {
    const int64_t start = bounds.back();
    if (ranks[start].empty())
      return Status::error(concat("rank ", start, " holds no sequence"));
    const int32_t first = ranks[start].front();
    int64_t size = 0;
    for (int64_t r = start; r < total && holds(ranks[r], first); ++r)
      ++size;
    if (previous != 0 && size > previous)
      return Status::error(
          concat("its sub-group sizes are not non-increasing (", previous,
                 " then ", size, ")"));
    bounds.push_back(start + size);
    previous = size;
  }
  if (bounds.size() == 2)
    return Output();
  std::size_t k = 0;
  while (bounds[k] < total / 2)
    ++k;
  const int64_t cut = bounds[k];
  RankIds first = sliceOf(ranks, 0, cut), second = sliceOf(ranks, cut, total);
  first.resize(total);
  second.resize(total);
  Result<RankIds> widenedFirst = fillByExpandingCp(std::move(first));
  if (!widenedFirst)
    return widenedFirst.status();
  Result<RankIds> widenedSecond = fillByExpandingCp(std::move(second));
  if (!widenedSecond)
    return widenedSecond.status();
  return Output(
      std::make_pair(std::move(*widenedSecond), std::move(*widenedFirst)));
}

} // namespace

Result<std::vector<std::vector<std::vector<int32_t>>>>
alignDynamicCpMicrobatches(
    std::vector<std::vector<std::vector<int32_t>>> groups, int64_t multiple) {
  if (multiple < 1)
    return Status::error(concat(
        "microbatch_group_size_per_vp_stage = ", multiple, " must be >= 1"));
  const int64_t count = static_cast<int64_t>(groups.size());
  int64_t remainder = (multiple - count % multiple) % multiple;
  int64_t i = count - 1;
  int64_t attempts = 0;
  while (remainder > 0) {
    if (i < 0) {
      if (attempts >= static_cast<int64_t>(groups.size()))
        return Status::error(concat(
            "cannot make the ", count,
            " microbatches a multiple of microbatch_group_size_per_vp_stage = ",
            multiple, " (", groups.size(),
            " after splitting): no microbatch has more than one sub-group to "
            "split"));
      i = static_cast<int64_t>(groups.size()) - 1;
    }
    Result<std::optional<std::pair<RankIds, RankIds>>> halves =
        splitMicrobatch(groups[i]);
    if (!halves)
      return Status::error(
          concat("splitting microbatch ", i, ": ", halves.status().message()));
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

} // namespace reference
} // namespace thdc
