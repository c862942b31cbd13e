//===- Jit.cpp - compile pipelines in-process, with a cache ---------------===//

#include "compiler/Jit.h"
#include "compiler/BuildId.h"
#include "compiler/Bundle.h"
#include "compiler/Context.h"
#include "compiler/FatalErrorGuard.h"
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
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <optional>
#include <sys/file.h>
#include <unistd.h>
#include <vector>

using namespace thdc;
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

/// Removes what processes that died while compiling `key` left in the
/// cache folder `dir` (staging folders, entries set aside for deletion).
/// Called with the key's lock held: nobody alive is writing them.
void removeLeftovers(const std::string &dir, const std::string &key) {
  std::error_code ec;
  std::vector<std::string> leftovers;
  std::string staging = "jit-" + key + ".staging",
              discarded = "jit-" + key + ".discarded";
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if ((name.starts_with(staging) || name.starts_with(discarded)) &&
        checkPrivate(it->path()))
      leftovers.push_back(it->path());
  }
  for (const std::string &path : leftovers)
    llvm::sys::fs::remove_directories(path);
}

/// The prefix of this process's temporary staging folders (outside the
/// cache): the process id lets a later process tell a dead one's.
std::string temporaryStagingPrefix() {
  return "thdc-jit-" + std::to_string(getpid()) + "-";
}

/// The lock file of a temporary staging folder, held by the process that
/// compiles in it.
constexpr char kStagingLockFile[] = ".compiling";

/// Whether nobody holds the lock of the staging folder `dir` (a folder
/// without one is not judged).
bool stagingAbandoned(const std::string &dir) {
  int fd = open(joinPath(dir, kStagingLockFile).c_str(),
                O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return false;
  bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free;
}

/// Removes temporary staging folders that processes which have since died
/// left in the system's temporary folder (a process killed mid-compile):
/// their process is gone and their lock is free.
void removeDeadProcessesStaging() {
  llvm::SmallString<256> temporary;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, temporary);
  std::error_code ec;
  std::vector<std::string> dead;
  for (llvm::sys::fs::directory_iterator it(temporary, ec), end;
       !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front("thdc-jit-"))
      continue;
    unsigned long long pid = 0;
    if (name.consumeInteger(10, pid) || !name.starts_with("-") || pid == 0 ||
        pid > 0x7fffffff)
      continue;
    if (kill(pid_t(pid), 0) != 0 && errno == ESRCH &&
        checkPrivate(it->path()) && stagingAbandoned(it->path()))
      dead.push_back(it->path());
  }
  for (const std::string &path : dead)
    llvm::sys::fs::remove_directories(path);
}

