//===- Planner.cpp - Host-side microbatch planner -------------------------===//
//
// Next-fit is delegated to the reference scheduler; this file adds the
// up-front checks (oversize sequences), the plan validation and the
// first-fit-decreasing alternative.
//
//===----------------------------------------------------------------------===//

#include "planner/Planner.h"
#include "planner/Detail.h"

#include "reference/CheckedArithmetic.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <numeric>
#include <utility>

using namespace thdc;
using namespace thdc::planner;
using thdc::planner::detail::concat;

namespace {


/// The limits every pack of a plan must respect.
struct PackingLimits {
  /// C*cp.
  int64_t capacity = 0;
  /// S2 cap K (nullopt: none).
  std::optional<int64_t> maxRealSeqs;
  /// dp * (vppGroup or 1).
  int64_t packMultiple = 1;
};

/// Resolves and checks the limits of a planning call, then checks that every
/// sequence fits a pack on its own.
Result<PackingLimits> resolveLimits(const std::vector<int32_t> &lengths,
                                    const PlannerConfig &config) {
  Result<std::optional<int64_t>> cap = plannerSequenceCap(config);
  if (!cap)
    return cap.status();
  // The reference owns the parameter checks (C, cp, dp, K, vppGroup >= 1):
  // running it on an empty batch applies exactly those.
  Result<reference::PackingResult> parameters = reference::dpBalancedGroups(
      {}, config.maxSeqlenPerRank, config.cp, config.dp, *cap, config.vppGroup);
  if (!parameters)
    return parameters.status();

  // The reference has refused products that overflow; these are defined.
  const std::optional<int64_t> capacity =
      reference::checkedMul(config.maxSeqlenPerRank, config.cp);
  const std::optional<int64_t> packMultiple =
      reference::checkedMul(config.dp, config.vppGroup.value_or(1));
  if (!capacity || !packMultiple)
    return Status::error(concat("C*cp = ", config.maxSeqlenPerRank, "*",
                                config.cp, " or dp*vppGroup = ", config.dp, "*",
                                config.vppGroup.value_or(1),
                                " overflows int64"));
  if (lengths.size() > std::size_t(std::numeric_limits<int32_t>::max()))
    return Status::error(
        concat(lengths.size(), " sequences do not fit int32 sequence ids"));

  PackingLimits limits;
  limits.capacity = *capacity;
  limits.maxRealSeqs = *cap;
  limits.packMultiple = *packMultiple;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0)
      return Status::error(
          concat("padded length p[", i, "] = ", lengths[i], " is negative"));
    if (lengths[i] > limits.capacity)
      return Status::error(concat(
          "sequence ", i, " has padded length p[", i, "] = ", lengths[i],
          ", more than the pack budget C*cp = ", config.maxSeqlenPerRank, "*",
          config.cp, " = ", limits.capacity,
          "; no microbatch can hold it: raise max_seqlen_per_dp_cp_rank or "
          "truncate the sequence"));
  }
  return limits;
}

