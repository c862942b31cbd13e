//===- CudaDriver.h - the CUDA driver API, loaded at run time --*- C++ -*-===//
//
// libcuda.so.1 is opened with dlopen and its entry points resolved through
// cuGetProcAddress, so that programs build and run on machines without a
// driver or GPU (where they fall back to the host code of a bundle).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_CUDADRIVER_H
#define THDC_RUNTIME_CUDADRIVER_H

#include "runtime/Status.h"

#include <cuda.h>

#include <string>

namespace thdc::runtime {

/// The driver entry points the runtime uses.
struct CudaDriver {
#define THDC_CUDA_FUNCTIONS(X)                                                 \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceGetName)                                                           \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetCurrent)                                                           \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuLinkCreate)                                                              \
  X(cuLinkAddData)                                                             \
  X(cuLinkComplete)                                                            \
  X(cuLinkDestroy)                                                             \
  X(cuLaunchKernel)                                                            \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuEventDestroy)                                                            \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)

#define THDC_DECLARE(name) decltype(&::name) name = nullptr;
  THDC_CUDA_FUNCTIONS(THDC_DECLARE)
#undef THDC_DECLARE

  /// The loaded driver, initialised, with the primary context of device 0
  /// current on the calling thread; an error when there is no driver or no
  /// GPU. Loads once per process.
  static Result<const CudaDriver *> get();

  /// "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)".
  std::string describe(const char *call, CUresult result) const;

  /// Makes the primary context current on the calling thread.
  Status makeContextCurrent() const;

  /// The device's compute capability as "sm_90".
  std::string architecture() const;

  CUdevice device = 0;
  CUcontext context = nullptr;
  int driverVersion = 0;
};

} // namespace thdc::runtime

#endif // THDC_RUNTIME_CUDADRIVER_H
