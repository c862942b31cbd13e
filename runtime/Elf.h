//===- Elf.h - read an initialised symbol out of an ELF64 image -*- C++ -*-===//
//
// A cubin is an ELF64 file. The kernel's buffer table and entry name
// (kBufferTableSymbol, kNameTableSymbol) are initialised globals, so their
// bytes are in the cubin itself (in .nv.global.init): reading them there
// saves a device read per symbol when a module is loaded from a cubin.
//
// The image is untrusted input: every offset and size is checked against
// the image's length, and anything malformed is an error naming what was
// wrong, never a read past the end.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_ELF_H
#define THDC_RUNTIME_ELF_H

#include "runtime/Status.h"

#include <optional>
#include <string>
#include <string_view>

namespace thdc::runtime {

/// The initial bytes (st_size of them) of the symbol `name` in the
/// little-endian ELF64 `image`, from the section that holds them; nullopt
/// when the image has no symbol `name`. An error when the image is not such
/// an ELF file, is truncated or inconsistent, or the symbol has no initial
/// bytes (undefined, or in a section without contents such as .bss).
Result<std::optional<std::string>> readElfSymbolBytes(std::string_view image,
                                                      std::string_view name);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_ELF_H