/// An error naming the first violated invariant of `plan` under `limits`.
Status checkInvariants(const MicrobatchPlan &plan,
                       const std::vector<int32_t> &lengths,
                       const PackingLimits &limits,
                       const PlannerConfig &config) {
  if (plan.capacity != limits.capacity)
    return Status::error(concat("plan records capacity ", plan.capacity,
                                " but C*cp = ", limits.capacity));
  if (plan.maxRealSeqs != limits.maxRealSeqs)
    return Status::error(
        concat("plan records sequence cap ",
               plan.maxRealSeqs ? std::to_string(*plan.maxRealSeqs)
                                : std::string("none"),
               " but S2 gives ",
               limits.maxRealSeqs ? std::to_string(*limits.maxRealSeqs)
                                  : std::string("none")));
  if (plan.dp != config.dp || plan.cp != config.cp)
    return Status::error(concat("plan records dp x cp = ", plan.dp, " x ",
                                plan.cp, " but the config has ", config.dp,
                                " x ", config.cp));
  if (plan.packTokens.size() != plan.packs.size())
    return Status::error(concat("plan has ", plan.packs.size(), " packs but ",
                                plan.packTokens.size(), " token totals"));
  if (int64_t(plan.packs.size()) % limits.packMultiple)
    return Status::error(
        concat("plan has ", plan.packs.size(),
               " packs, not a multiple of dp * (vppGroup or 1) = ",
               limits.packMultiple));

  std::vector<int64_t> packOf(lengths.size(), -1);
  for (std::size_t k = 0; k < plan.packs.size(); ++k) {
    const Pack &pack = plan.packs[k];
    if (pack.empty())
      return Status::error(concat("pack ", k, " is empty"));
    if (limits.maxRealSeqs && int64_t(pack.size()) > *limits.maxRealSeqs)
      return Status::error(
          concat("pack ", k, " has ", pack.size(),
                 " sequences, more than the cap K = ", *limits.maxRealSeqs));
    int64_t tokens = 0;
    for (std::size_t e = 0; e < pack.size(); ++e) {
      int32_t id = pack[e];
      if (id < 0 || std::size_t(id) >= lengths.size())
        return Status::error(concat("pack ", k, " holds sequence id ", id,
                                    ", outside [0, ", lengths.size(), ")"));
      if (packOf[id] >= 0)
        return Status::error(concat("sequence ", id, " is in both pack ",
                                    packOf[id], " and pack ", k));
      packOf[id] = int64_t(k);
      if (e > 0 && pack[e - 1] >= id)
        return Status::error(
            concat("pack ", k, " is not in increasing id order at ", id));
      tokens += lengths[id];
    }
    if (tokens != plan.packTokens[k])
      return Status::error(concat("pack ", k, " holds ", tokens,
                                  " tokens but records ", plan.packTokens[k]));
    if (tokens > limits.capacity)
      return Status::error(
          concat("pack ", k, " holds ", tokens,
                 " tokens, more than the budget C*cp = ", limits.capacity));
  }
  for (std::size_t id = 0; id < lengths.size(); ++id)
    if (packOf[id] < 0)
      return Status::error(concat("sequence ", id, " is in no pack"));
  if (plan.groups != microbatchGroups(plan.packs, config.dp, config.cp))
    return Status::error(
        "groups differ from the S3 mapping packs[m*dp + j/cp]");
  return Status();
}

/// Builds a plan (token totals, recorded limits) from finished packs, and
/// checks it: an error naming the algorithm where it breaks a rule
/// (checkInvariants).
Result<MicrobatchPlan>
makePlan(std::vector<Pack> packs, MicrobatchGroups groups,
         const std::vector<int32_t> &lengths, const PackingLimits &limits,
         PlanAlgorithm algorithm, const PlannerConfig &config) {
  MicrobatchPlan plan;
  for (const Pack &pack : packs) {
    int64_t tokens = 0;
    for (int32_t id : pack)
      tokens += lengths[id];
    plan.packTokens.push_back(tokens);
  }
  plan.packs = std::move(packs);
  plan.groups = std::move(groups);
  plan.capacity = limits.capacity;
  plan.maxRealSeqs = limits.maxRealSeqs;
  plan.algorithm = algorithm;
  plan.dp = config.dp;
  plan.cp = config.cp;
  if (Status valid = checkInvariants(plan, lengths, limits, config); !valid)
    return Status::error(std::string(algorithm == PlanAlgorithm::NextFit
                                         ? "next-fit"
                                         : "first-fit-decreasing") +
                         " plan is invalid: " + valid.message());
  return plan;
}

/// Max segment tree over the residual capacity of the packs, answering
/// "leftmost pack with residual >= length" in O(log n). Packs not yet opened
/// or full by sequence count hold -1, so no length (>= 0) fits them.
class FirstFitTree {
public:
  explicit FirstFitTree(std::size_t maxPacks) {
    while (leaves < maxPacks)
      leaves *= 2;
    tree.assign(2 * leaves, -1);
  }

