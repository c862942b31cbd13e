//===- Sha256.h - SHA-256 of bundle files ----------------------*- C++ -*-===//
//
// The content hash a bundle's manifest records for each of its files, which
// the runtime checks before it loads a module or dlopens host code: a
// truncated, damaged or replaced file is refused instead of mapped.
// FIPS 180-4 SHA-256, no dependency.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_SHA256_H
#define THDC_RUNTIME_SHA256_H

#include <string>
#include <string_view>

namespace thdc::runtime {

/// The SHA-256 digest of `bytes` as 64 lowercase hex digits.
std::string sha256Hex(std::string_view bytes);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_SHA256_H
