//===- Executable.cpp - load a bundle, launch it, capture it --------------===//

#include "runtime/Executable.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "runtime/Elf.h"
#include "runtime/PtxCompiler.h"
#include "runtime/Sha256.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/// Host code mapped by openHostCode: the library's handle, and the memory
/// file's descriptor it was opened by (-1 for a temporary copy).
struct OpenedHostCode {
  void *handle = nullptr;
  int fd = -1;
};

/// Maps host code from `bytes` (already checked against the manifest's
/// hash) rather than from its path: the file may have changed since it was
/// hashed, and dlopen by a path already loaded returns the library loaded
/// then, not the one just compiled there. The bytes go into an anonymous
/// memory file, or where that cannot be mapped, a private temporary copy
/// that is removed once mapped.
///
/// The loader records a library by the name it was opened by, and a later
/// dlopen of that name (by anyone in the process) returns it: the memory
/// file's descriptor stays open while the library is loaded (closeHostCode
/// closes it), so that its number, and with it the name /proc/self/fd/N,
/// is never another file's while it names thdc's code.
Result<OpenedHostCode> openHostCode(const std::string &bytes,
                                    const std::string &name) {
  auto failed = [&](const std::string &how) {
    return Status::error(
        fmt::format("cannot load the host code {}: {}", name, how));
  };
  // Where memory files cannot be mapped executable (no /proc, a
  // memfd_noexec policy, SELinux), a private copy serves instead.
  std::string memoryFileError;
  int fd = memfd_create("thdc-host-code", MFD_CLOEXEC);
  if (fd < 0) {
    memoryFileError = std::strerror(errno);
  } else if (!writeAll(fd, bytes)) {
    memoryFileError = std::strerror(errno);
    close(fd);
  } else {
    // A name some library is still loaded by (one opened through a
    // descriptor number that was closed since, by code other than this)
    // would return that library: take another number until it is free.
    std::vector<int> held{fd};
    void *handle = nullptr;
    memoryFileError = "no descriptor number was free of a loaded library";
    for (int attempt = 0; attempt < 64; ++attempt) {
      std::string path = fmt::format("/proc/self/fd/{}", held.back());
      if (void *loaded = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        dlclose(loaded);
        int next = fcntl(held.back(), F_DUPFD_CLOEXEC, 0);
        if (next < 0)
          break;
        held.push_back(next);
        continue;
      }
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle)
        memoryFileError = dlerror();
      break;
    }
    int kept = handle ? held.back() : -1;
    for (int open : held)
      if (open != kept)
        close(open);
    if (handle)
      return OpenedHostCode{handle, kept};
  }
  // A private folder of our own, removed once the copy is mapped.
  const char *tmp = std::getenv("TMPDIR");
  std::string parent = tmp && *tmp ? tmp : "/tmp";
  std::string folder = parent + "/thdc-host-XXXXXX";
  if (!mkdtemp(folder.data()))
    return failed(fmt::format("neither from a memory file ({}) nor from a "
                              "private copy in '{}' ({}; set TMPDIR to a "
                              "folder of yours)",
                              memoryFileError, parent, std::strerror(errno)));
  std::string path = folder + "/host.so";
  fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  bool written = fd >= 0 && writeAll(fd, bytes);
  std::string message = written ? "" : std::strerror(errno);
  if (fd >= 0)
    close(fd);
  void *handle =
      written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (written && !handle)
    message = dlerror();
  unlink(path.c_str());
  rmdir(folder.c_str());
  if (!handle)
    return failed(message + " (from a memory file: " + memoryFileError + ")");
  return OpenedHostCode{handle, -1};
}

/// Unloads host code openHostCode mapped. Its descriptor is closed only
/// once the library is gone: where the loader keeps it (a library that
/// cannot be unloaded), the descriptor stays open with it, for the reason
/// openHostCode gives.
void closeHostCode(void *handle, int fd) {
  dlclose(handle);
  if (fd < 0)
    return;
  std::string path = fmt::format("/proc/self/fd/{}", fd);
  if (void *still = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(still);
    return;
  }
  close(fd);
}