  /// Sets the residual capacity of pack `index`.
  void set(std::size_t index, int64_t residual) {
    std::size_t node = leaves + index;
    tree[node] = residual;
    for (node /= 2; node >= 1; node /= 2)
      tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }

  /// The leftmost pack whose residual is >= length, or -1.
  int64_t firstFitting(int64_t length) const {
    if (tree[1] < length)
      return -1;
    std::size_t node = 1;
    while (node < leaves)
      node = tree[2 * node] >= length ? 2 * node : 2 * node + 1;
    return int64_t(node - leaves);
  }

private:
  std::size_t leaves = 1;
  std::vector<int64_t> tree;
};

} // namespace

Result<std::optional<int64_t>>
thdc::planner::plannerSequenceCap(const PlannerConfig &config) {
  Result<std::optional<int64_t>> cap = reference::schedulerMaxRealNumSeqs(
      config.maxPackedSequences, config.alignmentSet, config.dummyTail);
  if (!cap)
    return cap.status();
  return *cap;
}

MicrobatchGroups thdc::planner::microbatchGroups(const std::vector<Pack> &packs,
                                                 int64_t dp, int64_t cp) {
  assert(dp >= 1 && cp >= 1 && reference::checkedMul(dp, cp) &&
         int64_t(packs.size()) % dp == 0 &&
         "microbatchGroups needs dp, cp >= 1, dp*cp within int64 and a "
         "multiple of dp packs");
  MicrobatchGroups groups(packs.size() / std::size_t(dp));
  for (std::size_t m = 0; m < groups.size(); ++m)
    for (int64_t j = 0; j < dp * cp; ++j)
      groups[m].push_back(packs[m * dp + j / cp]);
  return groups;
}

Result<MicrobatchPlan>
thdc::planner::nextFitPlan(const std::vector<int32_t> &paddedLengths,
                           const PlannerConfig &config) {
  Result<PackingLimits> limits = resolveLimits(paddedLengths, config);
  if (!limits)
    return limits.status();
  Result<reference::PackingResult> packing = reference::dpBalancedGroups(
      paddedLengths, config.maxSeqlenPerRank, config.cp, config.dp,
      limits->maxRealSeqs, config.vppGroup);
  if (!packing)
    return packing.status();
  return makePlan(std::move(packing->packs), std::move(packing->groups),
                  paddedLengths, *limits, PlanAlgorithm::NextFit, config);
}

Result<MicrobatchPlan>
thdc::planner::firstFitDecreasingPlan(const std::vector<int32_t> &paddedLengths,
                                      const PlannerConfig &config) {
  Result<PackingLimits> limits = resolveLimits(paddedLengths, config);
  if (!limits)
    return limits.status();
  const std::optional<int64_t> cap = limits->maxRealSeqs;

  std::vector<int32_t> order(paddedLengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return paddedLengths[a] > paddedLengths[b];
  });

  std::vector<Pack> packs;
  std::vector<int64_t> tokens;
  FirstFitTree openPacks(paddedLengths.size());
  for (int32_t id : order) {
    int64_t index = openPacks.firstFitting(paddedLengths[id]);
    if (index < 0) {
      index = int64_t(packs.size());
      packs.emplace_back();
      tokens.push_back(0);
    }
    packs[index].push_back(id);
    tokens[index] += paddedLengths[id];
    bool full = cap && int64_t(packs[index].size()) >= *cap;
    openPacks.set(std::size_t(index),
                  full ? -1 : limits->capacity - tokens[index]);
  }
  for (Pack &pack : packs)
    std::sort(pack.begin(), pack.end());

  // Splitting the heaviest pack keeps both halves within the budget and the
  // cap, and evens out the load of the microbatches.
  const int64_t initialPacks = int64_t(packs.size());
  while (int64_t(packs.size()) % limits->packMultiple) {
    int64_t heaviest = -1;
    for (std::size_t k = 0; k < packs.size(); ++k)
      if (packs[k].size() > 1 && (heaviest < 0 || tokens[k] > tokens[heaviest]))
        heaviest = int64_t(k);
    if (heaviest < 0)
      return Status::error(
          concat("Not enough samples to move: ", initialPacks,
                 " packs must be split into a multiple of dp * vppGroup = ",
                 limits->packMultiple, " but only ", paddedLengths.size(),
                 " sequences exist"));
    Pack &source = packs[heaviest];
    std::size_t longest = 0;
    for (std::size_t e = 1; e < source.size(); ++e)
      if (paddedLengths[source[e]] >= paddedLengths[source[longest]])
        longest = e;
    int32_t moved = source[longest];
    source.erase(source.begin() + longest);
    tokens[heaviest] -= paddedLengths[moved];
    packs.push_back({moved});
    tokens.push_back(paddedLengths[moved]);
  }
  std::sort(packs.begin(), packs.end(),
            [](const Pack &a, const Pack &b) { return a.front() < b.front(); });

  MicrobatchGroups groups = microbatchGroups(packs, config.dp, config.cp);
  return makePlan(std::move(packs), std::move(groups), paddedLengths, *limits,
                  PlanAlgorithm::FirstFitDecreasing, config);
}

