//===- Buffers.cpp - an executable's buffers on its backend ---------------===//

#include "runtime/CudaDriver.h"
#include "runtime/Executable.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

using namespace thdc::runtime;

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
