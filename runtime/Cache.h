//===- Cache.h - the on-disk cache: where, who, how to write ----*- C++ -*-===//
//
// One definition of the cache folder (the JIT's bundles and the runtime's
// driver-compiled cubins) and of the rules that make it safe to share
// between the processes of a training job and to race on:
//   - the folder is created private (0700) and used only when it belongs to
//     this user and nobody else can write into it, so that nothing planted
//     there by another user is loaded;
//   - every file is written under a unique temporary name and renamed into
//     place, so a reader never sees a partial file;
//   - an exclusive lock per cache key makes concurrent compiles of one key
//     produce one entry.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_CACHE_H
#define THDC_RUNTIME_CACHE_H

#include "runtime/Status.h"

#include <optional>
#include <string>
#include <string_view>

namespace thdc::runtime {

/// `requested` when not empty, else $THDC_CACHE_DIR, else
/// $XDG_CACHE_HOME/thdc, else $HOME/.cache/thdc; "-" (no disk cache) when
/// none of them is set. "-" passed in stays "-".
std::string cacheDirectory(const std::string &requested);

/// The name of a cache entry made from `material` (everything the entry
/// depends on): 128 bits of its SHA-256, as 32 hex digits. The JIT's bundles
/// and the runtime's cubins are both named by it.
std::string cacheKey(std::string_view material);

/// A cubin as thdc's cache stores it (the driver's compile of a bundle's
/// PTX, kept for later processes): the line "thdc-cubin 1 <SHA-256 of the
/// cubin, hex>", then the cubin's bytes. A cache entry is checked like the
/// rest of the cache: one replaced or flipped bit fails the hash.
std::string encodeCachedCubin(std::string_view cubin);

/// The cubin in `stored` when it is what encodeCachedCubin wrote and its
/// hash matches; nullopt otherwise (damaged, replaced, written by another
/// layout): the caller compiles the PTX again and replaces the entry.
std::optional<std::string> decodeCachedCubin(std::string_view stored);

/// Creates `dir` and its parents if missing (new folders 0700) and checks
/// that it is a folder this user owns and that neither group nor others may
/// write to; the error says which rule failed.
Status prepareCacheDirectory(const std::string &dir);

/// Checks that `path` (a file or folder) belongs to this user and is not
/// writable by group or others.
Status checkPrivate(const std::string &path);

/// Writes `bytes` to `path` through a unique temporary file in the same
/// folder, flushed and renamed into place; on any failure (a full disk, no
/// permission) nothing is left behind and the error names the path.
Status writeFileAtomically(const std::string &path, std::string_view bytes);

/// Writes all of `bytes` to the open file `fd` (retrying short and
/// interrupted writes); false with errno set on failure.
bool writeAll(int fd, std::string_view bytes);

/// Largest file readWholeFile reads (a bundle's PTX or host code is well
/// under a megabyte).
constexpr size_t kMaxReadBytes = size_t(1) << 30;

/// Reads a whole regular file of at most `maxBytes`; a FIFO, a device, a
/// folder or anything larger is an error, never a wait or an endless read
/// (a larger file is refused before any of it is read). With
/// `requirePrivate`, the file must also belong to this user and not be
/// writable by group or others (checked on the opened file, so it cannot be
/// swapped between the check and the read).
Result<std::string> readWholeFile(const std::string &path,
                                  bool requirePrivate = false,
                                  size_t maxBytes = kMaxReadBytes);

/// `dir`/`name`.
std::string joinPath(const std::string &dir, const std::string &name);

/// An exclusive advisory lock (flock) on a lock file, held until destroyed.
class FileLock {
public:
  /// Waits until the lock on `path` (created if missing) is held, at most
  /// `timeoutSeconds` (negative: without a bound); past that, an error that
  /// says who to look for, and `*timedOut` (when given) is set.
  static Result<FileLock> acquire(const std::string &path,
                                  double timeoutSeconds = -1,
                                  bool *timedOut = nullptr);
  FileLock(FileLock &&other) noexcept;
  FileLock &operator=(FileLock &&other) noexcept;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;
  ~FileLock();

private:
  FileLock() = default;
  int fd_ = -1;
};

} // namespace thdc::runtime

#endif // THDC_RUNTIME_CACHE_H
