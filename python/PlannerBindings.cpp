//===- PlannerBindings.cpp - the microbatch planner -----------------------===//
//
// thdc._thdc.planner: the host-side microbatch planner (planner/Planner.h)
// and the alignment of S1, on NumPy arrays and Python ints. Capacity
// ladders are bound by LadderBindings.cpp, dynamic CP by
// DynamicCpBindings.cpp, into the same submodule.
//
//===----------------------------------------------------------------------===//

#include "planner/Planner.h"
#include "python/Arguments.h"
#include "python/Bindings.h"
#include "python/PlannerArguments.h"
#include "reference/Reference.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

using namespace thdc;
using namespace thdc::python;

planner::PlannerConfig
thdc::python::plannerConfig(IntArg C, IntArg cp, IntArg dp,
                            OptionalIntArg maxPackedSequences,
                            bool alignmentSet, bool dummyTail,
                            OptionalIntArg vppGroup, const char *vppName) {
  planner::PlannerConfig config;
  config.maxSeqlenPerRank = integerArgument(C.object, "C");
  config.cp = integerArgument(cp.object, "cp");
  config.dp = integerArgument(dp.object, "dp");
  config.maxPackedSequences = optionalIntegerArgument(maxPackedSequences.object,
                                                      "max_packed_sequences");
  config.alignmentSet = alignmentSet;
  config.dummyTail = dummyTail;
  config.vppGroup = optionalIntegerArgument(vppGroup.object, vppName);
  return config;
}

nb::object thdc::python::toNumpy2d(std::vector<int32_t> values,
                                   std::size_t rows, std::size_t columns) {
  auto *owned = new std::vector<int32_t>(std::move(values));
  nb::capsule owner(owned, [](void *p) noexcept {
    delete static_cast<std::vector<int32_t> *>(p);
  });
  return nb::cast(nb::ndarray<nb::numpy, int32_t, nb::ndim<2>>(
      owned->data(), {rows, columns}, owner));
}

void thdc::python::checkSampleIdsSize(const char *function,
                                      std::size_t microbatches, int64_t N) {
  // sample_ids holds N-1 ids per microbatch: refuse an N whose array could
  // not be indexed with int32 (or allocated) before the planner sizes it.
  const int64_t entries = int64_t(microbatches) * std::max<int64_t>(N - 1, 0);
  if (entries > kInt32Range.max)
    throw nb::value_error(
        (std::string(function) + ": N = " + std::to_string(N) +
         " gives sample_ids " + std::to_string(microbatches) + " x " +
         std::to_string(N - 1) + " = " + std::to_string(entries) +
         " entries, more than the int32 range; N is the pipeline's sequence "
         "capacity per microbatch")
            .c_str());
}

