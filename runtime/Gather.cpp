//===- Gather.cpp - several small copies in one launch --------------------===//

#include "runtime/Gather.h"
#include "runtime/CudaDriver.h"
#include "runtime/DeviceModule.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

using namespace thdc::runtime;

namespace {
// thdc_gather(count, segments): block (x, y) works on segment y of `count`
// (32 bytes each: source, destination, bytes, value, as GatherSegment); the
// blocks along x share its bytes, grid-stride. The segment is read from the
// parameter space at a computed offset (a kernel parameter's address is a
// .param address). A copy moves 16-, 8- or 4-byte words when both addresses
// are aligned to them and the rest byte by byte; a store (source 0) is
// written by one thread, byte by byte. PTX ISA 8.0 for sm_75 and newer, as
// the compiler emits: the driver compiles it for the device at load.
//
// kPtxTemplate is runtime/GatherKernel.ptx, byte for byte, with
// @WIDE_LOOPS@ where kernelPtx puts the word loops: the header defining it
// is generated from the .ptx at build time (EmbedPtx.cmake).
#include "runtime/GatherKernelPtx.inc"

/// The copy loop over `width`-byte words (16, 8 or 4) that stands for
/// WIDE<width> in kPtxTemplate: the threads along x take words a grid stride
/// apart; the bytes past the last whole word go to BYTES (%rd20 = the first
/// of them).
std::string wideLoop(int width) {
  int shift = width == 16 ? 4 : width == 8 ? 3 : 2;
  const char *move =
      width == 16 ? "  ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd16];\n"
                    "  st.global.v4.u32 [%rd17], {%r10, %r11, %r12, %r13};\n"
      : width == 8 ? "  ld.global.u64   %rd18, [%rd16];\n"
                     "  st.global.u64   [%rd17], %rd18;\n"
                   : "  ld.global.u32   %r10, [%rd16];\n"
                     "  st.global.u32   [%rd17], %r10;\n";
  return fmt::format("WIDE{0}:\n"
                     "  shr.u64         %rd13, %rd6, {1};\n"
                     "  mov.u64         %rd14, %rd8;\n"
                     "WIDE{0}_LOOP:\n"
                     "  setp.ge.u64     %p2, %rd14, %rd13;\n"
                     "  @%p2 bra        WIDE{0}_END;\n"
                     "  shl.b64         %rd15, %rd14, {1};\n"
                     "  add.s64         %rd16, %rd4, %rd15;\n"
                     "  add.s64         %rd17, %rd5, %rd15;\n"
                     "{2}"
                     "  add.s64         %rd14, %rd14, %rd10;\n"
                     "  bra.uni         WIDE{0}_LOOP;\n"
                     "WIDE{0}_END:\n"
                     "  shl.b64         %rd20, %rd13, {1};\n"
                     "  bra.uni         BYTES;\n",
                     width, shift, move);
}

/// The kernel's PTX: the template with its three word loops.
const std::string &kernelPtx() {
  static const std::string ptx = [] {
    std::string text = kPtxTemplate;
    size_t at = text.find("@WIDE_LOOPS@");
    text.replace(at, std::strlen("@WIDE_LOOPS@"),
                 wideLoop(16) + wideLoop(8) + wideLoop(4));
    return text;
  }();
  return ptx;
}

static_assert(sizeof(GatherSegment) == 32, "the kernel reads 32-byte segments");

/// The kernel's parameters, laid out as its PTX declares them.
struct GatherParams {
  uint32_t count = 0;
  std::array<GatherSegment, kGatherSegments> segments;
};

/// The gather kernel per device, loaded on first use and kept for the
/// life of the process (as the primary contexts are).
PerDevice<CUfunction> &gatherFunctions() {
  static PerDevice<CUfunction> *table = new PerDevice<CUfunction>();
  return *table;
}

/// The kernel on the device `scope` entered (its primary context is
/// current).
Result<CUfunction> gatherFunction(const CudaDriver &cu, int device) {
  return gatherFunctions().get(device, [&]() -> Result<CUfunction> {
    std::string arch = cu.architecture(device);
    Result<LoadedCode> code = loadPtx(cu, kernelPtx(), kGatherEntry, arch);
    if (!code)
      return Status::error(fmt::format(
          "loading the runtime's gather kernel on device {} ({}): {}", device,
          arch, code.status().message()));
    return code->function;
  });
}

/// Enters `device` (ScopedDevice::enter's meaning) in `scope` and returns
/// the gather kernel loaded there.
Result<CUfunction> enterGather(const CudaDriver &cu, ScopedDevice &scope,
                               int device) {
  if (Status entered = scope.enter(cu, device); !entered)
    return entered;
  return gatherFunction(cu, scope.device());
}
} // namespace

