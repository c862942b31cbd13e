//===- Jit.cpp - compile pipelines in-process, with a cache ---------------===//

#include "compiler/Jit.h"
#include "compiler/BuildId.h"
#include "compiler/Bundle.h"
#include "compiler/Context.h"
#include "compiler/FatalErrorGuard.h"
#include "compiler/JitCache.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "runtime/PtxCompiler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

using namespace thdc;
using namespace thdc::detail;
using namespace thdc::runtime;

namespace {
/// The version of what a JIT cache entry holds; part of every key, so that
/// a change of the entries' contents never meets an older entry. 3: an
/// entry for the driver's PTX compile carries the driver's cubin.
constexpr int kJitCacheFormat = 3;

/// The JIT's environment switches (see Jit in Jit.h).
struct Switches {
  bool log = false;
  bool alwaysCompile = false;
  /// Where THDC_DUMP_IR sends IR: empty for nowhere, "-" for stderr.
  std::string dumpIr;
};

bool isSet(const char *value) {
  return value && *value && std::string(value) != "0";
}

/// How long a compile waits for another process compiling the same key
/// (THDC_LOCK_TIMEOUT, seconds; default 10 minutes; 0, "none" or "inf":
/// without a bound, as `timeout 0` means; -1 is FileLock's "no bound").
double lockTimeoutSeconds() {
  constexpr double kDefaultSeconds = 600;
  const char *value = std::getenv("THDC_LOCK_TIMEOUT");
  if (!value || !*value)
    return kDefaultSeconds;
  llvm::StringRef text(value);
  if (text == "none" || text == "inf")
    return -1;
  char *end = nullptr;
  double seconds = std::strtod(value, &end);
  if (*end == '\0' && seconds >= 0 && std::isfinite(seconds))
    return seconds == 0 ? -1 : seconds;
  llvm::errs() << "thdc: THDC_LOCK_TIMEOUT='" << value
               << "' is not a number of seconds (or 0, none, inf: no bound); "
                  "waiting at most "
               << kDefaultSeconds << " s\n";
  return kDefaultSeconds;
}

Switches readSwitches() {
  Switches switches;
  switches.log = isSet(std::getenv("THDC_LOG"));
  switches.alwaysCompile = isSet(std::getenv("THDC_ALWAYS_COMPILE"));
  if (const char *dump = std::getenv("THDC_DUMP_IR"); isSet(dump))
    switches.dumpIr = std::string(dump) == "1" ? "-" : dump;
  return switches;
}

/// Writes one stage's IR for THDC_DUMP_IR; a dump that cannot be written is
/// reported on stderr and does not fail the compile.
void dumpStage(const std::string &where, const std::string &key, int index,
               const std::string &stage, const std::string &extension,
               const std::string &text) {
  if (where == "-") {
    llvm::errs() << "// ----- thdc IR dump " << key.substr(0, 12) << ": "
                 << stage << " -----\n"
                 << text << (text.empty() || text.back() != '\n' ? "\n" : "");
    return;
  }
  std::string name = key.substr(0, 12) + "." + std::to_string(index) + "-" +
                     stage + "." + extension;
  llvm::sys::fs::create_directories(where);
  if (Status written = writeFileAtomically(joinPath(where, name), text);
      !written)
    llvm::errs() << "thdc: THDC_DUMP_IR: " << written.message() << "\n";
}

std::string printed(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

/// THDC_LOG's line for one compile call.
void logCall(const CompileInfo &info, const std::string &sourceName,
             const char *what, const Status &failure) {
  char times[160];
  std::snprintf(times, sizeof(times), "%.3f ms (compile %.3f ms, load %.3f ms)",
                info.micros / 1000, info.compileMicros / 1000,
                info.loadMicros / 1000);
  llvm::errs() << "thdc-jit: " << sourceName << " key "
               << info.key.substr(0, 12) << ": " << what << " in " << times;
  if (!failure)
    llvm::errs() << ": "
                 << failure.message().substr(0, failure.message().find('\n'));
  else if (!info.cacheNote.empty())
    llvm::errs() << " (" << info.cacheNote << ")";
  llvm::errs() << "\n";
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
    if (options.gpu.smCount == 0)
      options.gpu.smCount =
          (*driver)->multiprocessorCount(device ? *device : 0);
  } else {
    target = Backend::Host;
    targetName = "host-" + llvm::sys::getDefaultTargetTriple();
    if (options.backend == Backend::Cuda)
      cudaUnavailable = driver.status().message();
  }
  options.cacheDir = cacheDirectory(options.cacheDir);
  if (options.cacheDir != "-") {
    // Absolute, so that staging folders are made beside the entries (and
    // renamed within one file system).
    llvm::SmallString<256> absolute(options.cacheDir);
    llvm::sys::fs::make_absolute(absolute);
    options.cacheDir = std::string(absolute);
  }
}

Jit::~Jit() = default;

const char *thdc::compilerBuildId() { return THDC_COMPILER_BUILD_ID; }

std::string thdc::jitCacheKey(const std::string &buildId,
                              const std::string &target,
                              const JitOptions &options,
                              const std::string &pipelineText,
                              const std::map<std::string, int64_t> &params) {
  // How the cubin is made changes what an entry holds: nvJitLink's cubin,
  // or the PTX alone for the driver; and at which optimisation level.
  std::string identity =
      "format " + std::to_string(kJitCacheFormat) + "\nthdc " + buildId +
      "\nllvm " + LLVM_VERSION_STRING + "\nptx-compiler " +
      (ptxCompilerChoice() == PtxCompilerChoice::Driver ? "driver"
                                                        : "nvjitlink") +
      " O" + std::to_string(ptxOptLevel()) + "\ntarget " + target + "\n" +
      gpuOptionsKey(options.gpu);
  for (const auto &[name, value] : params)
    identity += "param " + name + "=" + std::to_string(value) + "\n";
  return runtime::cacheKey(identity + "\n" + pipelineText);
}

std::string Jit::cacheKey(const std::string &pipelineText,
                          const std::map<std::string, int64_t> &params) const {
  return jitCacheKey(compilerBuildId(), targetName, options, pipelineText,
                     params);
}

namespace {
double microsSince(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - from)
      .count();
}
} // namespace

