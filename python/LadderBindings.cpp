//===- LadderBindings.cpp - capacity ladders ------------------------------===//
//
// thdc._thdc.planner's capacity ladders (planner/Planner.h,
// docs/capacity-ladder.md): LadderPlan, ladder_plan and assign_rungs, and
// the ladder's rules stated once in C++ for the Python layer: check_ladder
// (checkLadder) and rung_index (rungIndex, the rung assignRungs picks).
//
//===----------------------------------------------------------------------===//

#include "planner/Planner.h"
#include "python/Arguments.h"
#include "python/Bindings.h"
#include "python/PlannerArguments.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

using namespace thdc;
using namespace thdc::python;

namespace {

/// A ladder from Python: `capacities` (rows per CP rank, each an int within
/// int32) and `sequence_capacities` (None: every rung gets
/// `maxPackedSequences`, or no cap without one; else one int per rung).
std::vector<planner::Rung> ladderArgument(nb::handle capacities,
                                          nb::handle sequenceCapacities,
                                          std::optional<int64_t> maxPacked) {
  auto sequence = [](nb::handle object, const char *name) {
    if (!PySequence_Check(object.ptr()) || nb::isinstance<nb::str>(object))
      raiseArgument(PyExc_TypeError, std::string(name) +
                                         " must be a sequence of ints; got " +
                                         typeName(object));
    return nb::borrow<nb::sequence>(object);
  };
  nb::sequence rows = sequence(capacities, "capacities");
  const std::size_t count = nb::len(rows);
  std::vector<planner::Rung> ladder(count);
  for (std::size_t i = 0; i < count; ++i) {
    ladder[i].rows = integerArgument(
        rows[i], "capacities[" + std::to_string(i) + "]");
    ladder[i].sequences = maxPacked;
  }
  if (!sequenceCapacities.is_none()) {
    nb::sequence sequences = sequence(sequenceCapacities, "sequence_capacities");
    if (nb::len(sequences) != count)
      raiseArgument(PyExc_ValueError,
                    "sequence_capacities has " +
                        std::to_string(nb::len(sequences)) +
                        " entries; the ladder has " + std::to_string(count) +
                        " rungs");
    for (std::size_t i = 0; i < count; ++i)
      ladder[i].sequences = integerArgument(
          sequences[i], "sequence_capacities[" + std::to_string(i) + "]");
  }
  if (Status valid = planner::checkLadder(ladder); !valid)
    raiseArgument(PyExc_ValueError, valid.message());
  return ladder;
}

} // namespace

