//===- MainModule.cpp - thdc's Python module (thdc._thdc) -----------------===//
//
// Binds the MLIR-free runtime (runtime/Executable.h) and, when the build has
// MLIR, the JIT (compiler/Jit.h) to Python. A call takes any DLPack arrays:
// torch tensors through the framework's C exchange table (no capsule, no
// Python call per tensor), everything else through nanobind's DLPack and
// buffer-protocol import (python/Arguments.h). The submodules `planner` (the
// host-side microbatch planner) and `reference` (the reference semantics,
// for tests) work on NumPy arrays. Each part is bound by its own unit
// (python/Bindings.h); this file only lists them.
//
//===----------------------------------------------------------------------===//

#include "python/Bindings.h"

NB_MODULE(_thdc, m) {
  m.doc() = "thdc's runtime (and JIT, where built with MLIR) for Python";
  thdc::python::populateKernelBindings(m);
  thdc::python::populateGatherBindings(m);
  thdc::python::populateInputGatherBindings(m);
  thdc::python::populateCompilerBindings(m);
  thdc::python::populateReferenceBindings(m);
  thdc::python::populatePlannerBindings(m);
  thdc::python::populateLadderBindings(m);
  thdc::python::populateDynamicCpBindings(m);
}
