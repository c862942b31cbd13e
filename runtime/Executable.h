//===- Executable.h - load a bundle, launch it, capture it ------*- C++ -*-===//
//
// The runtime half of thdc, with no MLIR dependency: loads a bundle written
// by `thdc` (compiler/Bundle.h), launches its kernel on the caller's stream,
// and captures a launch in a CUDA graph to replay while the data in the
// buffers changes. Without a driver or GPU the same API runs the bundle's host
// code on the CPU, so programs using it run everywhere.
//
// The launch path allocates nothing, synchronises nothing and creates no
// stream.
//
// An Executable is a loaded bundle; "pipeline" names the IR function it was
// compiled from (compiler/Compiler.h), never the loaded code.
//
// Executable is implemented in Executable.cpp (with HostCode.cpp and
// DeviceModule.cpp), Buffers in Buffers.cpp and CapturedLaunch in
// CapturedLaunch.cpp. Those two are declared here rather than in headers of
// their own because they use Executable: this header including theirs would
// close a circle of includes (test/layering/CheckIncludeCycles.cmake). The
// stream helpers need no Executable; their header, runtime/Stream.h, is
// included here for the programs that find them through this one.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_EXECUTABLE_H
#define THDC_RUNTIME_EXECUTABLE_H

#include "runtime/Backend.h"
#include "runtime/Manifest.h"
#include "runtime/Status.h"
#include "runtime/Stream.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace thdc::runtime {

/// How an executable was loaded, for reports.
struct LoadInfo {
  Backend backend = Backend::Host;
  std::string device;     ///< GPU name, or "host CPU"
  int deviceOrdinal = -1; ///< the device loaded at load time; -1 on the host
  std::string chip;       ///< that device's chip ("sm_90"); empty on the host
  bool cubinFromCache = false;  ///< thdc's cache of driver-compiled PTX
  bool cubinFromBundle = false; ///< the bundle's own cubin
  /// thdc's cache held a damaged cubin for this PTX (its hash failed, or
  /// the driver or the buffer check refused it): compiled again, replaced.
  bool cubinCacheRepaired = false;
  double loadMicros = 0; ///< module load (and PTX compile, if any)
  /// Of loadMicros, the module alone: the cubin loaded or the PTX compiled,
  /// without making the device's context current (the driver's start-up in
  /// a new process).
  double moduleMicros = 0;
};

/// Options of Executable::load.
struct LoadOptions {
  Backend backend = Backend::Auto;
  /// Where driver-compiled cubins are cached; empty: $THDC_CACHE_DIR, else
  /// $XDG_CACHE_HOME/thdc, else ~/.cache/thdc. "-" disables the cache.
  std::string cacheDir;
  /// The device whose module is loaded by load() (-1: the device of the
  /// calling thread's current context, else 0). Other devices load theirs on
  /// their first launch.
  int device = -1;
  /// Refuse a bundle whose manifest lacks the hash of a file it uses, or
  /// that has no hash of its manifest.
  bool requireHashes = false;
  /// Read only files that belong to this user and that nobody else can
  /// write (the JIT's cache).
  bool requirePrivate = false;
  /// Keep the cubin the driver compiled from the PTX (or that thdc's cache
  /// held) at load, for driverCubin().
  bool keepDriverCubin = false;
};

/// A loaded bundle, ready to launch.
class Executable {
public:
  /// Loads `bundleDir`. With Backend::Auto, the GPU when a driver and a GPU
  /// are present, else the host code.
  static Result<std::unique_ptr<Executable>>
  load(const std::string &bundleDir, const LoadOptions &options = {});
  ~Executable();

  const Manifest &manifest() const { return manifest_; }
  const LoadInfo &loadInfo() const { return info_; }
  Backend backend() const { return info_.backend; }
  /// With LoadOptions::keepDriverCubin, the cubin the driver compiled from
  /// the bundle's PTX for the load device (loadInfo().chip), or that thdc's
  /// cache held; empty when the bundle's own cubin was loaded, or without a
  /// GPU.
  const std::string &driverCubin() const { return driverCubin_; }

