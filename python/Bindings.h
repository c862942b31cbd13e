//===- Bindings.h - the binding units of thdc._thdc ------------*- C++ -*-===//
//
// One populate function per binding unit, as MLIR's Python bindings are
// cut: MainModule.cpp calls them in order, each adds its part to the module.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_PYTHON_BINDINGS_H
#define THDC_PYTHON_BINDINGS_H

#include "runtime/Executable.h"

#include <nanobind/nanobind.h>

#include <memory>
#include <string>

namespace thdc::python {

/// How a kernel was made, for `Kernel.compile_info`.
struct CompileRecord {
  std::string source; ///< "bundle", "compiled", "memory-cache", "disk-cache"
  double micros = 0, compileMicros = 0, loadMicros = 0;
  std::string key, cacheNote;
};

/// A thdc._thdc.Kernel over `executable` (KernelBindings.cpp).
nanobind::object makeKernel(std::shared_ptr<runtime::Executable> executable,
                            CompileRecord record);

/// Kernel, load, RuntimeGraph and capture_pointers, cuda_available and
/// current_device (KernelBindings.cpp).
void populateKernelBindings(nanobind::module_ &m);
/// Gather (GatherBindings.cpp).
void populateGatherBindings(nanobind::module_ &m);
/// The CUDA ordinal of a thdc._thdc.Gather (-1: the host form); TypeError
/// for anything else.
int gatherDevice(nanobind::handle gather);
/// InputGather, the microbatch load contract (InputGatherBindings.cpp).
void populateInputGatherBindings(nanobind::module_ &m);
/// compile, compile_cached, read_source, tool_main, GPU_OPTIONS and has_jit
/// (CompilerBindings.cpp).
void populateCompilerBindings(nanobind::module_ &m);
/// describe_status and the submodule `reference` (ReferenceBindings.cpp).
void populateReferenceBindings(nanobind::module_ &m);
/// The submodule `planner` (PlannerBindings.cpp).
void populatePlannerBindings(nanobind::module_ &m);
/// The planner's capacity ladders: LadderPlan, ladder_plan, assign_rungs,
/// check_ladder and rung_index, into `planner` (LadderBindings.cpp).
void populateLadderBindings(nanobind::module_ &m);
/// Dynamic CP's DynamicCpPlan and dynamic_cp_plan, into `planner`
/// (DynamicCpBindings.cpp).
void populateDynamicCpBindings(nanobind::module_ &m);

} // namespace thdc::python

#endif // THDC_PYTHON_BINDINGS_H