Result<std::shared_ptr<Executable>>
Jit::compile(const std::string &pipelineText,
             const std::map<std::string, int64_t> &params, CompileInfo *info,
             const std::string &sourceName) {
  CompileInfo local;
  CompileInfo &out = info ? *info : local;
  out = CompileInfo();
  if (!cudaUnavailable.empty())
    return Status::error(
        "backend 'cuda' was asked for, but there is no GPU to compile for (" +
        cudaUnavailable +
        "); use backend 'host' for the host code, or 'auto' for the GPU "
        "where there is one");
  out.key = cacheKey(pipelineText, params);
  std::lock_guard<std::mutex> lock(mutex);
  Result<std::shared_ptr<Executable>> result =
      compileLocked(pipelineText, params, out, sourceName);
  if (readSwitches().log) {
    const char *what =
        !result                                          ? "compile failed"
        : out.source == CompileInfo::Source::MemoryCache ? "memory-cache hit"
        : out.source == CompileInfo::Source::DiskCache   ? "disk-cache hit"
        : readSwitches().alwaysCompile ? "compiled (THDC_ALWAYS_COMPILE)"
        : options.cacheDir == "-"      ? "compiled (no disk cache)"
                                       : "disk-cache miss, compiled";
    logCall(out, sourceName, what, result ? Status() : result.status());
  }
  return result;
}

std::shared_ptr<Executable>
Jit::cached(const std::string &pipelineText,
            const std::map<std::string, int64_t> &params, CompileInfo *info) {
  auto start = std::chrono::steady_clock::now();
  std::string key = cacheKey(pipelineText, params);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = memory.find(key);
  if (readSwitches().alwaysCompile || it == memory.end())
    return nullptr;
  if (info) {
    *info = CompileInfo();
    info->key = key;
    info->source = CompileInfo::Source::MemoryCache;
    info->micros = microsSince(start);
  }
  return it->second;
}

