//===- Bundle.cpp - write a compiled pipeline for the runtime -------------===//

#include "codegen/Bundle.h"
#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

#ifndef THDC_VERSION
#define THDC_VERSION "unknown"
#endif

std::string thdc::renderManifest(const BundleContents &contents) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attribute("format", kBundleFormatVersion);
    json.attribute("thdc_version", THDC_VERSION);
    json.attribute("entry", contents.signature.entry);
    json.attributeObject("params", [&] {
      // Sorted, so that equal pipelines give equal manifests.
      std::map<std::string, int64_t> sorted;
      for (const auto &param : contents.signature.params)
        sorted[param.getKey().str()] = param.getValue();
      for (const auto &[name, value] : sorted)
        json.attribute(name, value);
    });
    json.attributeArray("buffers", [&] {
      for (const BufferInfo &buffer : contents.signature.buffers)
        json.object([&] {
          json.attribute("name", buffer.name);
          json.attribute("direction", buffer.isOutput ? "output" : "input");
          json.attribute("type", buffer.elementType);
          json.attribute("elements", buffer.elements);
        });
    });
    json.attributeObject("kernel", [&] {
      json.attribute("name", contents.signature.entry);
      json.attribute("ptx", contents.ptxFile);
      json.attribute("chip", contents.chip);
      json.attributeArray("grid", [&] {
        for (int64_t d : contents.grid)
          json.value(d);
      });
      json.attributeArray("block", [&] {
        for (int64_t d : contents.block)
          json.value(d);
      });
    });
    if (!contents.hostFile.empty())
      json.attributeObject("host", [&] {
        json.attribute("library", contents.hostFile);
        json.attribute("symbol",
                       contents.signature.entry + kPackedSuffix.str());
      });
    json.attributeObject("sha256", [&] {
      for (const auto &[file, hash] : contents.fileHashes)
        json.attribute(file, hash);
    });
  });
  os << "\n";
  return text;
}

mlir::LogicalResult thdc::writeBundle(mlir::ModuleOp module,
                                     const GpuOptions &gpu, bool withHost,
                                     llvm::StringRef dir,
                                     BundleContents *written) {
  using runtime::Status;
  BundleContents contents;
  mlir::FailureOr<PipelineSignature> signature = describePipeline(module);
  if (mlir::failed(signature))
    return mlir::failure();
  contents.signature = *signature;
  contents.chip = gpu.chip;
  mlir::FailureOr<std::string> ptx =
      compileToPtx(module, gpu, contents.grid, contents.block);
  if (mlir::failed(ptx))
    return mlir::failure();
  std::string folder = dir.str();
  auto fail = [&](const Status &status) {
    return module.emitError() << status.message();
  };
  contents.ptxFile = contents.signature.entry + ".ptx";
  if (Status status = runtime::writeFileAtomically(
          runtime::joinPath(folder, contents.ptxFile), *ptx);
      !status)
    return fail(status);
  contents.fileHashes[contents.ptxFile] = runtime::sha256Hex(*ptx);
  if (withHost) {
    contents.hostFile = contents.signature.entry + ".host.so";
    std::string path = runtime::joinPath(folder, contents.hostFile);
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
    contents.fileHashes[contents.hostFile] = runtime::sha256Hex(*library);
    if (std::error_code ec = llvm::sys::fs::rename(temporary, path)) {
      llvm::sys::fs::remove(temporary);
      return module.emitError() << "cannot write " << path << ": "
                                << ec.message();
    }
  }
  if (Status status = runtime::writeFileAtomically(
          runtime::joinPath(folder, "manifest.json"), renderManifest(contents));
      !status)
    return fail(status);
  if (written)
    *written = std::move(contents);
  return mlir::success();
}