namespace {

planner::MicrobatchPlan plannerPlan(LengthsArg paddedLengths, IntArg C,
                                    IntArg cp, IntArg dp,
                                    OptionalIntArg maxPackedSequences,
                                    bool alignmentSet, bool dummyTail,
                                    OptionalIntArg vppGroup,
                                    const std::string &algorithm) {
  const std::vector<int32_t> lengths =
      lengthsArgument(paddedLengths, "padded_lengths");
  const planner::PlannerConfig config = plannerConfig(
      C, cp, dp, maxPackedSequences, alignmentSet, dummyTail, vppGroup);
  if (algorithm == "next_fit")
    return valueOrRaise(planner::nextFitPlan(lengths, config));
  if (algorithm == "balanced")
    return valueOrRaise(planner::balancedPlan(lengths, config));
  if (algorithm == "first_fit_decreasing")
    return valueOrRaise(planner::firstFitDecreasingPlan(lengths, config));
  throw nb::value_error(("algorithm must be 'next_fit', 'balanced' or "
                         "'first_fit_decreasing'; got '" +
                         algorithm + "'")
                            .c_str());
}

nb::tuple plannerMicrobatchInputs(const planner::MicrobatchPlan &plan,
                                  IntArg rankArg, IntArg NArg) {
  const int64_t rank = integerArgument(rankArg.object, "rank");
  const int64_t N = integerArgument(NArg.object, "N");
  checkSampleIdsSize("microbatch_inputs", plan.groups.size(), N);
  planner::MicrobatchInputs inputs =
      valueOrRaise(planner::microbatchInputs(plan, rank, N));
  const std::size_t microbatches = std::size_t(inputs.numMicrobatches());
  return nb::make_tuple(toNumpy2d(std::move(inputs.sampleIds), microbatches,
                                  std::size_t(inputs.slots)),
                        toNumpy(inputs.numSeqs));
}

/// S1's `multiple` m: an int (>= 1, checked by the reference) or the name of
/// a low-precision recipe (reference::lowPrecisionMultiples).
int64_t multipleArgument(const char *function, MultipleArg multipleArg) {
  nb::handle object = multipleArg.object;
  if (nb::isinstance<nb::str>(object)) {
    Result<int64_t> multiple =
        reference::lowPrecisionMultiple(nb::borrow<nb::str>(object).c_str());
    if (!multiple)
      raiseArgument(PyExc_ValueError,
                    std::string(function) + ": " + multiple.status().message());
    return *multiple;
  }
  if (PyBool_Check(object.ptr()) || !PyIndex_Check(object.ptr()))
    raiseArgument(PyExc_TypeError,
                  std::string(function) +
                      ": multiple must be an int or a low-precision recipe "
                      "name; got " +
                      typeName(object));
  return integerArgument(object, "multiple");
}

/// S1's granularity G from Python's cp, tp, dp and multiple, through
/// reference::padGranularity (which refuses values below 1 and an overflow),
/// within int32 (the range of the padded lengths).
int64_t padGranularityArgument(const char *function, IntArg cpArg, IntArg tpArg,
                               bool sequenceParallel, IntArg dpArg,
                               bool dynamicCp, MultipleArg multipleArg) {
  const int64_t cp = integerArgument(cpArg.object, "cp");
  const int64_t tp = integerArgument(tpArg.object, "tp");
  const int64_t dp = integerArgument(dpArg.object, "dp");
  const int64_t multiple = multipleArgument(function, multipleArg);
  Result<int64_t> granularity = reference::padGranularity(
      cp, tp, sequenceParallel, dp, dynamicCp, multiple);
  if (!granularity)
    raiseArgument(PyExc_ValueError, std::string(function) + ": " +
                                        granularity.status().message());
  if (*granularity > kInt32Range.max)
    raiseArgument(
        PyExc_ValueError,
        std::string(function) + ": the alignment granularity G = " +
            std::to_string(*granularity) + " for cp = " + std::to_string(cp) +
            ", tp = " + std::to_string(tp) + ", dp = " + std::to_string(dp) +
            ", multiple = " + std::to_string(multiple) +
            " is outside the int32 range");
  return *granularity;
}

nb::object plannerAlignLengths(LengthsArg validLengths, IntArg cp, IntArg tp,
                               bool sequenceParallel, IntArg dp, bool dynamicCp,
                               MultipleArg multiple) {
  const int64_t granularity = padGranularityArgument(
      "align_lengths", cp, tp, sequenceParallel, dp, dynamicCp, multiple);
  Result<std::vector<int32_t>> padded = reference::alignLengths(
      lengthsArgument(validLengths, "valid_lengths"), granularity);
  if (!padded)
    throw nb::value_error(padded.status().message().c_str());
  return toNumpy(*padded);
}

const char *algorithmName(planner::PlanAlgorithm algorithm) {
  return algorithm == planner::PlanAlgorithm::NextFit ? "next_fit"
                                                      : "first_fit_decreasing";
}

} // namespace