namespace {

/// What one compile turns into a bundle.
struct CompileRequest {
  const std::string &pipelineText;
  const std::map<std::string, int64_t> &params;
  const std::string &sourceName;
  const std::string &key;
  GpuOptions gpu;
  Backend target;
  std::string targetName;
  /// THDC_DUMP_IR: where each stage's IR is written, or "".
  std::string dumpIr;
};

/// `request` compiled into a bundle in `folder`, its manifest in `written`;
/// false with the compiler's diagnostics (and a fatal error's message) in
/// `diagnostics` on failure.
bool compileBundle(const CompileRequest &request, const std::string &folder,
                   runtime::Manifest &written, std::string &diagnostics) {
  diagnostics.clear();
  std::string fatal;
  bool ok = runWithFatalErrorsAsFailures(
      [&] {
        std::unique_ptr<mlir::MLIRContext> contextOwner =
            createCompilerContext(mlir::MLIRContext::Threading::DISABLED);
        mlir::MLIRContext &context = *contextOwner;
        llvm::SourceMgr sourceMgr;
        llvm::raw_string_ostream diagnosticStream(diagnostics);
        mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context,
                                                 diagnosticStream);
        sourceMgr.AddNewSourceBuffer(
            llvm::MemoryBuffer::getMemBufferCopy(request.pipelineText,
                                                 request.sourceName),
            llvm::SMLoc());
        llvm::StringMap<int64_t> overrides;
        for (const auto &[name, value] : request.params)
          overrides[name] = value;
        const std::string &dump = request.dumpIr;
        const std::string &key = request.key;
        if (!dump.empty())
          dumpStage(dump, key, 0, "input", "mlir", request.pipelineText);
        mlir::OwningOpRef<mlir::ModuleOp> module =
            loadPipeline(context, sourceMgr, overrides);
        if (!module)
          return false;
        if (!dump.empty())
          dumpStage(dump, key, 1, "bound-fused", "mlir", printed(*module));
        GpuOptions gpu = request.gpu;
        if (gpu.chip.empty())
          gpu.chip =
              request.target == Backend::Cuda ? request.targetName : "sm_90";
        // With nvJitLink chosen, the GPU target's bundle carries its
        // cubin, made in-process: a load then compiles nothing.
        gpu.cubinInProcess =
            request.target == Backend::Cuda &&
            ptxCompilerChoice() == PtxCompilerChoice::NvJitLink;
        gpu.ptxOptLevel = ptxOptLevel();
        bool withHost = request.target == Backend::Host;
        if (mlir::failed(writeBundle(*module, gpu, withHost, folder, &written)))
          return false;
        if (!dump.empty()) {
          if (withHost)
            dumpStage(dump, key, 2, "host-llvm", "mlir", printed(*module));
          if (Result<std::string> ptx =
                  readWholeFile(joinPath(folder, written.ptxFile)))
            dumpStage(dump, key, 3, "kernel", "ptx", *ptx);
        }
        return true;
      },
      fatal);
  if (!fatal.empty())
    diagnostics += (diagnostics.empty() ? "" : "\n") +
                   std::string("the compiler stopped with a fatal error: ") +
                   fatal;
  return ok;
}

/// Phase 2, compile: `request` compiled into `staging` (a folder for cache
/// entry `entry` of cache folder `dir`), its manifest in `written`. When
/// that fails beside the entry, once more in a fresh temporary folder
/// (perhaps the cache could not be written: a full disk), with why in
/// `cacheNote` if that one succeeds; a compile error fails there too. On
/// failure the staging folder is gone.
Status compileStaged(const CompileRequest &request, const std::string &dir,
                     const std::string &entry, Staging &staging,
                     runtime::Manifest &written, std::string &cacheNote) {
  std::string diagnostics;
  bool compiled =
      compileBundle(request, std::string(staging.path), written, diagnostics);
  if (!compiled && staging.inCache) {
    llvm::sys::fs::remove_directories(staging.path);
    std::string firstAttempt = diagnostics;
    if (Status restaged = stageOutsideCache(entry, staging); !restaged)
      return restaged;
    compiled =
        compileBundle(request, std::string(staging.path), written, diagnostics);
    if (compiled)
      cacheNote = "cannot write into the cache " + dir + ": " + firstAttempt;
  }
  if (!compiled) {
    llvm::sys::fs::remove_directories(staging.path);
    return Status::error("compiling " + request.sourceName + " failed" +
                         (diagnostics.empty() ? "" : ":\n" + diagnostics));
  }
  return Status();
}

} // namespace