void thdc::python::populateLadderBindings(nb::module_ &m) {
  nb::module_ planning = nb::borrow<nb::module_>(m.attr("planner"));
  nb::class_<planner::LadderPlan>(
      planning, "LadderPlan",
      "A plan over a capacity ladder (docs/capacity-ladder.md): every pack "
      "at the smallest rung that holds its tokens and its sequences.")
      .def_ro("plan", &planner::LadderPlan::plan, "the packing (a Plan)")
      .def_prop_ro("capacities",
                   [](const planner::LadderPlan &p) {
                     std::vector<int64_t> rows;
                     for (const planner::Rung &r : p.ladder)
                       rows.push_back(r.rows);
                     return rows;
                   },
                   "the rungs' rows per CP rank, B")
      .def_prop_ro("sequence_capacities",
                   [](const planner::LadderPlan &p) {
                     std::vector<std::optional<int64_t>> sequences;
                     for (const planner::Rung &r : p.ladder)
                       sequences.push_back(r.sequences);
                     return sequences;
                   },
                   "the rungs' N (None: no cap)")
      .def_ro("pack_rungs", &planner::LadderPlan::packRungs,
              "the rung of every pack")
      .def_ro("pack_rows", &planner::LadderPlan::packRows,
              "the rows every pack occupies at its rung, B*cp")
      .def_ro("pack_max_lengths", &planner::LadderPlan::packMaxLengths,
              "the longest padded length of every pack (its tightest "
              "max_seqlen)")
      .def_prop_ro("tokens", &planner::LadderPlan::tokens,
                   "padded tokens of the plan")
      .def_prop_ro("rows", &planner::LadderPlan::rows,
                   "rows of the plan at its rungs")
      .def_prop_ro("padded_rows", &planner::LadderPlan::paddedRows,
                   "rows - tokens: what the step pads")
      .def_prop_ro("fill",
                   [](const planner::LadderPlan &p) {
                     return p.rows() ? double(p.tokens()) / double(p.rows())
                                     : 1.0;
                   },
                   "tokens / rows (1.0 for an empty plan)")
      .def_prop_ro("num_microbatches",
                   [](const planner::LadderPlan &p) {
                     return p.plan.numMicrobatches();
                   })
      .def(
          "rung",
          [](const planner::LadderPlan &p, IntArg m, IntArg rank) {
            const int64_t microbatch = integerArgument(m.object, "microbatch",
                                                       kInt64Range);
            const int64_t r = integerArgument(rank.object, "rank", kInt64Range);
            if (microbatch < 0 || microbatch >= p.plan.numMicrobatches() ||
                r < 0 || r >= p.plan.dp * p.plan.cp)
              throw nb::index_error(
                  ("rung(" + std::to_string(microbatch) + ", " +
                   std::to_string(r) + "): the plan has " +
                   std::to_string(p.plan.numMicrobatches()) +
                   " microbatches and dp*cp = " +
                   std::to_string(p.plan.dp * p.plan.cp) + " ranks")
                      .c_str());
            return p.rung(microbatch, r);
          },
          nb::arg("microbatch"), nb::arg("rank"),
          "the rung microbatch m runs at on DP x CP rank j = "
          "dp_index*cp + cp_index")
      .def("__len__", [](const planner::LadderPlan &p) {
        return p.plan.numMicrobatches();
      })
      .def("__repr__", [](const planner::LadderPlan &p) {
        return "LadderPlan(" + std::to_string(p.plan.numMicrobatches()) +
               " microbatches, " + std::to_string(p.ladder.size()) +
               " rungs, " + std::to_string(p.tokens()) + " tokens in " +
               std::to_string(p.rows()) + " rows)";
      });
  planning.def(
      "ladder_plan",
      [](LengthsArg paddedLengths, nb::handle capacities, IntArg cp, IntArg dp,
         OptionalIntArg maxPackedSequences, nb::handle sequenceCapacities,
         bool alignmentSet, bool dummyTail, OptionalIntArg vppGroup) {
        const std::vector<int32_t> lengths =
            lengthsArgument(paddedLengths, "padded_lengths");
        // C is the top rung's; 1 stands in until the ladder is read.
        nb::int_ one(1);
        planner::PlannerConfig config =
            plannerConfig(IntArg{one}, cp, dp, maxPackedSequences,
                          alignmentSet, dummyTail, vppGroup);
        std::vector<planner::Rung> ladder = ladderArgument(
            capacities, sequenceCapacities, config.maxPackedSequences);
        return valueOrRaise(planner::ladderPlan(lengths, config, ladder));
      },
      nb::arg("padded_lengths"), nb::arg("capacities"), nb::arg("cp"),
      nb::arg("dp") = 1, nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("sequence_capacities") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      nb::arg("vpp_group") = nb::none(),
      "Plans the padded lengths over a capacity ladder: capacities B_1 < ... "
      "< B_k rows per CP rank (the top one is C), sequence_capacities their "
      "N (default: max_packed_sequences for every rung). Next-fit and the "
      "balanced plan over the top rung, each pack at its smallest rung; the "
      "plan with fewer rows is kept (ties: fewer microbatches, then "
      "next-fit). Returns a LadderPlan.");
  planning.def(
      "assign_rungs",
      [](const planner::MicrobatchPlan &plan, LengthsArg paddedLengths,
         nb::handle capacities, OptionalIntArg maxPackedSequences,
         nb::handle sequenceCapacities, bool alignmentSet, bool dummyTail) {
        const std::vector<int32_t> lengths =
            lengthsArgument(paddedLengths, "padded_lengths");
        planner::PlannerConfig config;
        config.cp = plan.cp;
        config.dp = plan.dp;
        config.maxPackedSequences = optionalIntegerArgument(
            maxPackedSequences.object, "max_packed_sequences");
        config.alignmentSet = alignmentSet;
        config.dummyTail = dummyTail;
        std::vector<planner::Rung> ladder = ladderArgument(
            capacities, sequenceCapacities, config.maxPackedSequences);
        return valueOrRaise(
            planner::assignRungs(plan, lengths, ladder, config));
      },
      nb::arg("plan"), nb::arg("padded_lengths"), nb::arg("capacities"),
      nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("sequence_capacities") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      "The smallest rung of the ladder for every pack of an existing plan "
      "(the lengths it was planned from). ValueError naming a pack no rung "
      "holds.");
  planning.def(
      "check_ladder",
      [](nb::handle capacities, nb::handle sequenceCapacities) {
        ladderArgument(capacities, sequenceCapacities, std::nullopt);
      },
      nb::arg("capacities"), nb::arg("sequence_capacities").none(),
      "Checks a capacity ladder (docs/capacity-ladder.md): capacities B_1 "
      "<= ... <= B_k rows per CP rank, each >= 1; sequence_capacities their "
      "N (None: no cap), each >= 1 and non-decreasing (a rung with more rows "
      "holds at least as many sequences); two rungs of equal rows differ in "
      "N, the later holding more. ValueError naming the first offending "
      "rung, TypeError for a value that is no int.");
  planning.def(
      "rung_index",
      [](nb::handle capacities, nb::handle sequenceCapacities, IntArg rows,
         IntArg seqs, IntArg cp, bool alignmentSet, bool dummyTail) {
        std::vector<planner::Rung> ladder =
            ladderArgument(capacities, sequenceCapacities, std::nullopt);
        planner::PlannerConfig config;
        config.cp = integerArgument(cp.object, "cp");
        config.alignmentSet = alignmentSet;
        config.dummyTail = dummyTail;
        return valueOrRaise(planner::rungIndex(
            ladder, integerArgument(rows.object, "rows", kInt64Range),
            integerArgument(seqs.object, "seqs", kInt64Range), config));
      },
      nb::arg("capacities"), nb::arg("sequence_capacities").none(),
      nb::arg("rows"), nb::arg("seqs"), nb::arg("cp") = 1, nb::kw_only(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      "The smallest rung of the ladder that holds a microbatch of `rows` "
      "packed rows (all cp ranks of its CP group) and `seqs` sequences: "
      "B*cp >= rows and seqs <= the S2 cap of the rung's N (N-1 with an "
      "alignment and the dummy tail, else N; no cap for N None), the rung "
      "assign_rungs and ladder_plan give a pack. ValueError for a bad "
      "ladder (check_ladder's), negative rows or seqs, cp < 1, or when no "
      "rung holds the microbatch.");
}
