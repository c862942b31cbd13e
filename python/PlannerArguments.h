//===- PlannerArguments.h - the planner's arguments from Python -*- C++ -*-===//
//
// What the planner's binding units (PlannerBindings.cpp, LadderBindings.cpp,
// DynamicCpBindings.cpp) share: the planner's settings read from Python,
// its errors raised as ValueError, and int32 tables returned as NumPy
// arrays.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PYTHON_PLANNERARGUMENTS_H
#define THDC_PYTHON_PLANNERARGUMENTS_H

#include "planner/Planner.h"
#include "python/Arguments.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace thdc::python {

/// The planner's value, or a ValueError with its message.
template <typename T> T valueOrRaise(Result<T> result) {
  if (!result)
    throw nb::value_error(result.status().message().c_str());
  return std::move(*result);
}

/// The planner's settings from Python: every size an int within int32, so
/// that no product the planner forms (C*cp, dp*vpp_group, ...) can wrap.
/// `vppName` names the vppGroup argument in messages.
planner::PlannerConfig plannerConfig(IntArg C, IntArg cp, IntArg dp,
                                     OptionalIntArg maxPackedSequences,
                                     bool alignmentSet, bool dummyTail,
                                     OptionalIntArg vppGroup,
                                     const char *vppName = "vpp_group");

/// `values` (rows x columns, row-major) as a new 2-D int32 NumPy array that
/// owns them.
nb::object toNumpy2d(std::vector<int32_t> values, std::size_t rows,
                     std::size_t columns);

/// ValueError when a sample_ids table of `microbatches` x (N-1) entries
/// could not be indexed with int32 (or allocated); `function` and N name
/// the call.
void checkSampleIdsSize(const char *function, std::size_t microbatches,
                        int64_t N);

} // namespace thdc::python

#endif // THDC_PYTHON_PLANNERARGUMENTS_H
