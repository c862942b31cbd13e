//===- PlannerFuzzer.cpp - every plan function of the planner -------------===//
//
// Arbitrary global batches and configs through every plan function of
// planner/Planner.h: nextFitPlan, firstFitDecreasingPlan, balancedPlan,
// microbatchInputs, microbatchUpperBound, graphCaptureCount, checkLadder,
// rungIndex, assignRungs and ladderPlan, and planner/DynamicCp.h's
// dynamicCpPlan and its microbatchInputs. A plan is either an error or one
// that keeps the planner's promises, checked here: it passes checkPlan
// (checkDynamicCpPlan); balancedPlan never needs more microbatches than
// nextFitPlan and the S12 bound holds for next-fit; every rank's inputs
// name its packs (and, under dynamic CP, its CP sizes); every pack of a
// ladder plan sits at the smallest rung that holds it, the rung rungIndex
// names. An error is a refusal of the input, unless it says it is an
// internal error (a broken invariant of the planner or of the scheduler
// under it). A broken promise aborts; so does an internal error, a crash or
// a sanitizer's report.
//
// Input layout: 8 bytes of config (C, cp, dp, N, flags, vpp group, ladder
// rungs), then 2 bytes per padded length (at most 256 lengths).
//
//===----------------------------------------------------------------------===//

#include "planner/DynamicCp.h"
#include "planner/Planner.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace thdc::planner;
using thdc::Result;
using thdc::Status;

namespace {

/// Aborts, printing the message, when `status` is an internal error
/// ("internal error: ...", as the reference's scheduler words its failed
/// invariants): only a refusal of the input is an acceptable error.
void checkRefusal(const Status &status) {
  if (!status.ok() &&
      status.message().find("internal error") != std::string::npos) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    std::abort();
  }
}

/// `result`, after checkRefusal() of its error.
template <typename T> Result<T> screened(Result<T> result) {
  checkRefusal(result.status());
  return result;
}

/// The S2 cap of a rung's N under `config`'s alignment and tail policy.
std::optional<int64_t> capOf(std::optional<int64_t> sequences,
                             const PlannerConfig &config) {
  PlannerConfig rung = config;
  rung.maxPackedSequences = sequences;
  auto cap = screened(plannerSequenceCap(rung));
  if (!cap)
    return int64_t(-1); // no rung of this N holds a sequence
  return *cap;
}

bool holds(const Rung &rung, int64_t cp, int64_t tokens, int64_t seqs,
           const PlannerConfig &config) {
  std::optional<int64_t> cap = capOf(rung.sequences, config);
  return rung.rows * cp >= tokens && (!cap || *cap >= seqs);
}

void checkInputs(const MicrobatchPlan &plan, int64_t N) {
  for (int64_t rank = 0; rank < plan.dp * plan.cp; ++rank) {
    auto inputs = screened(microbatchInputs(plan, rank, N));
    if (!inputs)
      continue;
    if (inputs->numMicrobatches() != plan.numMicrobatches() ||
        inputs->slots != N - 1)
      std::abort();
    for (int64_t m = 0; m < plan.numMicrobatches(); ++m) {
      const Pack &pack = plan.groups[m][rank];
      if (inputs->numSeqs[m] != int32_t(pack.size()))
        std::abort();
      for (size_t i = 0; i < pack.size(); ++i)
        if (inputs->sampleIds[m * inputs->slots + i] != pack[i])
          std::abort();
    }
  }
}

void checkLadderPlan(const LadderPlan &plan,
                     const std::vector<int32_t> &lengths,
                     const PlannerConfig &config) {
  const int64_t cp = plan.plan.cp;
  if (plan.packRungs.size() != plan.plan.packs.size())
    std::abort();
  for (size_t p = 0; p < plan.plan.packs.size(); ++p) {
    const int64_t tokens = plan.plan.packTokens[p];
    const int64_t seqs = int64_t(plan.plan.packs[p].size());
    const int32_t rung = plan.packRungs[p];
    if (rung < 0 || size_t(rung) >= plan.ladder.size() ||
        !holds(plan.ladder[rung], cp, tokens, seqs, config) ||
        plan.packRows[p] != plan.ladder[rung].rows * cp)
      std::abort();
    // The smallest rung that holds it, which rungIndex names too.
    for (int32_t lower = 0; lower < rung; ++lower)
      if (holds(plan.ladder[lower], cp, tokens, seqs, config))
        std::abort();
    auto index = screened(rungIndex(plan.ladder, tokens, seqs, config));
    if (!index || *index != rung)
      std::abort();
    int64_t longest = 0;
    for (int32_t id : plan.plan.packs[p])
      longest = std::max<int64_t>(longest, lengths[id]);
    if (plan.packMaxLengths[p] != longest)
      std::abort();
  }
  if (plan.paddedRows() < 0)
    std::abort();
}

