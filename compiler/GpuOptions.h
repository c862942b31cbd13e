//===- GpuOptions.h - the GPU back end's options ----------------*- C++ -*-===//
//
// The options of the GPU back end as one struct, expanded from
// compiler/GpuOptions.def (the one list of them), with what every user of
// them shares: their check, their text in a cache key, and setting one by
// its flag name.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_GPUOPTIONS_H
#define THDC_COMPILER_GPUOPTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace thdc {

/// Options of the GPU back end: those of compiler/GpuOptions.def, then how
/// the bundle writer assembles the kernel.
struct GpuOptions {
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP) TYPE FIELD = DEFAULT;
#include "compiler/GpuOptions.def"

  /// Also assemble the PTX for `chip` into a cubin in the bundle (with
  /// CUDA's ptxas; skipped when there is none), so that loading the bundle
  /// on that chip compiles nothing.
  bool assembleCubin = false;
  /// Assemble the cubin in-process with nvJitLink (runtime/PtxCompiler.h)
  /// rather than with ptxas; where nvJitLink is missing or fails, the bundle
  /// has the PTX alone and the driver compiles it at load time.
  bool cubinInProcess = false;
  /// Optimisation level of the cubin's assembly (ptxas -O).
  int ptxOptLevel = 3;
  /// Optimisation level of LLVM's NVPTX back end. 2 rather than 3: on every
  /// example pipeline O2 gives the same PTX as O3 (pack_microbatch: 4
  /// fewer instructions of 2444, the same loads and stores) in about 40%
  /// less time.
  int llvmOptLevel = 2;
};

/// One option of compiler/GpuOptions.def, for code that walks them all
/// (bindings, tests).
struct GpuOptionInfo {
  llvm::StringRef flag; ///< "block-size"
  llvm::StringRef help;
  bool isString; ///< the chip; else an int64 >= 0
};

/// Every option of compiler/GpuOptions.def, in its order.
llvm::ArrayRef<GpuOptionInfo> gpuOptionInfos();

/// Why `options` cannot be compiled with, naming the option by its flag
/// ("block-size must be at least 0, got -1"), or none. The chip is checked
/// by the compiler against its table (compiler/Chips.h).
std::optional<std::string> gpuOptionsError(const GpuOptions &options);

/// The options of compiler/GpuOptions.def as text, one "FLAG=VALUE" line
/// each, in their order: the part of a cache key they make.
std::string gpuOptionsKey(const GpuOptions &options);

/// Sets the option named `flag` ("block-size", or as Python spells it,
/// "block_size") to `value`; an error names an unknown flag (and lists the
/// known ones) or a value that is not the option's type.
llvm::Error setGpuOption(GpuOptions &options, llvm::StringRef flag,
                         llvm::StringRef value);

/// The value of the option named `flag` as text (as gpuOptionsKey writes
/// it), or none for an unknown flag.
std::optional<std::string> gpuOptionValue(const GpuOptions &options,
                                          llvm::StringRef flag);

} // namespace thdc

#endif // THDC_COMPILER_GPUOPTIONS_H
