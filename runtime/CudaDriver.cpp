//===- CudaDriver.cpp - the CUDA driver API, loaded at run time -----------===//

#include "runtime/CudaDriver.h"

#include <dlfcn.h>
#include <mutex>

using namespace thdc::runtime;

namespace {
using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);

Result<CudaDriver> loadDriver() {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return Status::error(std::string("no CUDA driver: ") + dlerror());
  auto getProc =
      reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (!getProc)
    return Status::error("the CUDA driver has no cuGetProcAddress_v2; a "
                         "driver for CUDA 12 or newer is required");
  CudaDriver driver;
  CUdriverProcAddressQueryResult found;
  // Names without the _v2 suffixes: cuGetProcAddress picks the version that
  // matches the CUDA headers this runtime was built with.
#define THDC_RESOLVE(name)                                                     \
  if (getProc(#name, reinterpret_cast<void **>(&driver.name), CUDA_VERSION,    \
              CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||          \
      !driver.name)                                                            \
    return Status::error("the CUDA driver lacks " #name);
  THDC_CUDA_FUNCTIONS(THDC_RESOLVE)
#undef THDC_RESOLVE

  CUresult result = driver.cuInit(0);
  if (result != CUDA_SUCCESS)
    return Status::error(driver.describe("cuInit", result));
  driver.cuDriverGetVersion(&driver.driverVersion);
  int count = 0;
  result = driver.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS)
    return Status::error(driver.describe("cuDeviceGetCount", result));
  if (count == 0)
    return Status::error("the CUDA driver found no GPU");
  if ((result = driver.cuDeviceGet(&driver.device, 0)) != CUDA_SUCCESS)
    return Status::error(driver.describe("cuDeviceGet", result));
  if ((result = driver.cuDevicePrimaryCtxRetain(&driver.context,
                                                driver.device)) != CUDA_SUCCESS)
    return Status::error(driver.describe("cuDevicePrimaryCtxRetain", result));
  return driver;
}
} // namespace

Result<const CudaDriver *> CudaDriver::get() {
  static std::once_flag once;
  static Result<CudaDriver> *loaded = nullptr;
  std::call_once(once, [] { loaded = new Result<CudaDriver>(loadDriver()); });
  if (!*loaded)
    return loaded->status();
  const CudaDriver *driver = &**loaded;
  if (Status status = driver->makeContextCurrent(); !status)
    return status;
  return driver;
}

Status CudaDriver::makeContextCurrent() const {
  CUcontext current = nullptr;
  if (cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context)
    return Status();
  CUresult result = cuCtxSetCurrent(context);
  if (result != CUDA_SUCCESS)
    return Status::error(describe("cuCtxSetCurrent", result));
  return Status();
}

std::string CudaDriver::describe(const char *call, CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  return std::string(call) + ": " + (name ? name : "CUDA error") + " (" +
         (text ? text : ("code " + std::to_string(int(result))).c_str()) + ")";
}

std::string CudaDriver::architecture() const {
  int major = 0, minor = 0;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       device);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       device);
  return "sm_" + std::to_string(major) + std::to_string(minor);
}
