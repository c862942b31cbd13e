//===- DynamicCpBindings.cpp - dynamic CP's planner -----------------------===//
//
// thdc._thdc.planner's dynamic CP (planner/DynamicCp.h, docs/semantics.md
// S3b): the class DynamicCpPlan and dynamic_cp_plan. The plan's tables are
// Python tuples, made once per plan, and the plan is read-only.
//
//===----------------------------------------------------------------------===//

#include "planner/DynamicCp.h"
#include "python/Arguments.h"
#include "python/Bindings.h"
#include "python/PlannerArguments.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>
#include <utility>
#include <vector>

using namespace thdc;
using namespace thdc::python;

namespace {

/// A dynamic-CP plan as Python sees it: the planner's plan and its tables
/// as tuples (groups[m][j], cp_sizes[m][j], lengths), made once so that
/// indexing them in a loop costs no copy.
struct PythonDynamicCpPlan {
  planner::DynamicCpPlan plan;
  nb::object groups, cpSizes, lengths;
};

/// `values` as a tuple of ints.
nb::object intTuple(const std::vector<int32_t> &values) {
  nb::list items;
  for (int32_t value : values)
    items.append(value);
  return nb::tuple(items);
}

/// A table of `rows` as a tuple of tuples made by `row`.
template <typename Row, typename MakeRow>
nb::object tupleOf(const std::vector<Row> &rows, MakeRow row) {
  nb::list items;
  for (const Row &value : rows)
    items.append(row(value));
  return nb::tuple(items);
}

PythonDynamicCpPlan pythonPlan(planner::DynamicCpPlan plan) {
  PythonDynamicCpPlan made;
  made.groups = tupleOf(plan.groups, [](const std::vector<planner::Pack> &m) {
    return tupleOf(m, intTuple);
  });
  made.cpSizes = tupleOf(plan.cpSizes, intTuple);
  made.lengths = intTuple(plan.lengths);
  made.plan = std::move(plan);
  return made;
}

/// Microbatch m and rank j from Python, in range; IndexError otherwise.
std::pair<int64_t, int64_t> indexArguments(const planner::DynamicCpPlan &plan,
                                           IntArg microbatch, IntArg rank) {
  const int64_t m = integerArgument(microbatch.object, "microbatch",
                                    kInt64Range);
  const int64_t j = integerArgument(rank.object, "rank", kInt64Range);
  if (Status valid = plan.checkIndex(m, j); !valid)
    raiseArgument(PyExc_IndexError, valid.message());
  return {m, j};
}

nb::tuple dynamicCpInputs(const PythonDynamicCpPlan &self, IntArg rankArg,
                          IntArg NArg) {
  const planner::DynamicCpPlan &plan = self.plan;
  const int64_t rank = integerArgument(rankArg.object, "rank", kInt64Range);
  if (rank < 0 || rank >= plan.ranks())
    raiseArgument(PyExc_IndexError,
                  "rank " + std::to_string(rank) + ": the plan has " +
                      std::to_string(plan.numMicrobatches()) +
                      " microbatches over " + std::to_string(plan.ranks()) +
                      " ranks");
  const int64_t N = integerArgument(NArg.object, "N");
  checkSampleIdsSize("microbatch_inputs", plan.groups.size(), N);
  planner::DynamicCpInputs inputs =
      valueOrRaise(planner::microbatchInputs(plan, rank, N));
  const std::size_t microbatches = std::size_t(inputs.numMicrobatches());
  return nb::make_tuple(toNumpy2d(std::move(inputs.sampleIds), microbatches,
                                  std::size_t(inputs.slots)),
                        toNumpy(inputs.numSeqs), toNumpy(inputs.cpSizes));
}

PythonDynamicCpPlan dynamicCpPlan(LengthsArg paddedLengths, IntArg C,
                                  IntArg cp, IntArg dp, IntArg minCpSize,
                                  OptionalIntArg maxPackedSequences,
                                  bool alignmentSet, bool dummyTail,
                                  OptionalIntArg microbatchGroupSize) {
  const planner::PlannerConfig config =
      plannerConfig(C, cp, dp, maxPackedSequences, alignmentSet, dummyTail,
                    microbatchGroupSize, "microbatch_group_size_per_vp_stage");
  const int64_t minCp = integerArgument(minCpSize.object, "min_cp_size");
  const std::vector<int32_t> lengths =
      lengthsArgument(paddedLengths, "padded_lengths");
  return pythonPlan(
      valueOrRaise(planner::dynamicCpPlan(lengths, config, minCp)));
}

} // namespace

