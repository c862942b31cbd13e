//===- Executable.cpp - load a bundle, launch it, capture it --------------===//

#include "runtime/Executable.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "runtime/Sha256.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace thdc::runtime;

namespace {
/// Compares the buffer table compiled into a bundle's code (the buffer
/// count, then each buffer's length) with its manifest; a message naming
/// the first difference, or empty. `what` names the code.
std::string bufferTableMismatch(const Manifest &m, const int64_t *counts,
                                size_t entries, const char *what) {
  const std::vector<BufferDesc> &buffers = m.buffers;
  if (entries == 0 || counts[0] != int64_t(buffers.size()) ||
      entries != buffers.size() + 1)
    return fmt::format("{} lists {} buffers, but the {} takes {}",
                       kManifestFile, buffers.size(), what,
                       entries ? counts[0] : 0);
  for (size_t i = 0; i < buffers.size(); ++i)
    if (counts[i + 1] != buffers[i].elements)
      return fmt::format(
          "{}: buffer '{}' has {} elements, but the {} was compiled for {}",
          kManifestFile, buffers[i].name, buffers[i].elements, what,
          counts[i + 1]);
  return "";
}

/// Reads a bundle file and checks it against the manifest's hash.
Result<std::string> readBundleFile(const std::string &bundleDir,
                                   const Manifest &m, const std::string &file,
                                   bool requireHash) {
  Result<std::string> bytes = readWholeFile(joinPath(bundleDir, file));
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

namespace {
/// Loads `ptx` as a module for `arch`: the cubin that an earlier process's
/// driver compiled from it when `cacheDir` holds one, else the driver's
/// compile now, whose cubin is then kept there.
Status loadPtx(const CudaDriver &cu, const std::string &ptx,
               const std::string &kernelName, const std::string &arch,
               const std::string &cacheDir, CUmodule *module,
               bool *fromCache) {
  // The cache key covers the PTX, the GPU and the driver that compiles it.
  std::string key =
      cacheKey(ptx + "\n" + arch + "\n" + std::to_string(cu.driverVersion));
  // A cache folder that another user could write to is not read.
  std::string cubinPath = cacheDir == "-" || !prepareCacheDirectory(cacheDir)
                              ? std::string()
                              : joinPath(cacheDir, "cubin-" + key + ".cubin");
  Result<std::string> cached = cubinPath.empty() || !checkPrivate(cubinPath)
                                   ? Result<std::string>(Status::error(""))
                                   : readWholeFile(cubinPath);
  if (cached && cu.cuModuleLoadData(module, cached->data()) == CUDA_SUCCESS) {
    *fromCache = true;
    return Status();
  }
  CUlinkState link = nullptr;
  void *cubin = nullptr;
  size_t cubinSize = 0;
  CUresult r = cu.cuLinkCreate(0, nullptr, nullptr, &link);
  if (r == CUDA_SUCCESS)
    r = cu.cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char *>(ptx.c_str()),
                         ptx.size() + 1, kernelName.c_str(), 0, nullptr,
                         nullptr);
  if (r == CUDA_SUCCESS)
    r = cu.cuLinkComplete(link, &cubin, &cubinSize);
  if (r == CUDA_SUCCESS)
    r = cu.cuModuleLoadData(module, cubin);
  // A cubin that cannot be cached (a full disk) only costs the next process
  // the driver's compile again.
  if (r == CUDA_SUCCESS && !cubinPath.empty())
    (void)writeFileAtomically(
        cubinPath,
        std::string_view(static_cast<const char *>(cubin), cubinSize));
  if (link)
    cu.cuLinkDestroy(link);
  if (r != CUDA_SUCCESS)
    return Status::error(fmt::format(
        "loading the PTX of kernel '{}' for {}: {}", kernelName, arch,
        cu.describe("cuLinkAddData/cuModuleLoadData", r)));
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
  CUmodule module = nullptr;
  // The bundle's cubin, on the chip it was assembled for: nothing to compile.
  bool fromBundle = !cubin_.empty() && arch == manifest_.chip &&
                    cu.cuModuleLoadData(&module, cubin_.data()) == CUDA_SUCCESS;
  bool fromCache = false;
  if (!fromBundle)
    if (Status loaded = loadPtx(cu, ptx_, manifest_.kernelName, arch,
                                cubinCacheDir_, &module, &fromCache);
        !loaded)
      return loaded;
  CUfunction function = nullptr;
  CUresult r =
      cu.cuModuleGetFunction(&function, module, manifest_.kernelName.c_str());
  if (r != CUDA_SUCCESS) {
    cu.cuModuleUnload(module);
    return Status::error(fmt::format("kernel '{}': {}", manifest_.kernelName,
                                     cu.describe("cuModuleGetFunction", r)));
  }
  if (device == info_.deviceOrdinal) {
    LoadInfo &info = const_cast<LoadInfo &>(info_);
    info.cubinFromCache = fromCache;
    info.cubinFromBundle = fromBundle;
    info.moduleMicros = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  }
  modules_->modules[device] = module;
  modules_->functions[device].store(function, std::memory_order_release);
  return Status();
}

/// The kernel states its buffers' lengths (PTX of bundles written before it
/// did does not): a manifest that disagrees would let callers hand it
/// buffers it reads or writes past. Checked once, when the bundle is loaded.
Status Executable::checkKernelBuffers(int device) const {
  const CudaDriver &cu = **CudaDriver::get();
  ScopedDevice scope;
  if (Status entered = scope.enter(cu, device); !entered)
    return entered;
  CUdeviceptr address = 0;
  size_t bytes = 0;
  std::string symbol = manifest_.entry + kBufferElementsSuffix;
  if (cu.cuModuleGetGlobal(&address, &bytes, modules_->modules[device],
                           symbol.c_str()) != CUDA_SUCCESS)
    return Status();
  std::vector<int64_t> counts(bytes / sizeof(int64_t));
  CUresult r = cu.cuMemcpyDtoH(counts.data(), address, bytes);
  if (r != CUDA_SUCCESS)
    return Status::error(
        fmt::format("reading {}: {}", symbol, cu.describe("cuMemcpyDtoH", r)));
  std::string mismatch =
      bufferTableMismatch(manifest_, counts.data(), counts.size(), "kernel");
  return mismatch.empty() ? Status() : Status::error(mismatch);
}

Result<std::unique_ptr<Executable>>
Executable::load(const std::string &bundleDir, const LoadOptions &options) {
  Result<Manifest> manifest = readManifest(bundleDir);
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
    Result<std::string> ptx =
        readBundleFile(bundleDir, m, m.ptxFile, options.requireHashes);
    if (!ptx)
      return ptx.status();
    executable->ptx_ = std::move(*ptx);
    if (!m.cubinFile.empty()) {
      Result<std::string> cubin =
          readBundleFile(bundleDir, m, m.cubinFile, options.requireHashes);
      if (!cubin)
        return cubin.status();
      executable->cubin_ = std::move(*cubin);
    }
    executable->cubinCacheDir_ = cacheDirectory(options.cacheDir);
    executable->modules_ = std::make_unique<DeviceModules>();
    executable->info_.backend = Backend::Cuda;
    executable->info_.deviceOrdinal = *device;
    executable->info_.device = cu.name(*device);
    if (Status loaded = executable->loadModule(*device); !loaded)
      return loaded;
    if (Status matches = executable->checkKernelBuffers(*device); !matches)
      return matches;
  } else {
    if (m.hostLibrary.empty())
      return Status::error(
          fmt::format("no GPU ({}) and the bundle has no host code",
                      driver.status().message()));
    // Checked against the manifest before it is mapped: a truncated or
    // replaced library is refused, never dlopened.
    if (Result<std::string> bytes =
            readBundleFile(bundleDir, m, m.hostLibrary, options.requireHashes);
        !bytes)
      return bytes.status();
    std::string library = joinPath(bundleDir, m.hostLibrary);
    if (library.front() != '/') {
      char cwd[4096];
      if (getcwd(cwd, sizeof(cwd)))
        library = joinPath(cwd, library);
    }
    void *handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return Status::error(
          fmt::format("cannot load the host code: {}", dlerror()));
    void *symbol = dlsym(handle, m.hostSymbol.c_str());
    if (!symbol) {
      dlclose(handle);
      return Status::error(
          fmt::format("the host code has no symbol '{}'", m.hostSymbol));
    }
    // The code states its buffers' lengths (bundles written before it did
    // do not): a manifest that disagrees would make it write past them.
    if (auto *counts = static_cast<const int64_t *>(
            dlsym(handle, (m.entry + kBufferElementsSuffix).c_str()))) {
      // Read before dlclose unmaps them; the table is as long as its first
      // entry says, and compared only when that matches the manifest.
      size_t entries =
          counts[0] == int64_t(m.buffers.size()) ? m.buffers.size() + 1 : 1;
      std::string mismatch =
          bufferTableMismatch(m, counts, entries, "host code");
      if (!mismatch.empty()) {
        dlclose(handle);
        return Status::error(joinPath(bundleDir, mismatch));
      }
    }
    executable->library_ = handle;
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
      for (int device = 0; device < CudaDriver::kMaxDevices; ++device)
        if (CUmodule module = modules_->modules[device]) {
          ScopedDevice scope;
          if (scope.enter(**driver, device))
            (*driver)->cuModuleUnload(module);
        }
  if (library_)
    dlclose(library_);
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
