//===- Bundle.cpp - write a compiled pipeline for the runtime -------------===//

#include "codegen/Bundle.h"
#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include "llvm/Support/FileSystem.h"

#ifndef THDC_VERSION
#define THDC_VERSION "unknown"
#endif

mlir::LogicalResult thdc::writeBundle(mlir::ModuleOp module,
                                     const GpuOptions &gpu, bool withHost,
                                     llvm::StringRef dir,
                                     runtime::Manifest *written) {
  using runtime::Status;
  runtime::Manifest contents;
  mlir::FailureOr<PipelineSignature> signature = describePipeline(module);
  if (mlir::failed(signature))
    return mlir::failure();
  contents.thdcVersion = THDC_VERSION;
  contents.entry = signature->entry;
  for (const auto &param : signature->params)
    contents.params[param.getKey().str()] = param.getValue();
  contents.buffers = signature->buffers;
  contents.kernelName = signature->entry;
  contents.chip = gpu.chip;
  int64_t grid[3], block[3];
  mlir::FailureOr<std::string> ptx = compileToPtx(module, gpu, grid, block);
  if (mlir::failed(ptx))
    return mlir::failure();
  for (int d = 0; d < 3; ++d) {
    contents.grid[d] = unsigned(grid[d]);
    contents.block[d] = unsigned(block[d]);
  }
  std::string folder = dir.str();
  auto fail = [&](const Status &status) {
    return module.emitError() << status.message();
  };
  contents.ptxFile = contents.entry + runtime::kPtxFileSuffix;
  if (Status status = runtime::writeFileAtomically(
          runtime::joinPath(folder, contents.ptxFile), *ptx);
      !status)
    return fail(status);
  contents.fileHashes[contents.ptxFile] = runtime::sha256Hex(*ptx);
  if (withHost) {
    contents.hostLibrary = contents.entry + runtime::kHostLibrarySuffix;
    contents.hostSymbol = contents.entry + runtime::kPackedSuffix;
    std::string path = runtime::joinPath(folder, contents.hostLibrary);
    // Linked under a unique name, hashed, then renamed into place.
    llvm::SmallString<256> temporary;
    if (std::error_code ec = llvm::sys::fs::createUniqueFile(
            path + ".tmp-%%%%%%%%.so", temporary))
      return module.emitError() << "cannot write " << path << ": "
                                << ec.message();
    if (mlir::failed(lowerToHostLLVM(module)) ||
        mlir::failed(emitHostSharedObject(module, temporary))) {
      llvm::sys::fs::remove(temporary);
      return mlir::failure();
    }
    runtime::Result<std::string> library =
        runtime::readWholeFile(std::string(temporary));
    if (!library) {
      llvm::sys::fs::remove(temporary);
      return fail(library.status());
    }
    contents.fileHashes[contents.hostLibrary] = runtime::sha256Hex(*library);
    if (std::error_code ec = llvm::sys::fs::rename(temporary, path)) {
      llvm::sys::fs::remove(temporary);
      return module.emitError() << "cannot write " << path << ": "
                                << ec.message();
    }
  }
  if (Status status = runtime::writeFileAtomically(
          runtime::joinPath(folder, runtime::kManifestFile),
          runtime::renderManifest(contents));
      !status)
    return fail(status);
  if (written)
    *written = std::move(contents);
  return mlir::success();
}
