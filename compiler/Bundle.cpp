//===- Bundle.cpp - write a compiled pipeline for the runtime -------------===//

#include "compiler/Bundle.h"
#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

#ifndef THDC_VERSION
#define THDC_VERSION "unknown"
#endif

namespace thdc {
namespace {
/// CUDA's ptxas: $THDC_PTXAS when set (empty: none), else the first found in
/// $CUDA_PATH/bin, $CUDA_HOME/bin, /usr/local/cuda/bin and $PATH.
std::optional<std::string> findPtxas() {
  if (const char *chosen = std::getenv("THDC_PTXAS"))
    return *chosen ? std::optional<std::string>(chosen) : std::nullopt;
  llvm::SmallVector<std::string> folders;
  for (const char *variable : {"CUDA_PATH", "CUDA_HOME"})
    if (const char *root = std::getenv(variable); root && *root)
      folders.push_back(std::string(root) + "/bin");
  folders.push_back("/usr/local/cuda/bin");
  llvm::SmallVector<llvm::StringRef> paths(folders.begin(), folders.end());
  if (llvm::ErrorOr<std::string> found =
          llvm::sys::findProgramByName("ptxas", paths))
    return *found;
  if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return std::nullopt;
}

/// `ptx` assembled for `chip` by `ptxas`; the error names the command and
/// what it printed.
mlir::FailureOr<std::string> assemble(mlir::ModuleOp module,
                                      const std::string &ptxas,
                                      const std::string &ptx,
                                      const std::string &chip) {
  llvm::SmallString<128> input, output, log;
  for (auto [path, suffix] :
       {std::pair{&input, "ptx"}, std::pair{&output, "cubin"},
        std::pair{&log, "log"}})
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("thdc-kernel", suffix, *path))
      return module.emitError()
             << "cannot create a temporary file: " << ec.message();
  llvm::scope_exit cleanup([&] {
    for (const auto &path : {input, output, log})
      llvm::sys::fs::remove(path);
  });
  if (runtime::Status status =
          runtime::writeFileAtomically(std::string(input), ptx);
      !status)
    return module.emitError() << status.message();
  std::string arch = "-arch=" + chip;
  llvm::SmallVector<llvm::StringRef> argv = {ptxas, arch,   "-O3",
                                             "-o",  output, input};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  std::string error;
  int rc =
      llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects,
                                /*SecondsToWait=*/0, /*MemoryLimit=*/0, &error);
  if (rc != 0) {
    runtime::Result<std::string> printed =
        runtime::readWholeFile(std::string(log));
    return module.emitError()
           << "assembling the kernel for " << chip << " with " << ptxas
           << " failed ("
           << (error.empty() ? "exit code " + std::to_string(rc) : error) << ")"
           << (printed && !printed->empty() ? ":\n" + *printed : "")
           << "; pass --no-cubin to write the bundle with the PTX only";
  }
  runtime::Result<std::string> cubin =
      runtime::readWholeFile(std::string(output));
  if (!cubin)
    return module.emitError() << cubin.status().message();
  return *cubin;
}
} // namespace
} // namespace thdc

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
  // Each kernel file is written whole under its name and its hash recorded
  // for the manifest.
  auto writeHashed = [&](const std::string &name, const std::string &bytes) {
    contents.fileHashes[name] = runtime::sha256Hex(bytes);
    return runtime::writeFileAtomically(runtime::joinPath(folder, name), bytes);
  };
  contents.ptxFile = contents.entry + runtime::kPtxFileSuffix;
  if (Status status = writeHashed(contents.ptxFile, *ptx); !status)
    return fail(status);
  if (gpu.assembleCubin)
    if (std::optional<std::string> ptxas = findPtxas()) {
      mlir::FailureOr<std::string> cubin =
          assemble(module, *ptxas, *ptx, gpu.chip);
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
    runtime::Result<std::string> library =
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
  // The manifest's own hash goes beside it (written first: a reader that
  // finds the new manifest finds its hash).
  std::string manifest = runtime::renderManifest(contents);
  if (Status status = runtime::writeFileAtomically(
          runtime::joinPath(folder, runtime::kManifestHashFile),
          runtime::sha256Hex(manifest) + "\n");
      !status)
    return fail(status);
  if (Status status = runtime::writeFileAtomically(
          runtime::joinPath(folder, runtime::kManifestFile), manifest);
      !status)
    return fail(status);
  if (written)
    *written = std::move(contents);
  return mlir::success();
}
