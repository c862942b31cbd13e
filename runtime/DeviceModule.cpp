//===- DeviceModule.cpp - a kernel's module on one device -----------------===//

#include "runtime/DeviceModule.h"
#include "runtime/Cache.h"
#include "runtime/PtxCompiler.h"

#include <fmt/format.h>

#include <cstdint>

using namespace thdc::runtime;

std::string thdc::runtime::cachedCubinPath(const CudaDriver &cu,
                                           const std::string &ptx,
                                           const std::string &arch,
                                           const std::string &cacheDir) {
  std::string key =
      cacheKey(ptx + "\n" + arch + "\n" + std::to_string(cu.driverVersion) +
               "\nO" + std::to_string(ptxOptLevel()));
  return cacheDir == "-" || !prepareCacheDirectory(cacheDir)
             ? std::string()
             : joinPath(cacheDir, "cubin-" + key + ".cubin");
}

Status thdc::runtime::compilePtx(const CudaDriver &cu, const std::string &ptx,
                                 const std::string &kernelName,
                                 const std::string &arch,
                                 const std::string &cubinPath, CUmodule *module,
                                 std::string *cubin) {
  CUlinkState link = nullptr;
  void *linked = nullptr;
  size_t linkedSize = 0;
  // The driver's levels are 0 to 4 (4, the default, is ptxas -O3).
  int level = ptxOptLevel();
  CUjit_option option = CU_JIT_OPTIMIZATION_LEVEL;
  void *value = reinterpret_cast<void *>(uintptr_t(level == 3 ? 4 : level));
  CUresult r = cu.cuLinkCreate(1, &option, &value, &link);
  if (r == CUDA_SUCCESS)
    r = cu.cuLinkAddData(link, CU_JIT_INPUT_PTX,
                         const_cast<char *>(ptx.c_str()), ptx.size() + 1,
                         kernelName.c_str(), 0, nullptr, nullptr);
  if (r == CUDA_SUCCESS)
    r = cu.cuLinkComplete(link, &linked, &linkedSize);
  if (r == CUDA_SUCCESS)
    r = cu.cuModuleLoadData(module, linked);
  if (r == CUDA_SUCCESS)
    cubin->assign(static_cast<const char *>(linked), linkedSize);
  // A cubin that cannot be cached (a full disk) only costs the next process
  // the driver's compile again.
  if (r == CUDA_SUCCESS && !cubinPath.empty())
    (void)writeFileAtomically(cubinPath, encodeCachedCubin(*cubin));
  if (link)
    cu.cuLinkDestroy(link);
  if (r != CUDA_SUCCESS)
    return Status::error(
        fmt::format("loading the PTX of kernel '{}' for {}: {}", kernelName,
                    arch, cu.describe("cuLinkAddData/cuModuleLoadData", r)));
  return Status();
}

bool thdc::runtime::loadCubin(const CudaDriver &cu, const std::string &cubin,
                              LoadedCode *code) {
  CUresult r = cu.cuModuleLoadData(&code->module, cubin.data());
  if (r != CUDA_SUCCESS)
    *code = LoadedCode();
  return r == CUDA_SUCCESS;
}

Status thdc::runtime::findFunction(const CudaDriver &cu,
                                   const std::string &name, LoadedCode *code) {
  CUresult r =
      cu.cuModuleGetFunction(&code->function, code->module, name.c_str());
  if (r != CUDA_SUCCESS)
    return Status::error(fmt::format("kernel '{}': {}", name,
                                     cu.describe("cuModuleGetFunction", r)));
  return Status();
}

Result<LoadedCode> thdc::runtime::loadPtx(const CudaDriver &cu,
                                          const std::string &ptx,
                                          const std::string &name,
                                          const std::string &arch) {
  LoadedCode code;
  std::string cubin;
  Status loaded = compilePtx(cu, ptx, name, arch, /*cubinPath=*/std::string(),
                             &code.module, &cubin);
  if (loaded)
    loaded = findFunction(cu, name, &code);
  if (!loaded) {
    code.unload(cu);
    return loaded;
  }
  return code;
}
