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

#include <array>
#include <atomic>
#include <mutex>

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
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxPushCurrent)                                                          \
  X(cuCtxPopCurrent)                                                           \
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

// Entry points whose newest version (the one cuGetProcAddress returns for
// CUDA_VERSION) has another signature than the header's name: resolved at
// the version that header declares. CUDA 13 added cuCtxGetDevice(device,
// context); cuda.h's cuCtxGetDevice is still the CUDA 2.0 one.
#define THDC_CUDA_VERSIONED_FUNCTIONS(X) X(cuCtxGetDevice, 2000)

#define THDC_DECLARE(name) decltype(&::name) name = nullptr;
#define THDC_DECLARE_VERSIONED(name, version) THDC_DECLARE(name)
  THDC_CUDA_FUNCTIONS(THDC_DECLARE)
  THDC_CUDA_VERSIONED_FUNCTIONS(THDC_DECLARE_VERSIONED)
#undef THDC_DECLARE_VERSIONED
#undef THDC_DECLARE

  /// Most devices the runtime addresses (ordinals 0 .. kMaxDevices-1).
  static constexpr int kMaxDevices = 64;

  /// The loaded and initialised driver; an error when there is no driver or
  /// no GPU. Loads once per process and changes no context.
  static Result<const CudaDriver *> get();

  /// "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)".
  std::string describe(const char *call, CUresult result) const;

  /// The device of the calling thread's current context, or -1 when the
  /// thread has none.
  int currentDevice() const;

  /// `requested` when it is >= 0, else the current device, else 0; an error
  /// for an ordinal the driver does not have.
  Result<int> resolveDevice(int requested) const;

  /// The primary context of `device`, retained on first use (the context
  /// PyTorch, CuPy and the CUDA runtime use).
  Result<CUcontext> primaryContext(int device) const;

  /// The device's compute capability as "sm_90".
  std::string architecture(int device) const;
  /// The number of streaming multiprocessors of `device`.
  int multiprocessorCount(int device) const;
  /// An integer attribute of `device` (0 when the query fails).
  int attribute(int device, CUdevice_attribute which) const;
  /// The device's name, e.g. "NVIDIA H200".
  std::string name(int device) const;

  int deviceCount = 0;
  int driverVersion = 0;
};

/// Makes the primary context of a device current for a scope, and restores
/// the caller's context afterwards: nothing is pushed when it is current
/// already, so the common case costs one cuCtxGetCurrent.
class ScopedDevice {
public:
  ScopedDevice() = default;
  ScopedDevice(const ScopedDevice &) = delete;
  ScopedDevice &operator=(const ScopedDevice &) = delete;
  ~ScopedDevice();

  /// Enters `device` (-1: the current device, else 0).
  Status enter(const CudaDriver &driver, int device);
  int device() const { return device_; }

private:
  const CudaDriver *driver_ = nullptr;
  int device_ = -1;
  bool pushed_ = false;
};

/// A value per device (a context, a loaded kernel), made by the first call
/// that needs it and kept for the life of the process: later calls read it
/// without taking the lock.
template <typename T> class PerDevice {
public:
  /// The value of `device` (0 .. CudaDriver::kMaxDevices-1), or the
  /// Result<T> of `make()` when there is none yet; a failure is not kept.
  template <typename Make> Result<T> get(int device, Make make) {
    if (T value = values[device].load(std::memory_order_acquire))
      return value;
    std::lock_guard<std::mutex> lock(mutex);
    if (T value = values[device].load(std::memory_order_relaxed))
      return value;
    Result<T> made = make();
    if (made)
      values[device].store(*made, std::memory_order_release);
    return made;
  }

private:
  std::mutex mutex;
  std::array<std::atomic<T>, CudaDriver::kMaxDevices> values{};
};

} // namespace thdc::runtime

#endif // THDC_RUNTIME_CUDADRIVER_H