/// The size of the object at `address` in a loaded library, from its
/// symbol table (0 when it is not a symbol's start).
size_t symbolSize(const void *address) {
  Dl_info info;
  void *entry = nullptr;
  if (!dladdr1(address, &info, &entry, RTLD_DL_SYMENT) || !entry ||
      info.dli_saddr != address)
    return 0;
  return static_cast<const ElfW(Sym) *>(entry)->st_size;
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

namespace {
/// Where thdc's cache keeps the cubin the driver compiles from `ptx` for
/// `arch`, or empty when `cacheDir` is "-" or a folder another user could
/// write to (not read). The key covers the PTX, the GPU, the driver that
/// compiles it and the optimisation level.
std::string cachedCubinPath(const CudaDriver &cu, const std::string &ptx,
                            const std::string &arch,
                            const std::string &cacheDir) {
  std::string key =
      cacheKey(ptx + "\n" + arch + "\n" + std::to_string(cu.driverVersion) +
               "\nO" + std::to_string(ptxOptLevel()));
  return cacheDir == "-" || !prepareCacheDirectory(cacheDir)
             ? std::string()
             : joinPath(cacheDir, "cubin-" + key + ".cubin");
}

/// Compiles `ptx` for the current context's device with the driver's linker
/// and loads the cubin as `module`; the cubin is kept at `cubinPath` (when
/// not empty) for later processes, and its bytes handed back in `cubin`.
Status compilePtx(const CudaDriver &cu, const std::string &ptx,
                  const std::string &kernelName, const std::string &arch,
                  const std::string &cubinPath, CUmodule *module,
                  std::string *cubin) {
  CUlinkState link = nullptr;
  void *linked = nullptr;
  size_t linkedSize = 0;
  // The driver's levels are 0 to 4 (4, the default, is ptxas -O3).
  int level = ptxOptLevel();
  CUjit_option option = CU_JIT_OPTIMIZATION_LEVEL;
  void *value = reinterpret_cast<void *>(uintptr_t(level == 3 ? 4 : level));
  CUresult r = cu.cuLinkCreate(1, &option, &value, &link);
  if (r == CUDA_SUCCESS)
    r = cu.cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char *>(ptx.c_str()),
                         ptx.size() + 1, kernelName.c_str(), 0, nullptr,
                         nullptr);
  if (r == CUDA_SUCCESS)
    r = cu.cuLinkComplete(link, &linked, &linkedSize);
  if (r == CUDA_SUCCESS)
    r = cu.cuModuleLoadData(module, linked);
  if (r == CUDA_SUCCESS)
    cubin->assign(static_cast<const char *>(linked), linkedSize);
  // A cubin that cannot be cached (a full disk) only costs the next process
  // the driver's compile again.
  if (r == CUDA_SUCCESS && !cubinPath.empty())
    (void)writeFileAtomically(cubinPath, encodeCachedCubin(*cubin));
  if (link)
    cu.cuLinkDestroy(link);
  if (r != CUDA_SUCCESS)
    return Status::error(fmt::format(
        "loading the PTX of kernel '{}' for {}: {}", kernelName, arch,
        cu.describe("cuLinkAddData/cuModuleLoadData", r)));
  return Status();
}

/// A kernel's code loaded on one device. Cubins are loaded as modules: on
/// an H200 cuLibraryLoadData was faster than cuModuleLoadData, but the
/// context's own load then happened in cuKernelGetFunction (0.17-0.31 ms in
/// a new process, against 0.18-0.24 ms for cuModuleLoadData plus 0.03-0.04
/// ms for cuModuleGetFunction).
struct LoadedCode {
  CUmodule module = nullptr;
  CUfunction function = nullptr;

  void unload(const CudaDriver &cu) {
    if (module)
      cu.cuModuleUnload(module);
    *this = LoadedCode();
  }
};

/// Loads `cubin` on the current context. False when the driver refuses it
/// (another chip's, or damaged): the caller falls back to the PTX.
bool loadCubin(const CudaDriver &cu, const std::string &cubin,
               LoadedCode *code) {
  CUresult r = cu.cuModuleLoadData(&code->module, cubin.data());
  if (r != CUDA_SUCCESS)
    *code = LoadedCode();
  return r == CUDA_SUCCESS;
}

/// The function `name` of `code` for the current context.
Status findFunction(const CudaDriver &cu, const std::string &name,
                    LoadedCode *code) {
  CUresult r =
      cu.cuModuleGetFunction(&code->function, code->module, name.c_str());
  if (r != CUDA_SUCCESS)
    return Status::error(fmt::format(
        "kernel '{}': {}", name, cu.describe("cuModuleGetFunction", r)));
  return Status();
}
} // namespace

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
  std::string mismatch =
      bufferTableMismatch(manifest_, entries.data(), entries.size(), names,
                          "kernel", /*checkGeometry=*/true);
  return mismatch.empty() ? Status() : Status::error(mismatch);
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
    std::string mismatch = bufferTableMismatch(
        m, table, symbolSize(table) / sizeof(int64_t),
        std::string_view(names, symbolSize(names)), "host code",
        /*checkGeometry=*/false);
    if (!mismatch.empty())
      return refuse(mismatch);
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

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