  /// Runs the executable once on `buffers` (one pointer per manifest buffer,
  /// in order). On the GPU: device pointers, enqueued on `stream` (a
  /// CUstream of that device; null = the legacy default stream), returns
  /// without waiting. It runs on `device`, or when that is -1 on the device
  /// of the calling thread's current context (what torch.cuda.set_device
  /// selects), else on device 0; the module is loaded on a device's first
  /// launch, and the caller's current context is the same afterwards.
  /// On the host: host pointers, runs before returning; `stream` and
  /// `device` are ignored. No output may share memory with another buffer
  /// (an error, before anything runs).
  Status launch(void *const *buffers, void *stream = nullptr,
                int device = -1) const;

  /// Loads the module on `device` (-1 as in launch) now rather than at its
  /// first launch, e.g. before a CUDA graph capture. No-op on the host.
  Status prepare(int device = -1) const;

private:
  struct DeviceModules;
  Executable();
  Status loadModule(int device) const;
  /// Checks what the kernel states against the manifest, reading it from
  /// `cubin`, the bytes its module was loaded from.
  Status checkKernelBuffers(std::string_view cubin) const;
  Status checkDisjoint(void *const *buffers) const;
  /// Each buffer's size in bytes and the outputs' indices (and bits), for
  /// checkDisjoint.
  std::array<size_t, kMaxBuffers> bufferBytes_{};
  std::vector<uint8_t> outputs_;
  uint64_t outputMask_ = 0; ///< bit i: buffer i is an output
  static_assert(kMaxBuffers <= 64, "outputMask_ has a bit per buffer");
  Manifest manifest_;
  LoadInfo info_;
  std::string cubin_, cubinCacheDir_;
  /// Read by the first module load that needs it (under the modules' lock).
  mutable std::string ptx_;
  /// Set by the load device's module load (LoadOptions::keepDriverCubin).
  mutable std::string driverCubin_;
  std::string bundleDir_;
  LoadOptions loadOptions_;
  std::unique_ptr<DeviceModules> modules_; // per device, GPU only
  void *library_ = nullptr;                // dlopen handle of the host code
  int libraryFd_ = -1; // the memory file it was opened by (closeHostCode)
  void (*hostEntry_)(void **) = nullptr;
};

/// Buffers for every manifest buffer of an executable, on its backend (device
/// memory on the GPU, aligned host memory otherwise).
class Buffers {
public:
  /// Allocates on `device` (-1: the current device, else 0) on the GPU.
  static Result<Buffers> allocate(const Executable &executable,
                                  int device = -1);
  Buffers(Buffers &&other) noexcept;
  Buffers &operator=(Buffers &&other) noexcept;
  ~Buffers();

  /// One pointer per buffer, in manifest order, for Executable::launch.
  void *const *pointers() const { return pointers_.data(); }
  void *pointer(size_t index) const { return pointers_[index]; }

  /// Copies into / out of buffer `index` (asynchronous on `stream` on the GPU;
  /// the host memory must stay valid until the stream reaches the copy).
  Status upload(size_t index, const void *host, void *stream = nullptr) const;
  Status download(size_t index, void *host, void *stream = nullptr) const;

private:
  Buffers() = default;
  Backend backend_ = Backend::Host;
  int device_ = -1;
  std::vector<void *> pointers_;
  std::vector<size_t> bytes_;
};

/// One launch captured in a CUDA graph, replayed with whatever the buffers
/// hold at replay time. On the host backend, replay runs the host code.
class CapturedLaunch {
public:
  /// Captures `executable.launch(buffers, stream, device)` on `stream` (which
  /// must not be the legacy default stream on the GPU) and instantiates the
  /// graph.
  static Result<CapturedLaunch> capture(const Executable &executable,
                                        void *const *buffers, void *stream,
                                        int device = -1);
  CapturedLaunch(CapturedLaunch &&other) noexcept;
  CapturedLaunch &operator=(CapturedLaunch &&other) noexcept;
  ~CapturedLaunch();

  /// Enqueues the graph on `stream`.
  Status replay(void *stream) const;

private:
  CapturedLaunch() = default;
  const Executable *executable_ = nullptr;
  void *const *buffers_ = nullptr;
  int device_ = -1;
  void *graph_ = nullptr; // CUgraph
  void *exec_ = nullptr;  // CUgraphExec
};

} // namespace thdc::runtime

#endif // THDC_RUNTIME_EXECUTABLE_H
