//===- DynamicCp.cpp - Host-side dynamic-CP planner -----------------------===//
//
// The scheduling is the reference's (reference::dynamicCpGroups); this file
// adds the S2 cap, the record of the settings, the plan validation and the
// per-rank inputs.
//
//===----------------------------------------------------------------------===//

#include "planner/DynamicCp.h"
#include "planner/Detail.h"

#include "reference/CheckedArithmetic.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <set>
#include <string>

using namespace thdc;
using namespace thdc::planner;
using thdc::planner::detail::concat;

namespace {


/// "none" or the cap, for messages.
std::string capText(const std::optional<int64_t> &cap) {
  return cap ? std::to_string(*cap) : std::string("none");
}

/// An error naming the first violated promise of microbatch m of `plan`;
/// `packOf` records the microbatch of every id seen so far.
Status checkMicrobatchInvariants(const DynamicCpPlan &plan, std::size_t m,
                                 const std::vector<int32_t> &lengths,
                                 std::vector<int64_t> &packOf) {
  const int64_t ranks = plan.ranks();
  const std::vector<Pack> &group = plan.groups[m];
  const std::vector<int32_t> &sizes = plan.cpSizes[m];
  if (int64_t(group.size()) != ranks || int64_t(sizes.size()) != ranks)
    return Status::error(concat("microbatch ", m, " has ", group.size(),
                                " groups and ", sizes.size(),
                                " CP sizes, not dp*cp = ", ranks));
  for (int64_t j = 0; j < ranks;) {
    const int64_t size = sizes[std::size_t(j)];
    const bool powerOfTwo = size >= 1 && (size & (size - 1)) == 0;
    if (size < plan.minCpSize || size > ranks || (!powerOfTwo && size != ranks))
      return Status::error(
          concat("microbatch ", m, " gives rank ", j, " CP size ", size,
                 ", not a power of two in [min_cp_size = ", plan.minCpSize,
                 ", ", ranks, "] nor all ", ranks, " ranks"));
    if (j % size)
      return Status::error(concat("microbatch ", m, ": the sub-group of rank ",
                                  j, " (CP size ", size,
                                  ") does not start at a multiple of ", size));
    if (j + size > ranks)
      return Status::error(concat("microbatch ", m, ": the sub-group of rank ",
                                  j, " (CP size ", size,
                                  ") passes the last rank ", ranks - 1));
    const Pack &ids = group[std::size_t(j)];
    for (int64_t k = j + 1; k < j + size; ++k)
      if (group[std::size_t(k)] != ids || sizes[std::size_t(k)] != size)
        return Status::error(concat("microbatch ", m, ": rank ", k,
                                    " is in the sub-group "
                                    "of rank ",
                                    j,
                                    " but has other ids or another CP size"));
    if (ids.empty())
      return Status::error(
          concat("microbatch ", m, " leaves rank ", j, " empty"));
    if (plan.maxRealSeqs && int64_t(ids.size()) > *plan.maxRealSeqs)
      return Status::error(concat(
          "microbatch ", m, " gives the sub-group of rank ", j, " ", ids.size(),
          " sequences, more than the cap K = ", *plan.maxRealSeqs));
    int64_t tokens = 0;
    for (int32_t id : ids) {
      if (id < 0 || std::size_t(id) >= lengths.size())
        return Status::error(concat("microbatch ", m, " gives rank ", j,
                                    " sequence id ", id, ", outside [0, ",
                                    lengths.size(), ")"));
      if (packOf[std::size_t(id)] >= 0)
        return Status::error(concat("sequence ", id, " is in microbatch ",
                                    packOf[std::size_t(id)],
                                    " and again in microbatch ", m));
      packOf[std::size_t(id)] = int64_t(m);
      tokens += lengths[std::size_t(id)];
      const int64_t needed = reference::dynamicCpSizeNeeded(
          lengths[std::size_t(id)], plan.C, plan.minCpSize);
      if (needed > size)
        return Status::error(concat("microbatch ", m, " puts sequence ", id,
                                    " (", lengths[std::size_t(id)],
                                    " tokens) on ", size, " ranks; it needs ",
                                    needed));
    }
    if (tokens > plan.C * size)
      return Status::error(
          concat("microbatch ", m, " gives the sub-group of rank ", j, " ",
                 tokens, " tokens, more than C*", size, " = ", plan.C * size));
    j += size;
  }
  return Status();
}

/// An error naming the first violated promise of `plan` for these lengths,
/// cap and settings.
Status checkInvariants(const DynamicCpPlan &plan,
                       const std::vector<int32_t> &lengths,
                       const std::optional<int64_t> &cap,
                       const PlannerConfig &config, int64_t minCpSize) {
  if (plan.C != config.maxSeqlenPerRank || plan.dp != config.dp ||
      plan.cp != config.cp || plan.minCpSize != minCpSize)
    return Status::error(
        concat("plan records C = ", plan.C, ", dp = ", plan.dp,
               ", cp = ", plan.cp, ", min_cp_size = ", plan.minCpSize,
               " but the settings have ", config.maxSeqlenPerRank, ", ",
               config.dp, ", ", config.cp, ", ", minCpSize));
  if (plan.maxRealSeqs != cap)
    return Status::error(concat("plan records sequence cap ",
                                capText(plan.maxRealSeqs), " but S2 gives ",
                                capText(cap)));
  if (plan.lengths != lengths)
    return Status::error("plan records other lengths than it is checked with");
  if (plan.cpSizes.size() != plan.groups.size())
    return Status::error(concat("plan has ", plan.groups.size(),
                                " microbatches but ", plan.cpSizes.size(),
                                " rows of CP sizes"));
  const int64_t multiple = config.vppGroup.value_or(1);
  if (multiple > 1 && plan.numMicrobatches() % multiple)
    return Status::error(concat("plan has ", plan.numMicrobatches(),
                                " microbatches, not a multiple of "
                                "microbatch_group_size_per_vp_stage = ",
                                multiple));
  std::vector<int64_t> packOf(lengths.size(), -1);
  for (std::size_t m = 0; m < plan.groups.size(); ++m)
    if (Status valid = checkMicrobatchInvariants(plan, m, lengths, packOf);
        !valid)
      return valid;
  for (std::size_t id = 0; id < lengths.size(); ++id)
    if (packOf[id] < 0)
      return Status::error(concat("sequence ", id, " is in no microbatch"));
  return Status();
}

/// Checks the settings a plan is made or checked with and returns the S2
/// cap they give. The reference owns the scheduler's parameter checks (C,
/// minCpSize, K, the microbatch group): running it on an empty batch
/// applies exactly those, with its messages.
Result<std::optional<int64_t>> checkSettings(const PlannerConfig &config,
                                             int64_t minCpSize) {
  if (config.cp < 1 || config.dp < 1)
    return Status::error(concat("cp and dp must be >= 1; got cp=", config.cp,
                                ", dp=", config.dp));
  const std::optional<int64_t> ranks =
      reference::checkedMul(config.dp, config.cp);
  if (!ranks)
    return Status::error(concat("dp*cp = ", config.dp, "*", config.cp,
                                " overflows int64"));
  Result<std::optional<int64_t>> cap = plannerSequenceCap(config);
  if (!cap)
    return cap.status();
  Result<reference::DynamicCpGroups> parameters =
      reference::dynamicCpGroups({}, config.maxSeqlenPerRank, *ranks, minCpSize,
                                 *cap, config.vppGroup.value_or(1));
  if (!parameters)
    return parameters.status();
  // A sub-group's budget C*size is then defined for every size.
  if (!reference::checkedMul(config.maxSeqlenPerRank, *ranks))
    return Status::error(concat("C*dp*cp = ", config.maxSeqlenPerRank, "*",
                                *ranks, " overflows int64"));
  return cap;
}

} // namespace

