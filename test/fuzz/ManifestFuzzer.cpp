//===- ManifestFuzzer.cpp - the bundle manifest reader --------------------===//
//
// Arbitrary text as a bundle's manifest.json (runtime::parseManifest): a
// manifest or an error naming what is wrong, and for every accepted one,
// buffer sizes that do not overflow.
//
//===----------------------------------------------------------------------===//

#include "runtime/Manifest.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace thdc::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Result<Manifest> manifest = parseManifest(
      std::string(reinterpret_cast<const char *>(data), size), "manifest.json");
  if (!manifest)
    return 0;
  for (const BufferDesc &buffer : manifest->buffers)
    if (buffer.elements < 1 || buffer.bytes() / size_t(buffer.elements) == 0 ||
        buffer.bytes() > (size_t(1) << 43))
      std::abort(); // accepted a buffer the runtime could not allocate
  return 0;
}