const char *thdc::runtime::gatherPtx() { return kernelPtx().c_str(); }

Status thdc::runtime::checkGatherSegments(const GatherSegment *segments,
                                          size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const GatherSegment &s = segments[i];
    if (s.source == 0 && s.bytes > 8)
      return Status::error(fmt::format(
          "gather segment {}: a store writes at most 8 bytes; got {}", i,
          s.bytes));
    if (s.destination == 0 && s.bytes != 0)
      return Status::error(fmt::format(
          "gather segment {}: {} bytes to a null destination", i, s.bytes));
  }
  return Status();
}

Status thdc::runtime::prepareGather(int device) {
  Result<const CudaDriver *> cu = CudaDriver::get();
  if (!cu)
    return cu.status();
  ScopedDevice scope;
  Result<CUfunction> function = enterGather(**cu, scope, device);
  return function ? Status() : function.status();
}

Status thdc::runtime::launchGather(const GatherSegment *segments, size_t count,
                                   void *stream, int device) {
  if (Status checked = checkGatherSegments(segments, count); !checked)
    return checked;
  if (count == 0)
    return Status();
  Result<const CudaDriver *> cu = CudaDriver::get();
  if (!cu)
    return cu.status();
  ScopedDevice scope;
  Result<CUfunction> function = enterGather(**cu, scope, device);
  if (!function)
    return function.status();
  for (size_t first = 0; first < count; first += kGatherSegments) {
    GatherParams params;
    params.count = uint32_t(std::min(kGatherSegments, count - first));
    uint64_t largest = 0;
    for (uint32_t i = 0; i < params.count; ++i) {
      params.segments[i] = segments[first + i];
      if (segments[first + i].source)
        largest = std::max(largest, segments[first + i].bytes);
    }
    // One 16-byte word per thread for the largest segment, up to 1024
    // blocks per segment (more bytes loop).
    uint64_t perBlock = uint64_t(kGatherBlock) * 16;
    unsigned blocks = unsigned(
        std::clamp<uint64_t>((largest + perBlock - 1) / perBlock, 1, 1024));
    void *arguments[] = {&params.count, params.segments.data()};
    CUresult r = (*cu)->cuLaunchKernel(
        *function, blocks, params.count, 1, kGatherBlock, 1, 1, 0,
        static_cast<CUstream>(stream), arguments, nullptr);
    if (r != CUDA_SUCCESS)
      return Status::error(
          fmt::format("launching the runtime's gather kernel on device {}: {}",
                      scope.device(), (*cu)->describe("cuLaunchKernel", r)));
  }
  return Status();
}

Status thdc::runtime::gatherOnHost(const GatherSegment *segments,
                                   size_t count) {
  if (Status checked = checkGatherSegments(segments, count); !checked)
    return checked;
  for (size_t i = 0; i < count; ++i) {
    const GatherSegment &s = segments[i];
    auto *destination = reinterpret_cast<unsigned char *>(s.destination);
    if (s.bytes == 0)
      continue;
    if (s.source) {
      std::memcpy(destination, reinterpret_cast<const void *>(s.source),
                  s.bytes);
      continue;
    }
    for (uint64_t b = 0; b < s.bytes; ++b)
      destination[b] = static_cast<unsigned char>(s.value >> (8 * b));
  }
  return Status();
}