std::vector<int32_t> DynamicCpPlan::sizes() const {
  std::set<int32_t> used;
  for (const std::vector<int32_t> &row : cpSizes)
    used.insert(row.begin(), row.end());
  return std::vector<int32_t>(used.begin(), used.end());
}

Status DynamicCpPlan::checkIndex(int64_t microbatch, int64_t rank) const {
  if (microbatch < 0 || microbatch >= numMicrobatches() || rank < 0 ||
      rank >= ranks())
    return Status::error(concat("microbatch ", microbatch, ", rank ", rank,
                                ": the plan has ", numMicrobatches(),
                                " microbatches over ", ranks(), " ranks"));
  return Status();
}

int64_t DynamicCpPlan::localRank(int64_t microbatch, int64_t rank) const {
  assert(checkIndex(microbatch, rank) && "localRank(m, rank) out of range");
  return rank % cpSizes[std::size_t(microbatch)][std::size_t(rank)];
}

std::pair<int64_t, int64_t> DynamicCpPlan::subGroup(int64_t microbatch,
                                                    int64_t rank) const {
  const int64_t first = rank - localRank(microbatch, rank);
  return {first, first + cpSizes[std::size_t(microbatch)][std::size_t(rank)]};
}

int64_t DynamicCpPlan::tokens(int64_t microbatch, int64_t rank) const {
  assert(checkIndex(microbatch, rank) && "tokens(m, rank) out of range");
  int64_t total = 0;
  for (int32_t id : groups[std::size_t(microbatch)][std::size_t(rank)])
    total += lengths[std::size_t(id)];
  return total;
}

