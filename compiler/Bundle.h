//===- Bundle.h - write a compiled pipeline for the runtime -----*- C++ -*-===//
//
// A bundle is a folder the runtime loads without MLIR:
//   manifest.json    what runtime/Manifest.h defines: the entry, parameters,
//                    buffers in kernel parameter order, the kernel's launch
//                    geometry and the hashes of the files below;
//   <entry>.ptx      the one GPU kernel, bare pointer parameters;
//   <entry>.cubin    the same kernel assembled for the manifest's chip, when
//                    GpuOptions::assembleCubin and ptxas was found, or
//                    nvJitLink compiled it (GpuOptions::cubinInProcess), or
//                    added by addCubinToBundle (the JIT: the driver's);
//   <entry>.host.so  the same pipeline for the host CPU, exporting
//                    `void <entry>(T0 *, T1 *, ...)` and
//                    `void <entry>_packed(void **buffers)`.
//
// writeBundle is the one writer of bundles: `thdc` and the JIT both call it.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_BUNDLE_H
#define THDC_COMPILER_BUNDLE_H

#include "compiler/Targets.h"
#include "reference/Status.h"
#include "runtime/Manifest.h"

#include <string>
#include <string_view>

namespace thdc {

/// Compiles `module` (after loadPipeline) and writes its bundle into the
/// existing folder `dir`: the PTX, the host code unless `withHost` is false,
/// then the manifest (runtime::renderManifest) with every file's hash. Each
/// file is written under a temporary name and renamed, the manifest last, so
/// a reader sees either no bundle or a whole one. Errors are diagnostics on
/// the module. Lowers `module` in place for the host. `written`, if given,
/// receives the manifest.
mlir::LogicalResult writeBundle(mlir::ModuleOp module, const GpuOptions &gpu,
                                bool withHost, llvm::StringRef dir,
                                runtime::Manifest *written = nullptr);

/// Adds `cubin`, the kernel of the bundle in `dir` assembled for the chip
/// its manifest names, to that bundle, whose manifest is `manifest` (it has
/// no cubin yet): the cubin is written under the manifest's cubin name
/// (<entry>.cubin), then the manifest, with the cubin's hash, and the
/// manifest's hash again. The files change one at a time: for a bundle no
/// reader sees yet (the JIT's staging folder, published by a rename).
Status addCubinToBundle(const std::string &dir, runtime::Manifest manifest,
                        std::string_view cubin);

} // namespace thdc

#endif // THDC_COMPILER_BUNDLE_H
