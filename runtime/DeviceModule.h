//===- DeviceModule.h - a kernel's module on one device ---------*- C++ -*-===//
//
// Internal to the runtime (not installed): how the runtime loads a kernel on
// a device. Executable loads a bundle's: the bundle's cubin where it was
// assembled for that chip, else the cubin thdc's cache holds for the
// bundle's PTX, else the driver's compile of the PTX, kept in the cache for
// later processes. The runtime's own kernels (the gather) are PTX compiled
// in: the driver's compile of it, through the same compilePtx.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_DEVICEMODULE_H
#define THDC_RUNTIME_DEVICEMODULE_H

#include "runtime/CudaDriver.h"
#include "runtime/Status.h"

#include <string>

namespace thdc::runtime {

/// Where thdc's cache keeps the cubin the driver compiles from `ptx` for
/// `arch`, or empty when `cacheDir` is "-" or a folder another user could
/// write to (not read). The key covers the PTX, the GPU, the driver that
/// compiles it and the optimisation level.
std::string cachedCubinPath(const CudaDriver &cu, const std::string &ptx,
                            const std::string &arch,
                            const std::string &cacheDir);

/// Compiles `ptx` for the current context's device with the driver's linker
/// and loads the cubin as `module`; the cubin is kept at `cubinPath` (when
/// not empty) for later processes, and its bytes handed back in `cubin`.
Status compilePtx(const CudaDriver &cu, const std::string &ptx,
                  const std::string &kernelName, const std::string &arch,
                  const std::string &cubinPath, CUmodule *module,
                  std::string *cubin);

/// A kernel's code loaded on one device. Cubins are loaded as modules: on
/// an H200 cuLibraryLoadData was faster than cuModuleLoadData, but the
/// context's own load then happened in cuKernelGetFunction (0.17-0.31 ms in
/// a new process, against 0.18-0.24 ms for cuModuleLoadData plus 0.03-0.04
/// ms for cuModuleGetFunction).
struct LoadedCode {
  CUmodule module = nullptr;
  CUfunction function = nullptr;

  void unload(const CudaDriver &cu) {
    if (module)
      cu.cuModuleUnload(module);
    *this = LoadedCode();
  }
};

/// Loads `cubin` on the current context. False when the driver refuses it
/// (another chip's, or damaged): the caller falls back to the PTX.
bool loadCubin(const CudaDriver &cu, const std::string &cubin,
               LoadedCode *code);

/// The function `name` of `code` for the current context.
Status findFunction(const CudaDriver &cu, const std::string &name,
                    LoadedCode *code);

/// Compiles `ptx` (compilePtx, no cache entry) on the current context, of
/// a device of `arch`, and finds its function `name`: nothing stays loaded
/// on an error.
Result<LoadedCode> loadPtx(const CudaDriver &cu, const std::string &ptx,
                           const std::string &name, const std::string &arch);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_DEVICEMODULE_H