Result<Buffers> Buffers::allocate(const Executable &executable, int device) {
  Buffers buffers;
  buffers.backend_ = executable.backend();
  ScopedDevice scope;
  if (buffers.backend_ == Backend::Cuda) {
    if (Status entered = scope.enter(**CudaDriver::get(), device); !entered)
      return entered;
    buffers.device_ = scope.device();
  }
  for (const BufferDesc &desc : executable.manifest().buffers) {
    size_t bytes = std::max<size_t>(desc.bytes(), 1);
    void *pointer = nullptr;
    if (buffers.backend_ == Backend::Cuda) {
      const CudaDriver *cu = *CudaDriver::get();
      CUdeviceptr device = 0;
      CUresult r = cu->cuMemAlloc(&device, bytes);
      if (r != CUDA_SUCCESS)
        return Status::error(
            fmt::format("allocating buffer '{}' ({} bytes): {}", desc.name,
                        bytes, cu->describe("cuMemAlloc", r)));
      pointer = reinterpret_cast<void *>(device);
    } else {
      pointer = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      std::memset(pointer, 0, bytes);
    }
    buffers.pointers_.push_back(pointer);
    buffers.bytes_.push_back(desc.bytes());
  }
  return buffers;
}

Buffers::Buffers(Buffers &&other) noexcept { *this = std::move(other); }

Buffers &Buffers::operator=(Buffers &&other) noexcept {
  std::swap(backend_, other.backend_);
  std::swap(device_, other.device_);
  std::swap(pointers_, other.pointers_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

Buffers::~Buffers() {
  if (backend_ != Backend::Cuda) {
    for (void *pointer : pointers_)
      std::free(pointer);
    return;
  }
  Result<const CudaDriver *> cu = CudaDriver::get();
  ScopedDevice scope;
  if (pointers_.empty() || !cu || !scope.enter(**cu, device_))
    return;
  for (void *pointer : pointers_)
    (*cu)->cuMemFree(reinterpret_cast<CUdeviceptr>(pointer));
}

Status Buffers::upload(size_t index, const void *host, void *stream) const {
  if (backend_ == Backend::Host) {
    std::memcpy(pointers_[index], host, bytes_[index]);
    return Status();
  }
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device_); !entered)
    return entered;
  CUresult r =
      cu->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(pointers_[index]),
                            host, bytes_[index], static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS
             ? Status()
             : Status::error(cu->describe("cuMemcpyHtoDAsync", r));
}

Status Buffers::download(size_t index, void *host, void *stream) const {
  if (backend_ == Backend::Host) {
    std::memcpy(host, pointers_[index], bytes_[index]);
    return Status();
  }
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device_); !entered)
    return entered;
  CUresult r = cu->cuMemcpyDtoHAsync(
      host, reinterpret_cast<CUdeviceptr>(pointers_[index]), bytes_[index],
      static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS
             ? Status()
             : Status::error(cu->describe("cuMemcpyDtoHAsync", r));
}