Result<std::shared_ptr<Executable>>
Jit::compileLocked(const std::string &pipelineText,
                   const std::map<std::string, int64_t> &params,
                   CompileInfo &out, const std::string &sourceName) {
  auto start = std::chrono::steady_clock::now();
  const Switches switches = readSwitches();
  if (auto it = memory.find(out.key);
      !switches.alwaysCompile && it != memory.end()) {
    out.source = CompileInfo::Source::MemoryCache;
    out.micros = microsSince(start);
    return it->second;
  }

  LoadOptions load;
  load.backend = target;
  load.cacheDir = options.cacheDir;
  load.requireHashes = true;
  load.requirePrivate = true;
  const std::string &dir = options.cacheDir;
  const std::string entry = joinPath(dir, "jit-" + out.key);
  bool useDisk = dir != "-";
  if (useDisk)
    if (Status prepared = prepareCacheDirectory(dir); !prepared) {
      useDisk = false;
      out.cacheNote = prepared.message();
    }
  // A hit takes no lock: entries are published whole (a staging folder
  // renamed into place), so a reader sees a whole entry or none. A damaged
  // or foreign entry is dealt with under the key's lock below.
  std::string unusable;
  bool foreign = false;
  auto diskHit = [&]() -> std::shared_ptr<Executable> {
    unusable.clear();
    foreign = false;
    if (!useDisk || switches.alwaysCompile)
      return nullptr;
    std::shared_ptr<Executable> executable =
        loadCacheEntry(entry, load, unusable, foreign);
    if (!executable)
      return nullptr;
    memory[out.key] = executable;
    out.source = CompileInfo::Source::DiskCache;
    out.bundleDir = entry;
    out.loadMicros = executable->loadInfo().loadMicros;
    out.micros = microsSince(start);
    return executable;
  };
  if (std::shared_ptr<Executable> hit = diskHit())
    return hit;

  // A miss: the PTX compiler loads while the compiler runs.
  if (target == Backend::Cuda)
    warmUpPtxCompiler(!options.gpu.chip.empty() ? options.gpu.chip
                                                : targetName);
  if (!temporarySwept) {
    removeDeadProcessesStaging();
    temporarySwept = true;
  }
  // One compile per key across processes: the others wait here, then load
  // what it published.
  std::optional<FileLock> keyLock;
  if (useDisk) {
    std::string lockPath = joinPath(dir, "jit-" + out.key + ".lock");
    bool timedOut = false;
    Result<FileLock> acquired =
        FileLock::acquire(lockPath, lockTimeoutSeconds(), &timedOut);
    if (acquired) {
      keyLock.emplace(std::move(*acquired));
      removeLeftovers(dir, out.key);
      // Another process may have published the entry while we waited.
      if (std::shared_ptr<Executable> hit = diskHit())
        return hit;
    } else if (timedOut) {
      // Another process holds the key past the bound: compiling beside it
      // would wait on whatever holds it up, so say so instead.
      return acquired.status();
    } else {
      useDisk = false;
      out.cacheNote = acquired.status().message();
    }
  }
  if (!unusable.empty()) {
    out.cacheNote = unusable;
    if (foreign)
      useDisk = false; // not ours to delete
    else
      discardEntry(entry);
  }

  Result<Staging> staging = stage(dir, entry, useDisk, out.cacheNote);
  if (!staging)
    return staging.status();
  CompileRequest request{pipelineText, params, sourceName, out.key,
                         options.gpu,  target, targetName, switches.dumpIr};
  runtime::Manifest written;
  if (Status compiled =
          compileStaged(request, dir, entry, *staging, written, out.cacheNote);
      !compiled)
    return compiled;
  out.compileMicros = microsSince(start);

  // THDC_ALWAYS_COMPILE: the new result replaces the cached one.
  bool published = false;
  Result<std::unique_ptr<Executable>> loaded =
      publish(*staging, written, dir, entry, load, switches.alwaysCompile,
              published, out.cacheNote);
  if (!loaded)
    return loaded.status();
  out.loadMicros = (*loaded)->loadInfo().loadMicros;
  out.bundleDir = published ? entry : std::string();
  std::shared_ptr<Executable> executable(std::move(*loaded));
  memory[out.key] = executable;
  out.source = CompileInfo::Source::Compiled;
  out.micros = microsSince(start);
  return executable;
}