Result<MicrobatchPlan>
thdc::planner::balancedPlan(const std::vector<int32_t> &paddedLengths,
                            const PlannerConfig &config) {
  Result<MicrobatchPlan> nextFit = nextFitPlan(paddedLengths, config);
  Result<MicrobatchPlan> firstFit =
      firstFitDecreasingPlan(paddedLengths, config);
  if (!firstFit)
    return nextFit;
  if (!nextFit)
    return firstFit;
  if (firstFit->numMicrobatches() <= nextFit->numMicrobatches())
    return firstFit;
  return nextFit;
}

Status thdc::planner::checkPlan(const MicrobatchPlan &plan,
                                const std::vector<int32_t> &paddedLengths,
                                const PlannerConfig &config) {
  Result<PackingLimits> limits = resolveLimits(paddedLengths, config);
  if (!limits)
    return Status::error("the config or lengths admit no plan: " +
                         limits.status().message());
  return checkInvariants(plan, paddedLengths, *limits, config);
}

Result<MicrobatchInputs>
thdc::planner::microbatchInputs(const MicrobatchPlan &plan, int64_t rank,
                                int64_t maxPackedSequences) {
  MicrobatchInputs inputs;
  Result<int64_t> ranks =
      detail::startInputs(inputs, plan.dp, plan.cp, rank, maxPackedSequences,
                          int64_t(plan.groups.size()));
  if (!ranks)
    return ranks.status();
  for (std::size_t m = 0; m < plan.groups.size(); ++m) {
    if (int64_t(plan.groups[m].size()) != *ranks)
      return Status::error(concat("microbatch ", m, " has ",
                                  plan.groups[m].size(),
                                  " groups, not dp*cp = ", *ranks));
    if (Status status = detail::appendPack(
            inputs, m, plan.groups[m][std::size_t(rank)], rank);
        !status)
      return status;
  }
  return inputs;
}

Result<int64_t> thdc::planner::microbatchUpperBound(const PlannerConfig &config,
                                                    int64_t globalBatchSize,
                                                    int64_t maxSeqLen) {
  Result<std::optional<int64_t>> cap = plannerSequenceCap(config);
  if (!cap)
    return cap.status();
  Result<int64_t> bound = reference::maxMicrobatchesUpperBound(
      globalBatchSize, config.dp, config.cp, config.maxSeqlenPerRank, maxSeqLen,
      config.vppGroup, *cap);
  if (!bound)
    return bound.status();
  return *bound;
}