//===----------------------------------------------------------------------===//
// CUDA graphs
//===----------------------------------------------------------------------===//

Result<CapturedLaunch> CapturedLaunch::capture(const Executable &executable,
                                               void *const *buffers,
                                               void *stream, int device) {
  CapturedLaunch captured;
  captured.executable_ = &executable;
  captured.buffers_ = buffers;
  if (executable.backend() == Backend::Host)
    return captured;
  const CudaDriver *cu = *CudaDriver::get();
  if (!stream)
    return Status::error("capturing needs a stream other than the legacy "
                         "default stream");
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  captured.device_ = scope.device();
  // Loaded before the capture begins: no module load inside a capture.
  if (Status prepared = executable.prepare(captured.device_); !prepared)
    return prepared;
  CUstream s = static_cast<CUstream>(stream);
  CUresult r = cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS)
    return Status::error(cu->describe("cuStreamBeginCapture", r));
  Status launched = executable.launch(buffers, stream, captured.device_);
  CUgraph graph = nullptr;
  r = cu->cuStreamEndCapture(s, &graph);
  if (!launched)
    return launched;
  if (r != CUDA_SUCCESS)
    return Status::error(cu->describe("cuStreamEndCapture", r));
  CUgraphExec exec = nullptr;
  r = cu->cuGraphInstantiateWithFlags(&exec, graph, 0);
  if (r != CUDA_SUCCESS) {
    cu->cuGraphDestroy(graph);
    return Status::error(cu->describe("cuGraphInstantiate", r));
  }
  captured.graph_ = graph;
  captured.exec_ = exec;
  return captured;
}

CapturedLaunch::CapturedLaunch(CapturedLaunch &&other) noexcept {
  *this = std::move(other);
}

CapturedLaunch &CapturedLaunch::operator=(CapturedLaunch &&other) noexcept {
  std::swap(executable_, other.executable_);
  std::swap(buffers_, other.buffers_);
  std::swap(device_, other.device_);
  std::swap(graph_, other.graph_);
  std::swap(exec_, other.exec_);
  return *this;
}

CapturedLaunch::~CapturedLaunch() {
  if (!exec_ && !graph_)
    return;
  Result<const CudaDriver *> cu = CudaDriver::get();
  ScopedDevice scope;
  if (cu && scope.enter(**cu, device_)) {
    if (exec_)
      (*cu)->cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
    if (graph_)
      (*cu)->cuGraphDestroy(static_cast<CUgraph>(graph_));
  }
}

Status CapturedLaunch::replay(void *stream) const {
  if (!exec_)
    return executable_->launch(buffers_, stream);
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device_); !entered)
    return entered;
  CUresult r = cu->cuGraphLaunch(static_cast<CUgraphExec>(exec_),
                                 static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? Status()
                           : Status::error(cu->describe("cuGraphLaunch", r));
}

Result<void *> thdc::runtime::createStream(Backend backend, int device) {
  if (backend != Backend::Cuda)
    return static_cast<void *>(nullptr);
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  CUstream stream = nullptr;
  CUresult r = cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS)
    return Status::error(cu->describe("cuStreamCreate", r));
  return static_cast<void *>(stream);
}

Status thdc::runtime::synchronizeStream(Backend backend, void *stream,
                                        int device) {
  if (backend != Backend::Cuda)
    return Status();
  const CudaDriver *cu = *CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(*cu, device); !entered)
    return entered;
  CUresult r = cu->cuStreamSynchronize(static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS
             ? Status()
             : Status::error(cu->describe("cuStreamSynchronize", r));
}

void thdc::runtime::destroyStream(Backend backend, void *stream, int device) {
  if (backend != Backend::Cuda || !stream)
    return;
  Result<const CudaDriver *> cu = CudaDriver::get();
  ScopedDevice scope;
  if (cu && scope.enter(**cu, device))
    (*cu)->cuStreamDestroy(static_cast<CUstream>(stream));
}
