//===- Jit.cpp - compile pipelines in-process, with a cache ---------------===//

#include "runtime/Jit.h"
#include "codegen/Bundle.h"
#include "codegen/Compiler.h"
#include "runtime/CudaDriver.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#ifndef THDC_VERSION
#define THDC_VERSION "unknown"
#endif

using namespace thdc;
using namespace thdc::runtime;

namespace {
uint64_t fnv1a(llvm::StringRef text, uint64_t seed) {
  for (unsigned char c : text)
    seed = (seed ^ c) * 1099511628211ull;
  return seed;
}

std::string defaultCacheDir(const std::string &requested) {
  if (!requested.empty())
    return requested;
  if (const char *dir = std::getenv("THDC_CACHE_DIR"))
    return dir;
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"))
    path = xdg;
  else if (const char *home = std::getenv("HOME"))
    llvm::sys::path::append(path, home, ".cache");
  else
    return "-";
  llvm::sys::path::append(path, "thdc");
  return std::string(path);
}

bool writeFile(llvm::StringRef path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return false;
  os << text;
  return !os.has_error();
}
} // namespace

Jit::Jit(JitOptions opts) : options(std::move(opts)) {
  Result<const CudaDriver *> driver =
      options.backend == Backend::Host
          ? Result<const CudaDriver *>(Status::error("host"))
          : CudaDriver::get();
  if (driver) {
    target = Backend::Cuda;
    // The chip of the device current when the JIT is made (else device 0).
    Result<int> device = (*driver)->resolveDevice(-1);
    targetName = (*driver)->architecture(device ? *device : 0);
  } else {
    target = Backend::Host;
    targetName = "host-" + llvm::sys::getDefaultTargetTriple();
  }
  options.cacheDir = defaultCacheDir(options.cacheDir);
}

Jit::~Jit() = default;

std::string Jit::cacheKey(const std::string &pipelineText,
                          const std::map<std::string, int64_t> &params) const {
  std::string identity = std::string("thdc ") + THDC_VERSION + "\nllvm " +
                         LLVM_VERSION_STRING + "\ntarget " + targetName +
                         "\nblock " + std::to_string(options.blockSize) + "\n";
  for (const auto &[name, value] : params)
    identity += "param " + name + "=" + std::to_string(value) + "\n";
  char key[40];
  std::snprintf(key, sizeof(key), "%016llx%016llx",
                (unsigned long long)fnv1a(identity, 1469598103934665603ull),
                (unsigned long long)fnv1a(
                    pipelineText, fnv1a(identity, 7809847782465536322ull)));
  return key;
}

Result<std::shared_ptr<Pipeline>>
Jit::compile(const std::string &pipelineText,
             const std::map<std::string, int64_t> &params, CompileInfo *info,
             const std::string &sourceName) {
  auto start = std::chrono::steady_clock::now();
  CompileInfo local;
  CompileInfo &out = info ? *info : local;
  out.key = cacheKey(pipelineText, params);
  auto finish = [&]() {
    out.micros = std::chrono::duration<double, std::micro>(
                     std::chrono::steady_clock::now() - start)
                     .count();
  };
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = memory.find(out.key); it != memory.end()) {
    out.source = CompileInfo::Source::MemoryCache;
    finish();
    return it->second;
  }

  llvm::SmallString<256> bundle;
  if (options.cacheDir == "-") {
    if (llvm::sys::fs::createUniqueDirectory("thdc-jit", bundle))
      return Status::error("cannot create a temporary folder for the JIT");
  } else {
    bundle = options.cacheDir;
    llvm::sys::path::append(bundle, "jit-" + out.key);
  }
  out.bundleDir = std::string(bundle);
  LoadOptions load;
  load.backend = target;
  load.cacheDir = options.cacheDir;
  llvm::SmallString<256> manifest(bundle);
  llvm::sys::path::append(manifest, "manifest.json");
  if (llvm::sys::fs::exists(manifest)) {
    Result<std::unique_ptr<Pipeline>> cached =
        Pipeline::load(out.bundleDir, load);
    if (cached) {
      std::shared_ptr<Pipeline> pipeline(std::move(*cached));
      memory[out.key] = pipeline;
      out.source = CompileInfo::Source::DiskCache;
      finish();
      return pipeline;
    }
    // A damaged cache entry is compiled again below.
  }

  // Compile: diagnostics are collected into the error message.
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context,
                                           diagnosticStream);
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(pipelineText, sourceName),
      llvm::SMLoc());
  llvm::StringMap<int64_t> overrides;
  for (const auto &[name, value] : params)
    overrides[name] = value;
  auto failure = [&](const std::string &what) {
    return Status::error(what +
                         (diagnostics.empty() ? "" : ":\n" + diagnostics));
  };
  mlir::OwningOpRef<mlir::ModuleOp> module =
      loadPipeline(context, sourceMgr, overrides);
  if (!module)
    return failure("compiling " + sourceName + " failed");
  BundleContents contents;
  mlir::FailureOr<PipelineSignature> signature = describePipeline(*module);
  if (mlir::failed(signature))
    return failure("compiling " + sourceName + " failed");
  contents.signature = *signature;
  GpuOptions gpu;
  gpu.chip = target == Backend::Cuda ? targetName : "sm_90";
  gpu.blockSize = options.blockSize;
  contents.chip = gpu.chip;
  mlir::FailureOr<std::string> ptx =
      compileToPtx(*module, gpu, contents.grid, contents.block);
  if (mlir::failed(ptx))
    return failure("compiling " + sourceName + " for " + gpu.chip + " failed");
  if (std::error_code ec = llvm::sys::fs::create_directories(bundle))
    return Status::error("cannot create " + out.bundleDir + ": " +
                         ec.message());
  // Written under temporary names and renamed: a concurrent process never
  // sees a partial bundle.
  std::string suffix = ".tmp" + std::to_string(getpid());
  contents.ptxFile = contents.signature.entry + ".ptx";
  llvm::SmallString<256> path(bundle);
  llvm::sys::path::append(path, contents.ptxFile);
  if (!writeFile(path, *ptx))
    return Status::error("cannot write " + std::string(path));
  if (target == Backend::Host) {
    contents.hostFile = contents.signature.entry + ".host.so";
    path = bundle;
    llvm::sys::path::append(path, contents.hostFile);
    if (mlir::failed(lowerToHostLLVM(*module)) ||
        mlir::failed(emitHostSharedObject(*module, path)))
      return failure("building the host code of " + sourceName + " failed");
  }
  llvm::SmallString<256> temporary(manifest);
  temporary += suffix;
  if (!writeFile(temporary, renderManifest(contents)) ||
      llvm::sys::fs::rename(temporary, manifest))
    return Status::error("cannot write " + std::string(manifest));

  out.compileMicros = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  Result<std::unique_ptr<Pipeline>> loaded =
      Pipeline::load(out.bundleDir, load);
  if (loaded)
    out.loadMicros = (*loaded)->loadInfo().loadMicros;
  if (options.cacheDir == "-") {
    // Loaded (the host code is mapped): the temporary bundle can go.
    llvm::sys::fs::remove_directories(bundle);
    out.bundleDir.clear();
  }
  if (!loaded)
    return loaded.status();
  std::shared_ptr<Pipeline> pipeline(std::move(*loaded));
  memory[out.key] = pipeline;
  out.source = CompileInfo::Source::Compiled;
  finish();
  return pipeline;
}
