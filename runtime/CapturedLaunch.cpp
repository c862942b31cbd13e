//===- CapturedLaunch.cpp - one launch captured in a CUDA graph -----------===//

#include "runtime/CudaDriver.h"
#include "runtime/Executable.h"

#include <utility>

using namespace thdc::runtime;

Result<CapturedLaunch> CapturedLaunch::capture(const Executable &executable,
                                               void *const *buffers,
                                               void *stream, int device) {
  CapturedLaunch captured;
  captured.executable_ = &executable;
  captured.buffers_ = buffers;
  if (executable.backend() == Backend::Host)
    return captured;
  const CudaDriver *cu = *CudaDriver::get();
  if (!stream)
    return Status::error("capturing needs a stream other than the legacy "
                         "default stream");
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  captured.device_ = scope.device();
  // Loaded before the capture begins: no module load inside a capture.
  if (Status prepared = executable.prepare(captured.device_); !prepared)
    return prepared;
  CUstream s = static_cast<CUstream>(stream);
  CUresult r = cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS)
    return Status::error(cu->describe("cuStreamBeginCapture", r));
  Status launched = executable.launch(buffers, stream, captured.device_);
  CUgraph graph = nullptr;
  r = cu->cuStreamEndCapture(s, &graph);
  if (!launched)
    return launched;
  if (r != CUDA_SUCCESS)
    return Status::error(cu->describe("cuStreamEndCapture", r));
  CUgraphExec exec = nullptr;
  r = cu->cuGraphInstantiateWithFlags(&exec, graph, 0);
  if (r != CUDA_SUCCESS) {
    cu->cuGraphDestroy(graph);
    return Status::error(cu->describe("cuGraphInstantiate", r));
  }
  captured.graph_ = graph;
  captured.exec_ = exec;
  return captured;
}

CapturedLaunch::CapturedLaunch(CapturedLaunch &&other) noexcept {
  *this = std::move(other);
}

CapturedLaunch &CapturedLaunch::operator=(CapturedLaunch &&other) noexcept {
  std::swap(executable_, other.executable_);
  std::swap(buffers_, other.buffers_);
  std::swap(device_, other.device_);
  std::swap(graph_, other.graph_);
  std::swap(exec_, other.exec_);
  return *this;
}

CapturedLaunch::~CapturedLaunch() {
  if (!exec_ && !graph_)
    return;
  Result<const CudaDriver *> cu = CudaDriver::get();
  ScopedDevice scope;
  if (cu && scope.enter(**cu, device_)) {
    if (exec_)
      (*cu)->cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
    if (graph_)
      (*cu)->cuGraphDestroy(static_cast<CUgraph>(graph_));
  }
}

Status CapturedLaunch::replay(void *stream) const {
  if (!exec_)
    return executable_->launch(buffers_, stream);
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device_); !entered)
    return entered;
  CUresult r = cu->cuGraphLaunch(static_cast<CUgraphExec>(exec_),
                                 static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? Status()
                           : Status::error(cu->describe("cuGraphLaunch", r));
}