int64_t thdc::planner::graphCaptureCount(const MicrobatchPlan &plan,
                                         int64_t upperBound,
                                         bool useRuntimeCount) {
  return reference::graphCaptureCount(plan.numMicrobatches(), upperBound,
                                      useRuntimeCount);
}

//===----------------------------------------------------------------------===//
// Capacity ladders
//===----------------------------------------------------------------------===//

Status thdc::planner::checkLadder(const std::vector<Rung> &ladder) {
  if (ladder.empty())
    return Status::error("a capacity ladder needs at least one rung");
  const bool capped = ladder.front().sequences.has_value();
  for (std::size_t i = 0; i < ladder.size(); ++i) {
    const Rung &rung = ladder[i];
    if (rung.rows < 1)
      return Status::error(concat("rung ", i, " has ", rung.rows,
                                  " rows; every rung needs >= 1"));
    if (i > 0 && rung.rows < ladder[i - 1].rows)
      return Status::error(concat(
          "rung ", i, " has ", rung.rows, " rows, fewer than rung ", i - 1,
          "'s ", ladder[i - 1].rows, ": the rungs' rows must not decrease"));
    if (rung.sequences.has_value() != capped)
      return Status::error(concat(
          "rung ", i, (capped ? " has no" : " has a"),
          " sequence capacity, unlike rung 0: give every rung one or none"));
    if (!capped) {
      if (i > 0 && rung.rows == ladder[i - 1].rows)
        return Status::error(concat("rung ", i, " has the rows of rung ", i - 1,
                                    " and no sequence capacity: the rungs' "
                                    "rows must increase"));
      continue;
    }
    if (*rung.sequences < 1)
      return Status::error(concat("rung ", i, " has sequence capacity ",
                                  *rung.sequences, "; it must be >= 1"));
    if (i > 0 && rung.rows == ladder[i - 1].rows &&
        *rung.sequences <= *ladder[i - 1].sequences)
      return Status::error(concat(
          "rung ", i, " has the ", rung.rows, " rows of rung ", i - 1,
          " and no more sequences: a rung of equal rows must hold more"));
    if (i > 0 && *rung.sequences < *ladder[i - 1].sequences)
      return Status::error(concat(
          "rung ", i, " holds ", *rung.sequences,
          " sequences, fewer than rung ", i - 1, "'s ",
          *ladder[i - 1].sequences,
          ": a rung with more rows must hold at least as many sequences"));
  }
  return Status();
}

int64_t LadderPlan::tokens() const {
  return std::accumulate(plan.packTokens.begin(), plan.packTokens.end(),
                         int64_t(0));
}

int64_t LadderPlan::rows() const {
  return std::accumulate(packRows.begin(), packRows.end(), int64_t(0));
}

int32_t LadderPlan::rung(int64_t microbatch, int64_t rank) const {
  assert(microbatch >= 0 && microbatch < plan.numMicrobatches() && rank >= 0 &&
         rank < plan.dp * plan.cp && "rung(m, rank) out of range");
  return packRungs[std::size_t(microbatch * plan.dp + rank / plan.cp)];
}

