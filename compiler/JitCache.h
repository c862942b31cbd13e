//===- JitCache.h - the JIT's cache folder: entries and staging -*- C++ -*-===//
//
// Private to the JIT (compiler/Jit.cpp). What the JIT does in its cache
// folder: loading an entry, staging a compile in a folder of its own,
// publishing the staged bundle as an entry with one rename, and the
// housekeeping of what processes that died mid-compile left behind (staging
// folders, entries set aside for deletion) in the cache folder and in the
// system's temporary folder.
//
// An entry of the cache folder `dir` for key `key` is the bundle folder
// `dir/jit-<key>`; its lock file is `dir/jit-<key>.lock`.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_JITCACHE_H
#define THDC_COMPILER_JITCACHE_H

#include "reference/Status.h"
#include "runtime/Cache.h"
#include "runtime/Executable.h"
#include "runtime/Manifest.h"

#include "llvm/ADT/SmallString.h"

#include <memory>
#include <optional>
#include <string>

namespace thdc::detail {

/// The bundle a cache entry holds when it is whole and ours; else null,
/// with why in `unusable` where there is an entry, and `foreign` when the
/// entry is not ours (not to be deleted).
std::unique_ptr<runtime::Executable>
loadCacheEntry(const std::string &entry, const runtime::LoadOptions &load,
               std::string &unusable, bool &foreign);

/// A folder that a compile writes its bundle into before it is published.
struct Staging {
  llvm::SmallString<256> path;
  /// Beside the cache entry, so that publishing is one rename; else in the
  /// temporary folder.
  bool inCache = false;
  /// Held while this process uses a temporary staging folder, so that a
  /// process that cannot see ours (another PID namespace sharing the
  /// temporary folder) never takes it for a dead one's.
  std::optional<runtime::FileLock> lock;
};

/// Phase 1, stage: a staging folder for cache entry `entry` of cache folder
/// `dir`, beside the entry when `useDisk`; where the cache cannot be
/// written, in the temporary folder with why in `cacheNote`.
Result<Staging> stage(const std::string &dir, const std::string &entry,
                      bool useDisk, std::string &cacheNote);

/// A fresh staging folder for cache entry `entry` in the temporary folder,
/// in place of `staging` (whose folder the caller has removed): where a
/// compile beside the entry failed, perhaps because the cache could not be
/// written.
Status stageOutsideCache(const std::string &entry, Staging &staging);

/// Phase 3, publish: the bundle compiled into `staging` (manifest
/// `written`) loaded with `load` and, when it was staged in the cache,
/// renamed into place as `entry` of cache folder `dir` (replacing an entry
/// there when `replace`); `published` says whether it was. A bundle staged
/// outside the cache, or one that could not be published (why in
/// `cacheNote`), is removed once loaded.
Result<std::unique_ptr<runtime::Executable>>
publish(Staging &staging, const runtime::Manifest &written,
        const std::string &dir, const std::string &entry,
        const runtime::LoadOptions &load, bool replace, bool &published,
        std::string &cacheNote);

/// Moves a damaged cache entry out of the way and deletes it.
void discardEntry(const std::string &entry);

/// Removes what processes that died while compiling `key` left in the
/// cache folder `dir` (staging folders, entries set aside for deletion).
/// Called with the key's lock held: nobody alive is writing them.
void removeLeftovers(const std::string &dir, const std::string &key);

/// Removes temporary staging folders that processes which have since died
/// left in the system's temporary folder (a process killed mid-compile):
/// their process is gone and their lock is free.
void removeDeadProcessesStaging();

} // namespace thdc::detail

#endif // THDC_COMPILER_JITCACHE_H