void thdc::python::populateDynamicCpBindings(nb::module_ &m) {
  nb::module_ planning = nb::borrow<nb::module_>(m.attr("planner"));
  using Plan = PythonDynamicCpPlan;
  nb::class_<Plan>(
      planning, "DynamicCpPlan",
      "A global batch planned for dynamic CP (docs/semantics.md S3b): for "
      "every microbatch m and DP x CP rank j, the sequence ids the rank "
      "receives (groups[m][j], every rank of a sub-group the same) and its "
      "CP size (cp_sizes[m][j]). Rank j's sub-group is the block of "
      "cp_sizes[m][j] ranks holding it (sub_group), its CP rank there j mod "
      "the size (local_rank); the sub-group's padded tokens are at most C "
      "per rank.")
      .def_prop_ro("groups", [](const Plan &p) { return p.groups; },
                   "groups[m][j]: the ids rank j receives in microbatch m")
      .def_prop_ro("cp_sizes", [](const Plan &p) { return p.cpSizes; },
                   "cp_sizes[m][j]: rank j's CP size in microbatch m")
      .def_prop_ro("lengths", [](const Plan &p) { return p.lengths; },
                   "the padded lengths the plan was made for")
      .def_prop_ro("C", [](const Plan &p) { return p.plan.C; },
                   "max_seqlen_per_dp_cp_rank, the rows of every rank")
      .def_prop_ro("dp", [](const Plan &p) { return p.plan.dp; })
      .def_prop_ro("cp", [](const Plan &p) { return p.plan.cp; })
      .def_prop_ro("min_cp_size", [](const Plan &p) { return p.plan.minCpSize; })
      .def_prop_ro("max_real_seqs",
                   [](const Plan &p) { return p.plan.maxRealSeqs; },
                   "the S2 cap K on sequences per sub-group (None: no cap)")
      .def_prop_ro("ranks", [](const Plan &p) { return p.plan.ranks(); },
                   "dp * cp")
      .def_prop_ro("num_microbatches",
                   [](const Plan &p) { return p.plan.numMicrobatches(); })
      .def_prop_ro("sizes",
                   [](const Plan &p) { return intTuple(p.plan.sizes()); },
                   "The CP sizes the plan uses, smallest first.")
      .def("__len__", [](const Plan &p) { return p.plan.numMicrobatches(); })
      .def(
          "local_rank",
          [](const Plan &p, IntArg microbatch, IntArg rank) {
            auto [m, j] = indexArguments(p.plan, microbatch, rank);
            return p.plan.localRank(m, j);
          },
          nb::arg("microbatch"), nb::arg("rank"),
          "Rank j's CP rank in its sub-group of microbatch m.")
      .def(
          "sub_group",
          [](const Plan &p, IntArg microbatch, IntArg rank) {
            auto [m, j] = indexArguments(p.plan, microbatch, rank);
            const std::pair<int64_t, int64_t> block = p.plan.subGroup(m, j);
            return nb::handle(reinterpret_cast<PyObject *>(&PyRange_Type))(
                block.first, block.second);
          },
          nb::arg("microbatch"), nb::arg("rank"),
          "The DP x CP ranks of rank j's sub-group in microbatch m (a "
          "range).")
      .def(
          "tokens",
          [](const Plan &p, IntArg microbatch, IntArg rank) {
            auto [m, j] = indexArguments(p.plan, microbatch, rank);
            return p.plan.tokens(m, j);
          },
          nb::arg("microbatch"), nb::arg("rank"),
          "The padded tokens of rank j's sub-group in microbatch m (all its "
          "ranks; at most C times its size).")
      .def("microbatch_inputs", &dynamicCpInputs, nb::arg("rank"),
           nb::arg("N"),
           "(sample_ids, num_seqs, cp_sizes) for DP x CP rank `rank` and "
           "every microbatch, as Plan's microbatch_inputs gives them: "
           "sample_ids int32 [num_microbatches, N-1] (the ids, then zeros), "
           "num_seqs int32 [num_microbatches], cp_sizes int32 "
           "[num_microbatches]. ValueError when a microbatch has more than "
           "N-1 sequences, IndexError for a rank outside [0, ranks).")
      .def("__repr__", [](const Plan &p) {
        std::string sizes;
        for (int32_t size : p.plan.sizes())
          sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
        return "DynamicCpPlan(" + std::to_string(p.plan.numMicrobatches()) +
               " microbatches over " + std::to_string(p.plan.ranks()) +
               " ranks, CP sizes [" + sizes + "], C " +
               std::to_string(p.plan.C) + ")";
      });
  planning.def(
      "dynamic_cp_plan", &dynamicCpPlan, nb::arg("padded_lengths"),
      nb::arg("C"), nb::arg("cp"), nb::arg("dp") = 1, nb::kw_only(),
      nb::arg("min_cp_size") = 1, nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      nb::arg("microbatch_group_size_per_vp_stage") = nb::none(),
      "Plans a global batch for dynamic CP over the dp*cp DP x CP ranks as "
      "the reference framework's default dynamic-CP scheduler does (S3b): "
      "C = max_seqlen_per_dp_cp_rank, the rows each rank holds; min_cp_size "
      "= min_dynamic_context_parallel_size. With max_packed_sequences N, at "
      "most K sequences per sub-group (S2: N-1 with an alignment and the "
      "dummy tail), a bound the framework's scheduler does not apply. The "
      "padded lengths should be aligned for dynamic CP (align_lengths(..., "
      "dynamic_cp=True, dp=dp): multiples of 2*cp*dp), so that every "
      "sub-group size can slice every sequence. "
      "microbatch_group_size_per_vp_stage: with virtual pipeline stages the "
      "config field of that name (None without them, as the framework "
      "passes its scheduler, data_schedule.py:536-541 on dev: megatron-core "
      "sets the field to the pipeline size even without VPP, "
      "model_parallel_config.py:600-601); above 1 the microbatch count is "
      "made a multiple of it, as the framework does, by splitting "
      "microbatches and widening their sub-groups (S3b). Returns a "
      "DynamicCpPlan; ValueError with the scheduler's message.");
}
