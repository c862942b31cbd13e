//===- JitCache.cpp - the JIT's cache folder: entries and staging ---------===//
//
// The definitions of compiler/JitCache.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/JitCache.h"
#include "compiler/Bundle.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <vector>

using namespace thdc;
using namespace thdc::detail;
using namespace thdc::runtime;

namespace {
/// The prefix of this process's temporary staging folders (outside the
/// cache): the process id lets a later process tell a dead one's.
std::string temporaryStagingPrefix() {
  return "thdc-jit-" + std::to_string(getpid()) + "-";
}

/// The lock file of a temporary staging folder, held by the process that
/// compiles in it.
constexpr char kStagingLockFile[] = ".compiling";

/// Whether nobody holds the lock of the staging folder `dir` (a folder
/// without one is not judged).
bool stagingAbandoned(const std::string &dir) {
  int fd = open(joinPath(dir, kStagingLockFile).c_str(),
                O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return false;
  bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free;
}

/// A fresh staging folder for cache entry `entry`: beside it when
/// `inCache`, else in the temporary folder.
std::error_code makeStaging(const std::string &entry, bool inCache,
                            Staging &staging) {
  staging.inCache = inCache;
  if (inCache)
    return llvm::sys::fs::createUniqueDirectory(entry + ".staging",
                                                staging.path);
  std::error_code ec = llvm::sys::fs::createUniqueDirectory(
      temporaryStagingPrefix() + "staging", staging.path);
  if (!ec)
    if (Result<FileLock> held = FileLock::acquire(
            joinPath(std::string(staging.path), kStagingLockFile), 0))
      staging.lock.emplace(std::move(*held));
  return ec;
}

Status cannotCreateStaging(std::error_code ec) {
  return Status::error("cannot create a folder for the JIT: " + ec.message());
}
} // namespace

std::unique_ptr<Executable> detail::loadCacheEntry(const std::string &entry,
                                                   const LoadOptions &load,
                                                   std::string &unusable,
                                                   bool &foreign) {
  if (!llvm::sys::fs::exists(joinPath(entry, kManifestFile)))
    return nullptr;
  Status owned = checkPrivate(entry);
  Result<std::unique_ptr<Executable>> cached =
      owned ? Executable::load(entry, load)
            : Result<std::unique_ptr<Executable>>(owned);
  if (!cached) {
    unusable = "compiled again: " + cached.status().message();
    foreign = !owned;
    return nullptr;
  }
  return std::move(*cached);
}

Result<Staging> detail::stage(const std::string &dir, const std::string &entry,
                              bool useDisk, std::string &cacheNote) {
  Staging staging;
  std::error_code ec = makeStaging(entry, useDisk, staging);
  if (ec && useDisk) {
    cacheNote = "cannot write into the cache " + dir + ": " + ec.message();
    ec = makeStaging(entry, false, staging);
  }
  if (ec)
    return cannotCreateStaging(ec);
  return std::move(staging);
}

Status detail::stageOutsideCache(const std::string &entry, Staging &staging) {
  if (std::error_code ec = makeStaging(entry, false, staging))
    return cannotCreateStaging(ec);
  return Status();
}

Result<std::unique_ptr<Executable>>
detail::publish(Staging &staging, const Manifest &written,
                const std::string &dir, const std::string &entry,
                const LoadOptions &load, bool replace, bool &published,
                std::string &cacheNote) {
  std::string bundle(staging.path);
  bool inCache = staging.inCache;
  std::optional<Result<std::unique_ptr<Executable>>> loaded;
  if (inCache && load.backend == Backend::Cuda && written.cubinFile.empty()) {
    // Loaded before it is published: the cubin the driver compiles from the
    // PTX joins the entry, so that a hit loads it without reading or
    // compiling the PTX. No reader sees the staging folder until the rename.
    // (The PTX the load read stays in memory for other devices' loads.)
    LoadOptions first = load;
    first.keepDriverCubin = true;
    loaded = Executable::load(bundle, first);
    if (!*loaded) {
      llvm::sys::fs::remove_directories(staging.path);
      return loaded->status();
    }
    const Executable &executable = ***loaded;
    // A cubin for the chip the entry was compiled for (JitOptions::gpu.chip
    // may name another than the device's).
    if (!executable.driverCubin().empty() &&
        executable.manifest().cubinFile.empty() &&
        executable.loadInfo().chip == executable.manifest().chip)
      if (Status added = addCubinToBundle(bundle, executable.manifest(),
                                          executable.driverCubin());
          !added) {
        cacheNote =
            "cannot write into the cache " + dir + ": " + added.message();
        inCache = false;
      }
  }
  if (inCache) {
    if (replace && llvm::sys::fs::exists(entry) && checkPrivate(entry))
      discardEntry(entry);
    if (std::error_code ec = llvm::sys::fs::rename(staging.path, entry)) {
      cacheNote = "cannot publish " + entry + ": " + ec.message();
      inCache = false;
    } else {
      bundle = entry;
    }
  }
  if (!loaded)
    loaded = Executable::load(bundle, load);
  if (!inCache)
    // Loaded (the host code is mapped): the private copy can go.
    llvm::sys::fs::remove_directories(bundle);
  published = inCache;
  return std::move(*loaded);
}

void detail::discardEntry(const std::string &entry) {
  llvm::SmallString<256> aside;
  if (!llvm::sys::fs::createUniqueDirectory(entry + ".discarded", aside)) {
    llvm::sys::fs::remove(aside);
    if (!llvm::sys::fs::rename(entry, aside)) {
      llvm::sys::fs::remove_directories(aside);
      return;
    }
  }
  llvm::sys::fs::remove_directories(entry);
}

void detail::removeLeftovers(const std::string &dir, const std::string &key) {
  std::error_code ec;
  std::vector<std::string> leftovers;
  std::string staging = "jit-" + key + ".staging",
              discarded = "jit-" + key + ".discarded";
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if ((name.starts_with(staging) || name.starts_with(discarded)) &&
        checkPrivate(it->path()))
      leftovers.push_back(it->path());
  }
  for (const std::string &path : leftovers)
    llvm::sys::fs::remove_directories(path);
}

void detail::removeDeadProcessesStaging() {
  llvm::SmallString<256> temporary;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, temporary);
  std::error_code ec;
  std::vector<std::string> dead;
  for (llvm::sys::fs::directory_iterator it(temporary, ec), end;
       !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front("thdc-jit-"))
      continue;
    unsigned long long pid = 0;
    if (name.consumeInteger(10, pid) || !name.starts_with("-") || pid == 0 ||
        pid > 0x7fffffff)
      continue;
    if (kill(pid_t(pid), 0) != 0 && errno == ESRCH &&
        checkPrivate(it->path()) && stagingAbandoned(it->path()))
      dead.push_back(it->path());
  }
  for (const std::string &path : dead)
    llvm::sys::fs::remove_directories(path);
}
