//===- Executable.cpp - load a bundle, launch it --------------------------===//

#include "runtime/Executable.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "runtime/DeviceModule.h"
#include "runtime/Elf.h"
#include "runtime/HostCode.h"
#include "runtime/Sha256.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <dlfcn.h>

using namespace thdc::runtime;

namespace {
/// Reads a bundle file and checks it against the manifest's hash.
Result<std::string> readBundleFile(const std::string &bundleDir,
                                   const Manifest &m, const std::string &file,
                                   const LoadOptions &options) {
  bool requireHash = options.requireHashes;
  Result<std::string> bytes =
      readWholeFile(joinPath(bundleDir, file), options.requirePrivate);
  if (!bytes)
    return bytes.status();
  auto expected = m.fileHashes.find(file);
  if (expected == m.fileHashes.end()) {
    if (requireHash)
      return Status::error(
          fmt::format("{}: the manifest records no hash for it",
                      joinPath(bundleDir, file)));
    return bytes;
  }
  if (sha256Hex(*bytes) != expected->second)
    return Status::error(
        fmt::format("{} does not match the hash in its manifest (damaged or "
                    "replaced); refusing to load it",
                    joinPath(bundleDir, file)));
  return bytes;
}

double microsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - start)
      .count();
}
} // namespace

/// A module and its kernel for each device, loaded on first use.
struct Executable::DeviceModules {
  std::mutex mutex;
  std::array<std::atomic<CUfunction>, CudaDriver::kMaxDevices> functions{};
  std::array<CUmodule, CudaDriver::kMaxDevices> modules{};
};

Executable::Executable() = default;

Status Executable::loadModule(int device) const {
  const CudaDriver &cu = **CudaDriver::get();
  std::lock_guard<std::mutex> lock(modules_->mutex);
  if (modules_->functions[device].load(std::memory_order_relaxed))
    return Status();
  ScopedDevice scope;
  if (Status entered = scope.enter(cu, device); !entered)
    return entered;
  auto start = std::chrono::steady_clock::now();
  std::string arch = cu.architecture(device);
  LoadedCode code;
  // The bundle's cubin, on the chip it was assembled for: nothing to compile.
  bool fromBundle =
      !cubin_.empty() && arch == manifest_.chip && loadCubin(cu, cubin_, &code);
  bool fromCache = false, cacheRepaired = false;
  // The bytes of the cubin loaded (the bundle's, the cached one or the
  // driver's compile of the PTX): what the kernel states is read there.
  std::string_view loadedCubin;
  std::string cachedCubin, compiled;
  // The loaded module's kernel, found and stating this bundle's buffers;
  // else the module is unloaded. Every device's module, not only the
  // first: another chip may load the PTX where the first loaded the cubin.
  auto verify = [&](std::string_view cubin) -> Status {
    Status found = findFunction(cu, manifest_.kernelName, &code);
    if (found)
      found = checkKernelBuffers(cubin);
    if (!found)
      code.unload(cu);
    return found;
  };
  if (fromBundle) {
    loadedCubin = cubin_;
    if (Status verified = verify(loadedCubin); !verified)
      return verified;
  } else {
    // The PTX is read when it is first needed: a bundle whose cubin loads
    // never reads it.
    if (ptx_.empty()) {
      Result<std::string> ptx = readBundleFile(bundleDir_, manifest_,
                                               manifest_.ptxFile, loadOptions_);
      if (!ptx)
        return ptx.status();
      ptx_ = std::move(*ptx);
    }
    // The cubin an earlier process's driver compiled from this PTX, else
    // the driver's compile now. A cached cubin that fails its hash, that
    // the driver refuses or whose kernel does not state this bundle's
    // buffers is damaged: compiled again, and the entry replaced.
    std::string cubinPath = cachedCubinPath(cu, ptx_, arch, cubinCacheDir_);
    if (!cubinPath.empty())
      if (Result<std::string> stored =
              readWholeFile(cubinPath, /*requirePrivate=*/true)) {
        std::optional<std::string> cached = decodeCachedCubin(*stored);
        fromCache = cached && loadCubin(cu, *cached, &code) && verify(*cached);
        if (fromCache) {
          cachedCubin = std::move(*cached);
          loadedCubin = cachedCubin;
        }
        cacheRepaired = !fromCache;
      }
    if (!fromCache) {
      if (Status loaded = compilePtx(cu, ptx_, manifest_.kernelName, arch,
                                     cubinPath, &code.module, &compiled);
          !loaded)
        return loaded;
      loadedCubin = compiled;
      if (Status verified = verify(loadedCubin); !verified)
        return verified;
    }
  }
  if (device == info_.deviceOrdinal) {
    LoadInfo &info = const_cast<LoadInfo &>(info_);
    info.cubinFromCache = fromCache;
    info.cubinFromBundle = fromBundle;
    info.cubinCacheRepaired = cacheRepaired;
    if (loadOptions_.keepDriverCubin && !fromBundle)
      driverCubin_ = fromCache ? std::move(cachedCubin) : std::move(compiled);
    info.moduleMicros = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  }
  modules_->modules[device] = code.module;
  modules_->functions[device].store(code.function, std::memory_order_release);
  return Status();
}

