//===- Bundle.h - write a compiled pipeline for the runtime -----*- C++ -*-===//
//
// A bundle is a folder the runtime loads without MLIR:
//   manifest.json    the entry, parameters, buffers (name, direction, element
//                    type, elements) in kernel parameter order, the kernel's
//                    launch geometry and the files below;
//   <entry>.ptx      the one GPU kernel, bare pointer parameters;
//   <entry>.host.so  the same pipeline for the host CPU, exporting
//                    `void <entry>(T0 *, T1 *, ...)` and
//                    `void <entry>_packed(void **buffers)`.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_CODEGEN_BUNDLE_H
#define THDC_CODEGEN_BUNDLE_H

#include "codegen/Compiler.h"

#include <map>

namespace thdc {

/// Manifest format version; bump on incompatible changes.
constexpr int kBundleFormatVersion = 1;

/// Everything a bundle's manifest records.
struct BundleContents {
  PipelineSignature signature;
  std::string chip;
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  std::string ptxFile;  ///< relative to the bundle folder
  std::string hostFile; ///< relative to the bundle folder; empty if none
  /// SHA-256 of each file above (hex), checked by the runtime before use.
  std::map<std::string, std::string> fileHashes;
};

/// The manifest as JSON text.
std::string renderManifest(const BundleContents &contents);

/// Compiles `module` (after loadPipeline) and writes its bundle into the
/// existing folder `dir`: the PTX, the host code unless `withHost` is false,
/// then the manifest with every file's hash. Each file is written under a
/// temporary name and renamed, the manifest last, so a reader sees either
/// no bundle or a whole one. Errors are diagnostics on the module. Lowers
/// `module` in place for the host.
mlir::LogicalResult writeBundle(mlir::ModuleOp module, const GpuOptions &gpu,
                                bool withHost, llvm::StringRef dir,
                                BundleContents *written = nullptr);

} // namespace thdc

#endif // THDC_CODEGEN_BUNDLE_H
