//===- Bundle.cpp - write a compiled pipeline for the runtime -------------===//

#include "compiler/Bundle.h"
#include "runtime/Cache.h"
#include "runtime/PtxCompiler.h"
#include "runtime/Sha256.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#ifndef THDC_VERSION
#define THDC_VERSION "unknown"
#endif

namespace {
/// Writes `contents` as the manifest of the bundle in `folder`, with its
/// hash beside it.
thdc::Status writeManifest(const std::string &folder,
                           const thdc::runtime::Manifest &contents) {
  using namespace thdc::runtime;
  // The manifest's own hash goes beside it (written first: a reader that
  // finds the new manifest finds its hash).
  std::string manifest = renderManifest(contents);
  if (Status status = writeFileAtomically(joinPath(folder, kManifestHashFile),
                                          sha256Hex(manifest) + "\n");
      !status)
    return status;
  return writeFileAtomically(joinPath(folder, kManifestFile), manifest);
}
} // namespace

thdc::Status thdc::addCubinToBundle(const std::string &dir,
                                    runtime::Manifest manifest,
                                    std::string_view cubin) {
  using namespace thdc::runtime;
  if (cubin.empty())
    return Status::error("adding a cubin to " + dir + ": the cubin is empty");
  if (!manifest.cubinFile.empty())
    return Status::error("adding a cubin to " + dir + ": the bundle has one (" +
                         manifest.cubinFile + ")");
  manifest.cubinFile = manifest.entry + kCubinFileSuffix;
  manifest.fileHashes[manifest.cubinFile] = sha256Hex(cubin);
  if (Status status =
          writeFileAtomically(joinPath(dir, manifest.cubinFile), cubin);
      !status)
    return status;
  return writeManifest(dir, manifest);
}

mlir::LogicalResult thdc::writeBundle(mlir::ModuleOp module,
                                      const GpuOptions &gpu, bool withHost,
                                      llvm::StringRef dir,
                                      runtime::Manifest *written) {
  using thdc::Status;
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
  // Each kernel file is written whole under its name and its hash recorded
  // for the manifest.
  auto writeHashed = [&](const std::string &name, const std::string &bytes) {
    contents.fileHashes[name] = runtime::sha256Hex(bytes);
    return runtime::writeFileAtomically(runtime::joinPath(folder, name), bytes);
  };
  contents.ptxFile = contents.entry + runtime::kPtxFileSuffix;
  if (Status status = writeHashed(contents.ptxFile, *ptx); !status)
    return fail(status);
  if (gpu.cubinInProcess) {
    // Best effort: without nvJitLink, or where it fails (PTX newer than it
    // knows), the driver compiles the PTX when the bundle is loaded.
    if (Result<std::string> cubin =
            runtime::compilePtxInProcess(*ptx, gpu.chip, gpu.ptxOptLevel)) {
      contents.cubinFile = contents.entry + runtime::kCubinFileSuffix;
      if (Status status = writeHashed(contents.cubinFile, *cubin); !status)
        return fail(status);
    }
  } else if (gpu.assembleCubin)
    if (std::optional<std::string> ptxas = findPtxas()) {
      mlir::FailureOr<std::string> cubin =
          assembleCubin(module, *ptxas, *ptx, gpu.chip);
      if (mlir::failed(cubin))
        return mlir::failure();
      contents.cubinFile = contents.entry + runtime::kCubinFileSuffix;
      if (Status status = writeHashed(contents.cubinFile, *cubin); !status)
        return fail(status);
    }
  if (withHost) {
    contents.hostLibrary = contents.entry + runtime::kHostLibrarySuffix;
    contents.hostSymbol = contents.entry + runtime::kPackedSuffix;
    std::string path = runtime::joinPath(folder, contents.hostLibrary);
    // Linked under a unique name, hashed, then renamed into place.
    llvm::SmallString<256> temporary;
    if (std::error_code ec = llvm::sys::fs::createUniqueFile(
            path + ".tmp-%%%%%%%%.so", temporary))
      return module.emitError()
             << "cannot write " << path << ": " << ec.message();
    if (mlir::failed(lowerToHostLLVM(module)) ||
        mlir::failed(emitHostSharedObject(module, temporary))) {
      llvm::sys::fs::remove(temporary);
      return mlir::failure();
    }
    Result<std::string> library =
        runtime::readWholeFile(std::string(temporary));
    if (!library) {
      llvm::sys::fs::remove(temporary);
      return fail(library.status());
    }
    contents.fileHashes[contents.hostLibrary] = runtime::sha256Hex(*library);
    if (std::error_code ec = llvm::sys::fs::rename(temporary, path)) {
      llvm::sys::fs::remove(temporary);
      return module.emitError()
             << "cannot write " << path << ": " << ec.message();
    }
  }
  if (Status status = writeManifest(folder, contents); !status)
    return fail(status);
  if (written)
    *written = std::move(contents);
  return mlir::success();
}