/// The kernel states its buffers, its entry and its launch geometry: a
/// manifest that disagrees would let callers hand it buffers it reads or
/// writes past, and a kernel that states nothing is not trusted. Checked
/// on each module as it is loaded, in the bytes of the cubin the module was
/// loaded from (its initialised globals).
Status Executable::checkKernelBuffers(std::string_view cubin) const {
  auto readGlobal = [&](const char *symbol, std::string &bytes) -> Status {
    Result<std::optional<std::string>> read = readElfSymbolBytes(cubin, symbol);
    if (!read)
      return Status::error(fmt::format("the cubin of kernel '{}': {}",
                                       manifest_.kernelName,
                                       read.status().message()));
    if (!*read)
      return Status::error(fmt::format(
          "the kernel '{}' has no '{}' (it was written by an older thdc or "
          "is not thdc's); compile it again",
          manifest_.kernelName, symbol));
    bytes = std::move(**read);
    return Status();
  };
  std::string table, names;
  if (Status read = readGlobal(kBufferTableSymbol, table); !read)
    return read;
  if (Status read = readGlobal(kNameTableSymbol, names); !read)
    return read;
  std::vector<int64_t> entries(table.size() / sizeof(int64_t));
  std::memcpy(entries.data(), table.data(), entries.size() * sizeof(int64_t));
  return checkBufferTable(manifest_, entries.data(), entries.size(), names,
                          "kernel", /*checkGeometry=*/true);
}

Result<std::unique_ptr<Executable>>
Executable::load(const std::string &bundleDir, const LoadOptions &options) {
  Result<Manifest> manifest =
      readManifest(bundleDir, options.requireHashes, options.requirePrivate);
  if (!manifest)
    return manifest.status();
  std::unique_ptr<Executable> executable(new Executable());
  executable->manifest_ = *manifest;
  const Manifest &m = executable->manifest_;
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    executable->bufferBytes_[i] = m.buffers[i].bytes();
    if (m.buffers[i].isOutput) {
      executable->outputs_.push_back(uint8_t(i));
      executable->outputMask_ |= uint64_t(1) << i;
    }
  }

  Result<const CudaDriver *> driver =
      options.backend == Backend::Host
          ? Result<const CudaDriver *>(Status::error("host requested"))
          : CudaDriver::get();
  if (options.backend == Backend::Cuda && !driver)
    return driver.status();
  // Timed from here: the driver's one-time initialisation is not the load.
  auto start = std::chrono::steady_clock::now();

  if (driver) {
    const CudaDriver &cu = **driver;
    Result<int> device = cu.resolveDevice(options.device);
    if (!device)
      return device.status();
    if (options.requireHashes && !m.fileHashes.count(m.ptxFile))
      return Status::error(
          fmt::format("{}: the manifest records no hash for it",
                      joinPath(bundleDir, m.ptxFile)));
    executable->bundleDir_ = bundleDir;
    executable->loadOptions_ = options;
    if (!m.cubinFile.empty()) {
      Result<std::string> cubin =
          readBundleFile(bundleDir, m, m.cubinFile, options);
      if (!cubin)
        return cubin.status();
      executable->cubin_ = std::move(*cubin);
    }
    executable->cubinCacheDir_ = cacheDirectory(options.cacheDir);
    executable->modules_ = std::make_unique<DeviceModules>();
    executable->info_.backend = Backend::Cuda;
    executable->info_.deviceOrdinal = *device;
    executable->info_.device = cu.name(*device);
    executable->info_.chip = cu.architecture(*device);
    if (Status loaded = executable->loadModule(*device); !loaded)
      return loaded;
  } else {
    if (m.hostLibrary.empty())
      return Status::error(
          fmt::format("no GPU ({}) and the bundle has no host code",
                      driver.status().message()));
    // Checked against the manifest's hash, then mapped from these very
    // bytes: a truncated or replaced library is refused, never dlopened.
    Result<std::string> bytes =
        readBundleFile(bundleDir, m, m.hostLibrary, options);
    if (!bytes)
      return bytes.status();
    Result<OpenedHostCode> opened =
        openHostCode(*bytes, joinPath(bundleDir, m.hostLibrary));
    if (!opened)
      return opened.status();
    void *handle = opened->handle;
    auto refuse = [&](const std::string &message) {
      closeHostCode(handle, opened->fd);
      return Status::error(joinPath(bundleDir, message));
    };
    // The code states its buffers and entry; the manifest must agree before
    // anything of it is called.
    auto *table =
        static_cast<const int64_t *>(dlsym(handle, kBufferTableSymbol));
    auto *names = static_cast<const char *>(dlsym(handle, kNameTableSymbol));
    if (!table || !names)
      return refuse(fmt::format(
          "{}: the host code has no '{}' (it was written by an older thdc or "
          "is not thdc's); compile it again",
          m.hostLibrary, !table ? kBufferTableSymbol : kNameTableSymbol));
    if (Status matches = checkBufferTable(
            m, table, symbolSize(table) / sizeof(int64_t),
            std::string_view(names, symbolSize(names)), "host code",
            /*checkGeometry=*/false);
        !matches)
      return refuse(matches.message());
    void *symbol = dlsym(handle, m.hostSymbol.c_str());
    if (!symbol)
      return refuse(fmt::format("{}: the host code has no symbol '{}'",
                                m.hostLibrary, m.hostSymbol));
    executable->library_ = handle;
    executable->libraryFd_ = opened->fd;
    executable->hostEntry_ = reinterpret_cast<void (*)(void **)>(symbol);
    executable->info_.backend = Backend::Host;
    executable->info_.device = "host CPU";
  }
  executable->info_.loadMicros = microsSince(start);
  return executable;
}

