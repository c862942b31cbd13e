//===- PtxCompiler.h - PTX to cubin in-process, with nvJitLink --*- C++ -*-===//
//
// CUDA's nvJitLink (libnvJitLink.so, loaded with dlopen when first needed)
// compiles a kernel's PTX to a cubin inside the calling process, without a
// GPU and without starting ptxas: the JIT puts that cubin into its bundles so
// that loading one compiles nothing. Where the library is missing, callers
// fall back to the driver's own PTX compile.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_PTXCOMPILER_H
#define THDC_RUNTIME_PTXCOMPILER_H

#include "runtime/Status.h"

#include <string>
#include <string_view>

namespace thdc::runtime {

/// Who compiles PTX to a cubin ($THDC_PTX_COMPILER): the driver when the
/// module is loaded (Driver, the default: on an H200 it made a cold JIT
/// compile to a loaded module 87 ms against nvJitLink's 103, bench/RESULTS.md);
/// nvJitLink in-process during the compile when it is found, else the
/// driver (NvJitLink).
enum class PtxCompilerChoice { Driver, NvJitLink };

/// $THDC_PTX_COMPILER: "driver" (or unset) or "nvjitlink"; anything else is
/// reported once on stderr and read as "driver".
PtxCompilerChoice ptxCompilerChoice();

/// The optimisation level of the PTX compile ($THDC_PTX_OPT_LEVEL, 0 to 3;
/// default 3, what ptxas and the driver use by default). nvJitLink accepts
/// 0 and 3 only: 1 and 2 compile at 0 there.
int ptxOptLevel();

/// Compiles `ptx` for `chip` ("sm_90") at `optLevel` to a cubin with
/// nvJitLink. The library is $THDC_NVJITLINK when set (empty: none), else
/// libnvJitLink.so.13 or .so.12 from the loader's path, $CUDA_HOME/lib64,
/// $CUDA_PATH/lib64 or /usr/local/cuda/lib64. The error says why (no
/// library: compilePtxAvailable() is false; or nvJitLink's log).
Result<std::string> compilePtxInProcess(std::string_view ptx,
                                        const std::string &chip, int optLevel);

/// Whether nvJitLink could be loaded (loads it on the first call): an error
/// saying why not.
Status compilePtxAvailable();

/// nvJitLink's version as "13.0", or empty when it is not loaded.
std::string ptxCompilerVersion();

/// Loads nvJitLink and compiles a tiny kernel for `chip` on a thread of its
/// own, so that a compile soon after finds the library loaded and its code
/// in memory; returns at once. Does nothing when nvJitLink is not used.
void warmUpPtxCompiler(const std::string &chip);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_PTXCOMPILER_H