Result<DynamicCpPlan>
thdc::planner::dynamicCpPlan(const std::vector<int32_t> &paddedLengths,
                             const PlannerConfig &config, int64_t minCpSize) {
  Result<std::optional<int64_t>> cap = checkSettings(config, minCpSize);
  if (!cap)
    return cap.status();
  Result<reference::DynamicCpGroups> scheduled = reference::dynamicCpGroups(
      paddedLengths, config.maxSeqlenPerRank, config.dp * config.cp, minCpSize,
      *cap, config.vppGroup.value_or(1));
  if (!scheduled)
    return scheduled.status();
  DynamicCpPlan plan;
  plan.groups = std::move(scheduled->groups);
  plan.cpSizes = std::move(scheduled->cpSizes);
  plan.lengths = paddedLengths;
  plan.C = config.maxSeqlenPerRank;
  plan.dp = config.dp;
  plan.cp = config.cp;
  plan.minCpSize = minCpSize;
  plan.maxRealSeqs = *cap;
  if (Status valid = checkDynamicCpPlan(plan, paddedLengths, config, minCpSize);
      !valid)
    return Status::error("dynamic-CP plan is invalid: " + valid.message());
  return plan;
}

Status thdc::planner::checkDynamicCpPlan(const DynamicCpPlan &plan,
                                         const std::vector<int32_t> &paddedLengths,
                                         const PlannerConfig &config,
                                         int64_t minCpSize) {
  Result<std::optional<int64_t>> cap = checkSettings(config, minCpSize);
  if (!cap)
    return Status::error("the settings admit no plan: " +
                         cap.status().message());
  return checkInvariants(plan, paddedLengths, *cap, config, minCpSize);
}

Result<DynamicCpInputs>
thdc::planner::microbatchInputs(const DynamicCpPlan &plan, int64_t rank,
                                int64_t maxPackedSequences) {
  DynamicCpInputs inputs;
  Result<int64_t> ranks = detail::startInputs(
      inputs, plan.dp, plan.cp, rank, maxPackedSequences,
      plan.numMicrobatches());
  if (!ranks)
    return ranks.status();
  for (std::size_t m = 0; m < plan.groups.size(); ++m) {
    if (int64_t(plan.groups[m].size()) != *ranks ||
        m >= plan.cpSizes.size() || int64_t(plan.cpSizes[m].size()) != *ranks)
      return Status::error(concat("microbatch ", m, " has ",
                                  plan.groups[m].size(), " groups, or its CP "
                                  "sizes are not dp*cp = ", *ranks));
    if (Status status = detail::appendPack(
            inputs, m, plan.groups[m][std::size_t(rank)], rank);
        !status)
      return status;
    inputs.cpSizes.push_back(plan.cpSizes[m][std::size_t(rank)]);
  }
  return inputs;
}
