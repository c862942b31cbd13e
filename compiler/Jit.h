//===- Jit.h - compile pipelines in-process, with a cache ------*- C++ -*-===//
//
// Compiles pipeline text plus parameter values into a loaded Executable. A
// compiled pipeline is cached in memory and on disk (as a bundle), keyed by
// the pipeline text, the parameters, the GPU architecture (or the host),
// the compiler's build id and LLVM's version; a later process gets a warm
// hit.
//
// The JIT links the compiler (MLIR); the launch path it returns
// (runtime/Executable.h) does not.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_JIT_H
#define THDC_COMPILER_JIT_H

#include "compiler/GpuOptions.h"
#include "runtime/Executable.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace thdc {

/// How one Jit::compile call was served.
struct CompileInfo {
  enum class Source {
    Compiled,
    MemoryCache,
    DiskCache
  } source = Source::Compiled;
  double micros = 0;        ///< wall time of the whole call
  double compileMicros = 0; ///< of which the compiler (MLIR to PTX/host code)
  double loadMicros = 0;    ///< of which loading the module (driver JIT)
  std::string key;          ///< the cache key
  std::string bundleDir;    ///< the cache entry; empty when not cached
  /// Why the disk cache was not used or an entry was compiled again (a
  /// cache folder another user can write to, a full disk, a damaged
  /// entry); the compile succeeded all the same. Empty when all went well.
  std::string cacheNote;
};

/// Options of the JIT.
struct JitOptions {
  /// Where the GPU runs (Auto: the GPU if there is one, else the host).
  runtime::Backend backend = runtime::Backend::Auto;
  /// Disk cache folder; empty: $THDC_CACHE_DIR, else $XDG_CACHE_HOME/thdc,
  /// else ~/.cache/thdc. "-" keeps compiled bundles in a temporary folder.
  std::string cacheDir;
  /// The GPU back end's options (compiler/GpuOptions.def), all of them
  /// part of the cache key. An empty chip is the device's own (on the host:
  /// sm_90); an sm-count of 0 the device's own multiprocessors (on the
  /// host: the chip's usual part, thdc::defaultSmCount). How the bundle is
  /// assembled (assembleCubin, ...) is the JIT's own choice.
  GpuOptions gpu = deviceGpuOptions();

  /// GpuOptions with the chip left to the device.
  static GpuOptions deviceGpuOptions() {
    GpuOptions options;
    options.chip.clear();
    return options;
  }
};

/// The compiler's build id: the SHA-256 (hex) of THDC_VERSION and of every
/// compiler source file (dialect/, passes/, codegen/, compiler/), computed when
/// the compiler is built. Part of every JIT cache key.
const char *compilerBuildId();

/// The JIT cache key of compiling `pipelineText` with `params` for
/// `target` ("sm_90", "host-x86_64-...") with `options`, by the compiler
/// whose build id is `buildId` (runtime::cacheKey of all of them).
std::string jitCacheKey(const std::string &buildId, const std::string &target,
                        const JitOptions &options,
                        const std::string &pipelineText,
                        const std::map<std::string, int64_t> &params);

/// An in-process compiler with a cache. Environment switches, read at each
/// compile call:
///   THDC_LOG=1            one line on stderr per call: compiled (and why),
///                         memory-cache hit or disk-cache hit, with the key
///                         and the times;
///   THDC_ALWAYS_COMPILE=1 compiles even when a cache holds the key (the
///                         result still replaces the cached one);
///   THDC_DUMP_IR=<dir|1>  writes the IR of each compile (the input, after
///                         parameter binding and fusion, after lowering for
///                         the host, and the kernel's PTX) into files
///                         <key>.<n>-<stage>.<ext> of the folder <dir>, or
///                         with 1 to stderr;
///   THDC_LOCK_TIMEOUT=<s> how long a compile waits for another process
///                         compiling the same key before it fails with an
///                         error naming the lock (default 600 s; 0, none or
///                         inf: without a bound).
/// Thread-safe, and safe for several
/// processes sharing one cache folder: a lock per key makes concurrent
/// compiles of one key produce one entry, entries are published whole (a
/// staging folder renamed into place), each file is checked against the
/// hash in its manifest before it is used, and a damaged entry is compiled
/// again; what a process killed while compiling left behind is removed by
/// the next compile of that key. Errors, LLVM fatal errors and running out
/// of memory inside the compiler included, are returned, never ended in.
class Jit {
public:
  explicit Jit(JitOptions options = {});
  ~Jit();

  /// Compiles `pipelineText` with `params` overriding its declared defaults
  /// (or returns the cached result). Compiler diagnostics, with locations in
  /// `sourceName`, are in the error.
  Result<std::shared_ptr<runtime::Executable>>
  compile(const std::string &pipelineText,
          const std::map<std::string, int64_t> &params = {},
          CompileInfo *info = nullptr,
          const std::string &sourceName = "pipeline.mlir");

  /// What compile() would return from the memory cache, without compiling
  /// or loading anything; null when it would compile or load (the key is
  /// not in memory, or THDC_ALWAYS_COMPILE is set). For callers that must
  /// not load a module now, e.g. inside a CUDA graph capture.
  std::shared_ptr<runtime::Executable>
  cached(const std::string &pipelineText,
         const std::map<std::string, int64_t> &params = {},
         CompileInfo *info = nullptr);

  /// The cache key of a compile call, for tools and tests.
  std::string cacheKey(const std::string &pipelineText,
                       const std::map<std::string, int64_t> &params) const;

private:
  Result<std::shared_ptr<runtime::Executable>>
  compileLocked(const std::string &pipelineText,
                const std::map<std::string, int64_t> &params, CompileInfo &out,
                const std::string &sourceName);
  JitOptions options;
  runtime::Backend target = runtime::Backend::Host;
  std::string targetName; ///< "sm_90", or "host-x86_64"
  /// Why JitOptions::backend Cuda cannot be served (no driver or no GPU):
  /// every compile fails with it rather than give host code.
  std::string cudaUnavailable;
  std::mutex mutex;
  bool temporarySwept = false; ///< dead processes' staging folders removed
  std::map<std::string, std::shared_ptr<runtime::Executable>> memory;
};

} // namespace thdc

#endif // THDC_COMPILER_JIT_H
