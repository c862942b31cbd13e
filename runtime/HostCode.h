//===- HostCode.h - a bundle's host code, opened from its bytes -*- C++ -*-===//
//
// Internal to the runtime (not installed): how Executable::load maps the host
// code of a bundle without a GPU. The library is opened from the bytes that
// were checked against the manifest's hash, through an anonymous memory file,
// never from its path in the bundle.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_HOSTCODE_H
#define THDC_RUNTIME_HOSTCODE_H

#include "runtime/Status.h"

#include <cstddef>
#include <string>

namespace thdc::runtime {

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
                                    const std::string &name);

/// Unloads host code openHostCode mapped. Its descriptor is closed only
/// once the library is gone: where the loader keeps it (a library that
/// cannot be unloaded), the descriptor stays open with it, for the reason
/// openHostCode gives.
void closeHostCode(void *handle, int fd);

/// The size of the object at `address` in a loaded library, from its
/// symbol table (0 when it is not a symbol's start).
size_t symbolSize(const void *address);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_HOSTCODE_H