Executable::~Executable() {
  if (modules_)
    if (Result<const CudaDriver *> driver = CudaDriver::get())
      for (int device = 0; device < CudaDriver::kMaxDevices; ++device) {
        if (CUmodule module = modules_->modules[device]) {
          ScopedDevice scope;
          if (scope.enter(**driver, device))
            (*driver)->cuModuleUnload(module);
        }
      }
  if (library_)
    closeHostCode(library_, libraryFd_);
}

Status Executable::prepare(int device) const {
  if (info_.backend == Backend::Host)
    return Status();
  const CudaDriver &cu = **CudaDriver::get();
  Result<int> resolved = cu.resolveDevice(device);
  if (!resolved)
    return resolved.status();
  if (modules_->functions[*resolved].load(std::memory_order_acquire))
    return Status();
  return loadModule(*resolved);
}

Status Executable::checkDisjoint(void *const *buffers) const {
  // The kernel is compiled on the promise that no output shares memory with
  // another buffer (codegen/ElementEmitter.cpp): a row's loads are issued
  // before its stores, and inputs are read through the read-only cache.
  // Sizes come from the load, so this costs tens of nanoseconds a launch.
  size_t count = manifest_.buffers.size();
  for (uint8_t out : outputs_) {
    auto first = reinterpret_cast<uintptr_t>(buffers[out]);
    uintptr_t end = first + bufferBytes_[out];
    for (size_t other = 0; other < count; ++other) {
      auto otherFirst = reinterpret_cast<uintptr_t>(buffers[other]);
      // Two outputs are compared once, from the earlier one.
      bool comparedAlready = other < out && (outputMask_ >> other & 1);
      if (other == out || comparedAlready ||
          first >= otherFirst + bufferBytes_[other] || otherFirst >= end)
        continue;
      const std::vector<BufferDesc> &descs = manifest_.buffers;
      return Status::error(fmt::format(
          "output '{}' (buffer {}) overlaps {} '{}' (buffer {}): every "
          "output needs memory of its own",
          descs[out].name, out, descs[other].isOutput ? "output" : "input",
          descs[other].name, other));
    }
  }
  return Status();
}

Status Executable::launch(void *const *buffers, void *stream,
                          int device) const {
  size_t count = manifest_.buffers.size();
  if (Status disjoint = checkDisjoint(buffers); !disjoint)
    return disjoint;
  if (info_.backend == Backend::Host) {
    std::array<void *, kMaxBuffers> pointers;
    std::memcpy(pointers.data(), buffers, count * sizeof(void *));
    hostEntry_(pointers.data());
    return Status();
  }
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  CUfunction function =
      modules_->functions[scope.device()].load(std::memory_order_acquire);
  if (!function) {
    if (Status loaded = loadModule(scope.device()); !loaded)
      return loaded;
    function =
        modules_->functions[scope.device()].load(std::memory_order_acquire);
  }
  std::array<void *, kMaxBuffers> arguments;
  for (size_t i = 0; i < count; ++i)
    arguments[i] = const_cast<void **>(&buffers[i]);
  CUresult r = cu->cuLaunchKernel(
      function, manifest_.grid[0], manifest_.grid[1], manifest_.grid[2],
      manifest_.block[0], manifest_.block[1], manifest_.block[2], 0,
      static_cast<CUstream>(stream), arguments.data(), nullptr);
  if (r != CUDA_SUCCESS)
    return Status::error(fmt::format("launching kernel '{}' on device {}: {}",
                                     manifest_.kernelName, scope.device(),
                                     cu->describe("cuLaunchKernel", r)));
  return Status();
}