Result<int32_t> thdc::planner::rungIndex(const std::vector<Rung> &ladder,
                                         int64_t rows, int64_t sequences,
                                         const PlannerConfig &config) {
  if (Status valid = checkLadder(ladder); !valid)
    return valid;
  if (config.cp < 1)
    return Status::error(concat("cp = ", config.cp, " must be >= 1"));
  if (rows < 0 || sequences < 0)
    return Status::error(concat("rows and sequences must be >= 0; got ", rows,
                                ", ", sequences));
  // Each rung's limits, all of them checked whatever rung holds the pack:
  // B*cp rows and the S2 cap of its N (max: none).
  std::vector<int64_t> capacity, cap;
  for (const Rung &rung : ladder) {
    const std::optional<int64_t> rungRows =
        reference::checkedMul(rung.rows, config.cp);
    if (!rungRows)
      return Status::error(concat("rung rows ", rung.rows, " * cp ", config.cp,
                                  " overflows int64"));
    PlannerConfig rungConfig = config;
    rungConfig.maxPackedSequences = rung.sequences;
    Result<std::optional<int64_t>> rungCap = plannerSequenceCap(rungConfig);
    if (!rungCap)
      return Status::error(concat("rung of ", rung.rows, " rows: ",
                                  rungCap.status().message()));
    capacity.push_back(*rungRows);
    cap.push_back(rungCap->value_or(std::numeric_limits<int64_t>::max()));
  }
  for (std::size_t r = 0; r < ladder.size(); ++r)
    if (rows <= capacity[r] && sequences <= cap[r])
      return int32_t(r);
  return Status::error(concat(
      "no rung holds ", rows, " rows and ", sequences, " sequences at CP size ",
      config.cp, ": the top rung holds ", capacity.back(), " rows and ",
      ladder.back().sequences ? std::to_string(cap.back())
                              : std::string("any number of"),
      " sequences"));
}

Result<LadderPlan>
thdc::planner::assignRungs(const MicrobatchPlan &plan,
                           const std::vector<int32_t> &paddedLengths,
                           const std::vector<Rung> &ladder,
                           const PlannerConfig &config) {
  if (Status valid = checkLadder(ladder); !valid)
    return valid;
  if (plan.cp != config.cp || plan.dp != config.dp)
    return Status::error(concat("the plan is for cp ", plan.cp, ", dp ",
                                plan.dp, ", not the config's cp ", config.cp,
                                ", dp ", config.dp));
  // Every rung's limits are checked even for a plan without packs (an
  // empty pack fits rung 0).
  if (Result<int32_t> valid = rungIndex(ladder, 0, 0, config); !valid)
    return valid.status();
  LadderPlan result;
  result.plan = plan;
  result.ladder = ladder;
  for (std::size_t p = 0; p < plan.packs.size(); ++p) {
    const int64_t tokens = plan.packTokens[p];
    const int64_t sequences = int64_t(plan.packs[p].size());
    Result<int32_t> r = rungIndex(ladder, tokens, sequences, config);
    if (!r)
      return Status::error(concat("pack ", p, " fits no rung: ",
                                  r.status().message()));
    int64_t longest = 0;
    for (int32_t id : plan.packs[p]) {
      if (id < 0 || std::size_t(id) >= paddedLengths.size())
        return Status::error(concat("pack ", p, " names sequence ", id,
                                    ", not one of the ", paddedLengths.size(),
                                    " lengths"));
      longest = std::max<int64_t>(longest, paddedLengths[std::size_t(id)]);
    }
    result.packRungs.push_back(*r);
    result.packRows.push_back(ladder[std::size_t(*r)].rows * plan.cp);
    result.packMaxLengths.push_back(longest);
  }
  return result;
}

Result<LadderPlan>
thdc::planner::ladderPlan(const std::vector<int32_t> &paddedLengths,
                          const PlannerConfig &config,
                          const std::vector<Rung> &ladder) {
  if (Status valid = checkLadder(ladder); !valid)
    return valid;
  PlannerConfig top = config;
  top.maxSeqlenPerRank = ladder.back().rows;
  top.maxPackedSequences = ladder.back().sequences;
  Result<MicrobatchPlan> nextFit = nextFitPlan(paddedLengths, top);
  if (!nextFit)
    return nextFit.status();
  Result<LadderPlan> best = assignRungs(*nextFit, paddedLengths, ladder, top);
  if (!best)
    return best;
  Result<MicrobatchPlan> balanced = balancedPlan(paddedLengths, top);
  if (!balanced)
    return best;
  Result<LadderPlan> other = assignRungs(*balanced, paddedLengths, ladder, top);
  if (!other)
    return best;
  const auto key = [](const LadderPlan &p) {
    return std::make_pair(p.rows(), p.plan.numMicrobatches());
  };
  if (key(*other) < key(*best))
    return other;
  return best;
}
