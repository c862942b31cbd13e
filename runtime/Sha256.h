//===- Sha256.h - SHA-256 of bundle files ----------------------*- C++ -*-===//
//
// The content hash a bundle's manifest records for each of its files, which
// the runtime checks before it loads a module or dlopens host code: a
// truncated, damaged or replaced file is refused instead of mapped.
// FIPS 180-4 SHA-256, no dependency; on x86-64 processors with the SHA
// extensions the compression runs on them (about 10x faster: a disk-cache
// hit of the JIT hashes the files it loads).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_SHA256_H
#define THDC_RUNTIME_SHA256_H

#include <string>
#include <string_view>

namespace thdc::runtime {

/// The SHA-256 digest of `bytes` as 64 lowercase hex digits.
std::string sha256Hex(std::string_view bytes);

namespace detail {
/// sha256Hex with the portable compression whatever the processor, for
/// tests that compare the two.
std::string sha256HexPortable(std::string_view bytes);
/// Whether sha256Hex runs on the processor's SHA instructions.
bool sha256UsesProcessorInstructions();
} // namespace detail

} // namespace thdc::runtime

#endif // THDC_RUNTIME_SHA256_H