void thdc::python::populatePlannerBindings(nb::module_ &m) {
  nb::module_ planning = m.def_submodule(
      "planner", "The host-side microbatch planner (planner/Planner.h): "
                 "docs/semantics.md S1, S2, S3 and S12");
  nb::class_<planner::MicrobatchPlan>(
      planning, "Plan",
      "A packing of one global batch into microbatches (S3): packs of "
      "sequence ids, and groups[m][j], the pack of microbatch m on DP x CP "
      "rank j = dp_index*cp + cp_index.")
      .def_ro("packs", &planner::MicrobatchPlan::packs,
              "the sequence ids of every pack, increasing within a pack")
      .def_ro("pack_tokens", &planner::MicrobatchPlan::packTokens,
              "the padded tokens of every pack (<= capacity)")
      .def_ro("groups", &planner::MicrobatchPlan::groups,
              "groups[m][j] = packs[m*dp + j//cp]")
      .def_ro("capacity", &planner::MicrobatchPlan::capacity,
              "the pack budget C*cp")
      .def_ro("max_real_seqs", &planner::MicrobatchPlan::maxRealSeqs,
              "the S2 cap K on sequences per pack (None: no cap)")
      .def_ro("dp", &planner::MicrobatchPlan::dp)
      .def_ro("cp", &planner::MicrobatchPlan::cp)
      .def_prop_ro("num_microbatches",
                   &planner::MicrobatchPlan::numMicrobatches)
      .def_prop_ro("algorithm",
                   [](const planner::MicrobatchPlan &p) {
                     return algorithmName(p.algorithm);
                   })
      .def("__len__", &planner::MicrobatchPlan::numMicrobatches)
      .def("__repr__", [](const planner::MicrobatchPlan &p) {
        return "Plan(" + std::to_string(p.numMicrobatches()) +
               " microbatches, " + std::to_string(p.packs.size()) +
               " packs, capacity " + std::to_string(p.capacity) + ", dp " +
               std::to_string(p.dp) + ", cp " + std::to_string(p.cp) + ", " +
               algorithmName(p.algorithm) + ")";
      });
  planning.def(
      "plan", &plannerPlan, nb::arg("padded_lengths"), nb::arg("C"),
      nb::arg("cp"), nb::arg("dp") = 1,
      nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      nb::arg("vpp_group") = nb::none(), nb::arg("algorithm") = "next_fit",
      "Packs the padded lengths (global sequence ids in DP order) into "
      "microbatches of at most C*cp tokens and, with "
      "max_packed_sequences N, at most K sequences (S2: N-1 with an "
      "alignment and the dummy tail, else N). algorithm: 'next_fit' "
      "(the reference framework's scheduler, S3), 'balanced' "
      "(first-fit decreasing unless next-fit needs fewer microbatches) "
      "or 'first_fit_decreasing'. ValueError with the planner's message "
      "on bad settings, a negative length or a sequence longer than "
      "C*cp.");
  planning.def(
      "microbatch_inputs", &plannerMicrobatchInputs, nb::arg("plan"),
      nb::arg("rank"), nb::arg("N"),
      "(sample_ids, num_seqs) of examples/pack_microbatch.mlir for DP x "
      "CP rank `rank` (cp_rank = rank % cp) and every microbatch: "
      "sample_ids an int32 array [num_microbatches, N-1] (each pack's "
      "ids, then zeros), num_seqs an int32 array [num_microbatches]. "
      "ValueError when a pack has more than N-1 sequences.");
  planning.def("align_lengths", &plannerAlignLengths, nb::arg("valid_lengths"),
               nb::arg("cp"), nb::arg("tp") = 1,
               nb::arg("sequence_parallel") = false, nb::arg("dp") = 1,
               nb::arg("dynamic_cp") = false, nb::arg("multiple") = 1,
               "S1: the padded lengths p = round_up(v, G) as an int32 array, "
               "G = pad_granularity(cp, tp, sequence_parallel, dp, "
               "dynamic_cp, multiple).");
  planning.def(
      "pad_granularity",
      [](IntArg cp, IntArg tp, bool sequenceParallel, IntArg dp, bool dynamicCp,
         MultipleArg multiple) {
        return padGranularityArgument("pad_granularity", cp, tp,
                                      sequenceParallel, dp, dynamicCp,
                                      multiple);
      },
      nb::arg("cp"), nb::arg("tp") = 1, nb::arg("sequence_parallel") = false,
      nb::arg("dp") = 1, nb::arg("dynamic_cp") = false, nb::arg("multiple") = 1,
      "S1: the alignment granularity G = tpPad * lcm(cpPad, share * m): "
      "cpPad = 2*cp if cp > 1 else 1 (2*cp*dp with dynamic CP), share = "
      "cpPad/2 if cpPad > 1 else 1 (the ranks a sequence is divided among), "
      "tpPad = tp under sequence parallelism else 1, and m = multiple, an "
      "int >= 1 or a recipe of LOW_PRECISION_MULTIPLES: every rank's share "
      "of every sequence is then a multiple of m. ValueError on values "
      "below 1, an unknown recipe, or a G outside int32.");
  planning.def(
      "capacity_multiple",
      [](IntArg tp, bool sequenceParallel, MultipleArg multiple) {
        Result<int64_t> rows = reference::capacityRowMultiple(
            integerArgument(tp.object, "tp"), sequenceParallel,
            multipleArgument("capacity_multiple", multiple));
        if (!rows)
          raiseArgument(PyExc_ValueError,
                        "capacity_multiple: " + rows.status().message());
        return *rows;
      },
      nb::arg("tp") = 1, nb::arg("sequence_parallel") = false,
      nb::arg("multiple") = 1,
      "S1, graph mode: what the static rows C of every CP rank must be a "
      "multiple of for a recipe's multiple m: m * tp under sequence "
      "parallelism, else m (check_capacity checks a C).");
  planning.def(
      "check_capacity",
      [](IntArg C, IntArg tp, bool sequenceParallel, MultipleArg multiple) {
        const int64_t rows = integerArgument(C.object, "C");
        const int64_t tpSize = integerArgument(tp.object, "tp");
        Result<int64_t> rowMultiple = reference::checkCapacityAlignment(
            rows, tpSize, sequenceParallel,
            multipleArgument("check_capacity", multiple));
        if (!rowMultiple)
          raiseArgument(PyExc_ValueError,
                        "check_capacity: " + rowMultiple.status().message());
        return *rowMultiple;
      },
      nb::arg("C"), nb::arg("tp") = 1, nb::arg("sequence_parallel") = false,
      nb::arg("multiple") = 1,
      "S1, graph mode: the condition a low-precision recipe puts on the "
      "static rows C of every CP rank, which feeds its GEMMs exactly C rows "
      "(C/tp under sequence parallelism): C % (m * tpPad) == 0, m = multiple "
      "(an int >= 1 or a recipe of LOW_PRECISION_MULTIPLES), tpPad = tp "
      "under sequence parallelism else 1. Returns m * tpPad; ValueError "
      "naming the nearest capacities that hold otherwise.");
  {
    nb::dict multiples;
    for (const reference::LowPrecisionMultiple &entry :
         reference::lowPrecisionMultiples())
      multiples[entry.recipe] = entry.multiple;
    planning.attr("LOW_PRECISION_MULTIPLES") = multiples;
  }
  planning.def(
      "max_microbatches",
      [](IntArg globalBatchSize, IntArg maxSeqlen, IntArg C, IntArg cp,
         IntArg dp, OptionalIntArg maxPackedSequences, bool alignmentSet,
         bool dummyTail, OptionalIntArg vppGroup) {
        const planner::PlannerConfig config = plannerConfig(
            C, cp, dp, maxPackedSequences, alignmentSet, dummyTail, vppGroup);
        return valueOrRaise(planner::microbatchUpperBound(
            config,
            integerArgument(globalBatchSize.object, "global_batch_size"),
            integerArgument(maxSeqlen.object, "max_seqlen")));
      },
      nb::arg("global_batch_size"), nb::arg("max_seqlen"), nb::arg("C"),
      nb::arg("cp"), nb::arg("dp") = 1,
      nb::arg("max_packed_sequences") = nb::none(),
      nb::arg("alignment_set") = true, nb::arg("dummy_tail") = true,
      nb::arg("vpp_group") = nb::none(),
      "S12: the upper bound U on the microbatches of a global batch of "
      "global_batch_size sequences of padded length at most max_seqlen: "
      "how many graph slots (or static output buffers) to prepare. A "
      "next-fit plan never needs more, a balanced plan never more than "
      "next-fit.");
  planning.def(
      "graph_capture_count",
      [](IntArg numMicrobatches, IntArg upperBound, bool useRuntimeCount) {
        return reference::graphCaptureCount(
            integerArgument(numMicrobatches.object, "num_microbatches",
                            kInt64Range),
            integerArgument(upperBound.object, "upper_bound", kInt64Range),
            useRuntimeCount);
      },
      nb::arg("num_microbatches"), nb::arg("upper_bound"),
      nb::arg("use_runtime_count") = false,
      "S12: max(num_microbatches, upper_bound), or num_microbatches alone "
      "when the runtime count must be used.");
}
