//===- CudaDriver.cpp - the CUDA driver API, loaded at run time -----------===//

#include "runtime/CudaDriver.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <dlfcn.h>
#include <mutex>

using namespace thdc::runtime;

namespace {
using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);

Result<CudaDriver> loadDriver() {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return Status::error(fmt::format("no CUDA driver: {}", dlerror()));
  auto getProc =
      reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (!getProc)
    return Status::error("the CUDA driver has no cuGetProcAddress_v2; a "
                         "driver for CUDA 12 or newer is required");
  CudaDriver driver;
  CUdriverProcAddressQueryResult found;
  // Names without the _v2 suffixes (stringized before cuda.h's macros can
  // expand them): cuGetProcAddress picks the version that matches the CUDA
  // headers this runtime was built with, or the one named in
  // THDC_CUDA_VERSIONED_FUNCTIONS.
#define THDC_RESOLVE_AT(member, symbol, version)                               \
  if (getProc(symbol, reinterpret_cast<void **>(&driver.member), version,      \
              CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||          \
      !driver.member)                                                          \
    return Status::error("the CUDA driver lacks " symbol);
#define THDC_RESOLVE(name) THDC_RESOLVE_AT(name, #name, CUDA_VERSION)
#define THDC_RESOLVE_VERSIONED(name, version)                                  \
  THDC_RESOLVE_AT(name, #name, version)
  THDC_CUDA_FUNCTIONS(THDC_RESOLVE)
  THDC_CUDA_VERSIONED_FUNCTIONS(THDC_RESOLVE_VERSIONED)
#undef THDC_RESOLVE_VERSIONED
#undef THDC_RESOLVE_AT
#undef THDC_RESOLVE

  CUresult result = driver.cuInit(0);
  if (result != CUDA_SUCCESS)
    return Status::error(driver.describe("cuInit", result));
  driver.cuDriverGetVersion(&driver.driverVersion);
  result = driver.cuDeviceGetCount(&driver.deviceCount);
  if (result != CUDA_SUCCESS)
    return Status::error(driver.describe("cuDeviceGetCount", result));
  if (driver.deviceCount == 0)
    return Status::error("the CUDA driver found no GPU");
  driver.deviceCount = std::min(driver.deviceCount, CudaDriver::kMaxDevices);
  return driver;
}

/// Primary contexts, retained once per device for the life of the process.
PerDevice<CUcontext> &primaryContexts() {
  static PerDevice<CUcontext> *table = new PerDevice<CUcontext>();
  return *table;
}
} // namespace

Result<const CudaDriver *> CudaDriver::get() {
  static std::once_flag once;
  static Result<CudaDriver> *loaded = nullptr;
  std::call_once(once, [] { loaded = new Result<CudaDriver>(loadDriver()); });
  if (!*loaded)
    return loaded->status();
  return &**loaded;
}

int CudaDriver::currentDevice() const {
  CUcontext current = nullptr;
  if (cuCtxGetCurrent(&current) != CUDA_SUCCESS || !current)
    return -1;
  CUdevice device = -1;
  if (cuCtxGetDevice(&device) != CUDA_SUCCESS)
    return -1;
  return int(device);
}

Result<int> CudaDriver::resolveDevice(int requested) const {
  int device = requested >= 0 ? requested : currentDevice();
  if (device < 0)
    device = 0;
  if (device >= deviceCount)
    return Status::error(
        fmt::format("CUDA device {} does not exist (the driver sees {})",
                    device, deviceCount));
  return device;
}

Result<CUcontext> CudaDriver::primaryContext(int device) const {
  if (device < 0 || device >= deviceCount)
    return Status::error(fmt::format("CUDA device {} does not exist", device));
  return primaryContexts().get(device, [&]() -> Result<CUcontext> {
    CUdevice handle = 0;
    CUresult result = cuDeviceGet(&handle, device);
    CUcontext context = nullptr;
    if (result == CUDA_SUCCESS)
      result = cuDevicePrimaryCtxRetain(&context, handle);
    if (result != CUDA_SUCCESS)
      return Status::error(describe("cuDevicePrimaryCtxRetain", result));
    return context;
  });
}

ScopedDevice::~ScopedDevice() {
  if (pushed_) {
    CUcontext popped = nullptr;
    driver_->cuCtxPopCurrent(&popped);
  }
}

Status ScopedDevice::enter(const CudaDriver &driver, int device) {
  driver_ = &driver;
  // One look at the current context serves both the default device and
  // the is-it-current test: this runs on every launch.
  CUcontext current = nullptr;
  driver.cuCtxGetCurrent(&current);
  if (device < 0 && current) {
    CUdevice currentDevice = 0;
    if (driver.cuCtxGetDevice(&currentDevice) == CUDA_SUCCESS)
      device = int(currentDevice);
  }
  Result<int> resolved = driver.resolveDevice(device < 0 ? 0 : device);
  if (!resolved)
    return resolved.status();
  device_ = *resolved;
  Result<CUcontext> primary = driver.primaryContext(device_);
  if (!primary)
    return primary.status();
  if (current == *primary)
    return Status();
  CUresult result = driver.cuCtxPushCurrent(*primary);
  if (result != CUDA_SUCCESS)
    return Status::error(driver.describe("cuCtxPushCurrent", result));
  pushed_ = true;
  return Status();
}

std::string CudaDriver::describe(const char *call, CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  if (!text)
    return fmt::format("{}: {} (code {})", call, name ? name : "CUDA error",
                       int(result));
  return fmt::format("{}: {} ({})", call, name ? name : "CUDA error", text);
}

int CudaDriver::attribute(int device, CUdevice_attribute which) const {
  CUdevice handle = 0;
  int value = 0;
  cuDeviceGet(&handle, device);
  cuDeviceGetAttribute(&value, which, handle);
  return value;
}

std::string CudaDriver::architecture(int device) const {
  return "sm_" +
         std::to_string(
             attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)) +
         std::to_string(
             attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
}

int CudaDriver::multiprocessorCount(int device) const {
  return attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

std::string CudaDriver::name(int device) const {
  CUdevice handle = 0;
  char text[256] = {0};
  cuDeviceGet(&handle, device);
  cuDeviceGetName(text, sizeof(text) - 1, handle);
  return text;
}