void checkDynamicCp(const std::vector<int32_t> &lengths,
                    const PlannerConfig &config, int64_t minCpSize,
                    int64_t N) {
  auto plan = screened(dynamicCpPlan(lengths, config, minCpSize));
  if (!plan)
    return;
  if (!checkDynamicCpPlan(*plan, lengths, config, minCpSize))
    std::abort();
  for (int64_t rank = 0; rank < plan->ranks(); ++rank) {
    auto inputs = screened(microbatchInputs(*plan, rank, N));
    if (!inputs)
      continue;
    if (inputs->numMicrobatches() != plan->numMicrobatches() ||
        int64_t(inputs->cpSizes.size()) != plan->numMicrobatches())
      std::abort();
    for (int64_t m = 0; m < plan->numMicrobatches(); ++m) {
      const Pack &ids = plan->groups[m][rank];
      if (inputs->numSeqs[m] != int32_t(ids.size()) ||
          inputs->cpSizes[m] != plan->cpSizes[m][rank] ||
          !std::equal(ids.begin(), ids.end(),
                      inputs->sampleIds.begin() + m * inputs->slots))
        std::abort();
      // Its sub-group: a block of its CP size, holding the rank.
      auto [first, last] = plan->subGroup(m, rank);
      if (last - first != plan->cpSizes[m][rank] || rank < first ||
          rank >= last || plan->localRank(m, rank) != rank - first)
        std::abort();
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8)
    return 0;
  PlannerConfig config;
  config.maxSeqlenPerRank = 1 + (data[0] | (int64_t(data[1] & 0x3f) << 8));
  config.cp = 1 + data[2] % 8;
  config.dp = 1 + (data[2] >> 3) % 5;
  if (data[4] & 1)
    config.maxPackedSequences = data[3] % 40; // 0 and 1 included
  config.alignmentSet = data[4] & 2;
  config.dummyTail = data[4] & 4;
  if (data[4] & 8)
    config.vppGroup = data[5] % 5; // 0 included: refused by name
  // Lengths up to a little past C*cp: a sequence longer than the budget is
  // an error naming it.
  const int64_t budget = config.maxSeqlenPerRank * config.cp;
  std::vector<int32_t> lengths;
  for (size_t i = 8; i + 1 < size && lengths.size() < 256; i += 2) {
    const int64_t raw = (int64_t(data[i]) << 8) | data[i + 1];
    // Negative and zero lengths now and then (refused or allowed by name).
    lengths.push_back(raw == 0xffff ? -1 : int32_t(raw % (budget + 2)));
  }

  auto next = screened(nextFitPlan(lengths, config));
  auto ffd = screened(firstFitDecreasingPlan(lengths, config));
  auto balanced = screened(balancedPlan(lengths, config));
  for (const auto *plan : {&next, &ffd, &balanced})
    if (*plan && !checkPlan(**plan, lengths, config))
      std::abort();
  // balancedPlan succeeds whenever next-fit does, never with more
  // microbatches.
  if (next && (!balanced || balanced->numMicrobatches() >
                                next->numMicrobatches()))
    std::abort();
  if (next && !lengths.empty()) {
    const int32_t longest = *std::max_element(lengths.begin(), lengths.end());
    auto bound = screened(
        microbatchUpperBound(config, int64_t(lengths.size()), longest));
    if (bound) {
      if (next->numMicrobatches() > *bound)
        std::abort();
      if (graphCaptureCount(*next, *bound) != *bound ||
          graphCaptureCount(*next, *bound, true) != next->numMicrobatches())
        std::abort();
    }
  }
  if (next && config.maxPackedSequences)
    checkInputs(*next, *config.maxPackedSequences);
  if (balanced)
    checkInputs(*balanced, 2 + data[6] % 8);
  // Dynamic CP over the same ranks: min_dynamic_context_parallel_size from
  // byte 6 (not a power of two now and then: refused by name).
  checkDynamicCp(lengths, config, 1 + (data[6] >> 3) % 4,
                 config.maxPackedSequences.value_or(2 + data[6] % 8));

  // A ladder of up to 4 rungs under the top (C, N), from byte 7.
  std::vector<Rung> ladder;
  const int rungs = 1 + data[7] % 4;
  for (int r = 0; r < rungs; ++r) {
    Rung rung;
    rung.rows = std::max<int64_t>(1, config.maxSeqlenPerRank * (r + 1) / rungs -
                                         ((data[7] >> 2) & 1));
    if (config.maxPackedSequences)
      rung.sequences =
          std::max<int64_t>(1, *config.maxPackedSequences * (r + 1) / rungs);
    ladder.push_back(rung);
  }
  if (data[7] & 0x80) // an unordered ladder now and then: refused by name
    std::reverse(ladder.begin(), ladder.end());
  const Status ladderStatus = checkLadder(ladder);
  checkRefusal(ladderStatus);
  const bool valid = ladderStatus.ok();
  auto planned = screened(ladderPlan(lengths, config, ladder));
  if (planned) {
    if (!valid)
      std::abort();
    checkLadderPlan(*planned, lengths, config);
  }
  if (next && valid) {
    auto assigned = screened(assignRungs(*next, lengths, ladder, config));
    if (assigned)
      checkLadderPlan(*assigned, lengths, config);
  }
  return 0;
}
