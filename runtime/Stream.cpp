//===- Stream.cpp - create, wait for and destroy a stream -----------------===//

#include "runtime/Stream.h"
#include "runtime/CudaDriver.h"

using namespace thdc::runtime;

Result<void *> thdc::runtime::createStream(Backend backend, int device) {
  if (backend != Backend::Cuda)
    return static_cast<void *>(nullptr);
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  CUstream stream = nullptr;
  CUresult r = cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS)
    return Status::error(cu->describe("cuStreamCreate", r));
  return static_cast<void *>(stream);
}

Status thdc::runtime::synchronizeStream(Backend backend, void *stream,
                                        int device) {
  if (backend != Backend::Cuda)
    return Status();
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  CUresult r = cu->cuStreamSynchronize(static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS
             ? Status()
             : Status::error(cu->describe("cuStreamSynchronize", r));
}

void thdc::runtime::destroyStream(Backend backend, void *stream, int device) {
  if (backend != Backend::Cuda || !stream)
    return;
  Result<const CudaDriver *> cu = CudaDriver::get();
  ScopedDevice scope;
  if (cu && scope.enter(**cu, device))
    (*cu)->cuStreamDestroy(static_cast<CUstream>(stream));
}
