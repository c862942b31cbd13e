//===- Bundle.h - write a compiled pipeline for the runtime -----*- C++ -*-===//
//
// A bundle is a folder the runtime loads without MLIR:
//   manifest.json    what runtime/Manifest.h defines: the entry, parameters,
//                    buffers in kernel parameter order, the kernel's launch
//                    geometry and the hashes of the files below;
//   <entry>.ptx      the one GPU kernel, bare pointer parameters;
//   <entry>.cubin    the same kernel assembled for the manifest's chip, when
//                    GpuOptions::assembleCubin and ptxas was found;
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
#include "runtime/Manifest.h"

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

} // namespace thdc

#endif // THDC_COMPILER_BUNDLE_H