/// Moves a damaged cache entry out of the way and deletes it.
void discardEntry(const std::string &entry) {
  llvm::SmallString<256> aside;
  if (!llvm::sys::fs::createUniqueDirectory(entry + ".discarded", aside)) {
    llvm::sys::fs::remove(aside);
    if (!llvm::sys::fs::rename(entry, aside)) {
      llvm::sys::fs::remove_directories(aside);
      return;
    }
  }
  llvm::sys::fs::remove_directories(entry);
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

/// The bundle a cache entry holds when it is whole and ours; else null,
/// with why in `unusable` where there is an entry, and `foreign` when the
/// entry is not ours (not to be deleted).
std::unique_ptr<Executable> loadCacheEntry(const std::string &entry,
                                           const LoadOptions &load,
                                           std::string &unusable,
                                           bool &foreign) {
  if (!llvm::sys::fs::exists(joinPath(entry, kManifestFile)))
    return nullptr;
  Status owned = checkPrivate(entry);
  Result<std::unique_ptr<Executable>> cached =
      owned ? Executable::load(entry, load)
            : Result<std::unique_ptr<Executable>>(owned);
  if (!cached) {
    unusable = "compiled again: " + cached.status().message();
    foreign = !owned;
    return nullptr;
  }
  return std::move(*cached);
}

/// A folder that a compile writes its bundle into before it is published.
struct Staging {
  llvm::SmallString<256> path;
  /// Beside the cache entry, so that publishing is one rename; else in the
  /// temporary folder.
  bool inCache = false;
  /// Held while this process uses a temporary staging folder, so that a
  /// process that cannot see ours (another PID namespace sharing the
  /// temporary folder) never takes it for a dead one's.
  std::optional<FileLock> lock;
};

/// A fresh staging folder for cache entry `entry`: beside it when
/// `inCache`, else in the temporary folder.
std::error_code makeStaging(const std::string &entry, bool inCache,
                            Staging &staging) {
  staging.inCache = inCache;
  if (inCache)
    return llvm::sys::fs::createUniqueDirectory(entry + ".staging",
                                                staging.path);
  std::error_code ec = llvm::sys::fs::createUniqueDirectory(
      temporaryStagingPrefix() + "staging", staging.path);
  if (!ec)
    if (Result<FileLock> held = FileLock::acquire(
            joinPath(std::string(staging.path), kStagingLockFile), 0))
      staging.lock.emplace(std::move(*held));
  return ec;
}

Status cannotCreateStaging(std::error_code ec) {
  return Status::error("cannot create a folder for the JIT: " + ec.message());
}

/// Phase 1, stage: a staging folder for cache entry `entry` of cache folder
/// `dir`, beside the entry when `useDisk`; where the cache cannot be
/// written, in the temporary folder with why in `cacheNote`.
Result<Staging> stage(const std::string &dir, const std::string &entry,
                      bool useDisk, std::string &cacheNote) {
  Staging staging;
  std::error_code ec = makeStaging(entry, useDisk, staging);
  if (ec && useDisk) {
    cacheNote = "cannot write into the cache " + dir + ": " + ec.message();
    ec = makeStaging(entry, false, staging);
  }
  if (ec)
    return cannotCreateStaging(ec);
  return std::move(staging);
}

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
    if (std::error_code ec = makeStaging(entry, false, staging))
      return cannotCreateStaging(ec);
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

/// Phase 3, publish: the bundle compiled into `staging` (manifest
/// `written`) loaded with `load` and, when it was staged in the cache,
/// renamed into place as `entry` of cache folder `dir` (replacing an entry
/// there when `replace`); `published` says whether it was. A bundle staged
/// outside the cache, or one that could not be published (why in
/// `cacheNote`), is removed once loaded.
Result<std::unique_ptr<Executable>>
publish(Staging &staging, const runtime::Manifest &written,
        const std::string &dir, const std::string &entry,
        const LoadOptions &load, bool replace, bool &published,
        std::string &cacheNote) {
  std::string bundle(staging.path);
  bool inCache = staging.inCache;
  std::optional<Result<std::unique_ptr<Executable>>> loaded;
  if (inCache && load.backend == Backend::Cuda && written.cubinFile.empty()) {
    // Loaded before it is published: the cubin the driver compiles from the
    // PTX joins the entry, so that a hit loads it without reading or
    // compiling the PTX. No reader sees the staging folder until the rename.
    // (The PTX the load read stays in memory for other devices' loads.)
    LoadOptions first = load;
    first.keepDriverCubin = true;
    loaded = Executable::load(bundle, first);
    if (!*loaded) {
      llvm::sys::fs::remove_directories(staging.path);
      return loaded->status();
    }
    const Executable &executable = ***loaded;
    // A cubin for the chip the entry was compiled for (JitOptions::gpu.chip
    // may name another than the device's).
    if (!executable.driverCubin().empty() &&
        executable.manifest().cubinFile.empty() &&
        executable.loadInfo().chip == executable.manifest().chip)
      if (Status added = addCubinToBundle(bundle, executable.manifest(),
                                          executable.driverCubin());
          !added) {
        cacheNote =
            "cannot write into the cache " + dir + ": " + added.message();
        inCache = false;
      }
  }
  if (inCache) {
    if (replace && llvm::sys::fs::exists(entry) && checkPrivate(entry))
      discardEntry(entry);
    if (std::error_code ec = llvm::sys::fs::rename(staging.path, entry)) {
      cacheNote = "cannot publish " + entry + ": " + ec.message();
      inCache = false;
    } else {
      bundle = entry;
    }
  }
  if (!loaded)
    loaded = Executable::load(bundle, load);
  if (!inCache)
    // Loaded (the host code is mapped): the private copy can go.
    llvm::sys::fs::remove_directories(bundle);
  published = inCache;
  return std::move(*loaded);
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
