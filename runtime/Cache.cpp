//===- Cache.cpp - thdc's on-disk cache: where, who, and how to write -----===//

#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <thread>
#include <utility>

using namespace thdc::runtime;

namespace {
std::string errnoText() { return std::strerror(errno); }
} // namespace

std::string thdc::runtime::joinPath(const std::string &dir,
                                    const std::string &name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string thdc::runtime::cacheDirectory(const std::string &requested) {
  if (!requested.empty())
    return requested;
  if (const char *dir = std::getenv("THDC_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return joinPath(xdg, "thdc");
  if (const char *home = std::getenv("HOME"); home && *home)
    return joinPath(joinPath(home, ".cache"), "thdc");
  return "-";
}

namespace {
constexpr std::string_view kCachedCubinHeader = "thdc-cubin 1 ";
constexpr size_t kSha256HexDigits = 64;
} // namespace

std::string thdc::runtime::encodeCachedCubin(std::string_view cubin) {
  std::string stored(kCachedCubinHeader);
  stored += sha256Hex(cubin);
  stored += '\n';
  stored += cubin;
  return stored;
}

std::optional<std::string>
thdc::runtime::decodeCachedCubin(std::string_view stored) {
  size_t header = kCachedCubinHeader.size() + kSha256HexDigits + 1;
  if (stored.size() <= header ||
      stored.substr(0, kCachedCubinHeader.size()) != kCachedCubinHeader ||
      stored[header - 1] != '\n')
    return std::nullopt;
  std::string_view hash =
      stored.substr(kCachedCubinHeader.size(), kSha256HexDigits);
  std::string_view cubin = stored.substr(header);
  if (sha256Hex(cubin) != hash)
    return std::nullopt;
  return std::string(cubin);
}

std::string thdc::runtime::cacheKey(std::string_view material) {
  return sha256Hex(material).substr(0, 32);
}

namespace {
/// Why `path`, whose status is `info`, is not private to this user, or ok.
Status privacy(const std::string &path, const struct stat &info) {
  if (info.st_uid != geteuid())
    return Status::error(fmt::format(
        "{} belongs to another user (uid {}); thdc loads only what this user "
        "wrote",
        path, info.st_uid));
  if (info.st_mode & (S_IWGRP | S_IWOTH))
    return Status::error(
        fmt::format("{} is writable by other users; make it private (chmod "
                    "go-w) or choose another THDC_CACHE_DIR",
                    path));
  return Status();
}
} // namespace

Status thdc::runtime::checkPrivate(const std::string &path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0)
    return Status::error(
        fmt::format("cannot inspect {}: {}", path, errnoText()));
  return privacy(path, info);
}

Status thdc::runtime::prepareCacheDirectory(const std::string &dir) {
  if (dir.empty() || dir == "-")
    return Status::error("no cache folder");
  // The usual case, an existing folder, in one system call.
  struct stat existing;
  if (lstat(dir.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode))
    return privacy(dir, existing);
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      std::string prefix = dir.substr(0, i);
      if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
        return Status::error(fmt::format(
            "cannot create the cache folder {}: {}", prefix, errnoText()));
    }
  struct stat info;
  if (stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Status::error(
        fmt::format("the cache folder {} is not a folder", dir));
  return checkPrivate(dir);
}

Result<std::string> thdc::runtime::readWholeFile(const std::string &path,
                                                 bool requirePrivate,
                                                 size_t maxBytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return Status::error(fmt::format("cannot read {}: {}", path, errnoText()));
  auto fail = [&](const std::string &message) {
    close(fd);
    return Status::error(message);
  };
  struct stat info;
  if (fstat(fd, &info) != 0)
    return fail(fmt::format("cannot read {}: {}", path, errnoText()));
  if (!S_ISREG(info.st_mode))
    return fail(fmt::format("{} is not a regular file; refusing to read it",
                            path));
  if (size_t(info.st_size) > maxBytes)
    return fail(fmt::format("{} has {} bytes, more than the {} thdc reads",
                            path, info.st_size, maxBytes));
  if (requirePrivate)
    if (Status private_ = privacy(path, info); !private_)
      return fail(private_.message());
  std::string bytes;
  bytes.reserve(size_t(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return fail(fmt::format("cannot read {}: {}", path, errnoText()));
    if (got == 0)
      break;
    // A file that grows while it is read is not read without end.
    if (bytes.size() + size_t(got) > maxBytes)
      return fail(fmt::format("{} grew past {} bytes while it was read", path,
                              maxBytes));
    bytes.append(buffer, size_t(got));
  }
  close(fd);
  return bytes;
}

bool thdc::runtime::writeAll(int fd, std::string_view bytes) {
  const char *data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = write(fd, data, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written < 0)
      return false;
    if (written == 0) {
      errno = ENOSPC;
      return false;
    }
    data += written;
    left -= size_t(written);
  }
  return true;
}

Status thdc::runtime::writeFileAtomically(const std::string &path,
                                          std::string_view bytes) {
  std::string temporary = path + ".tmp-XXXXXX";
  int fd = mkstemp(temporary.data());
  if (fd < 0)
    return Status::error(fmt::format("cannot write {}: {}", path, errnoText()));
  if (!writeAll(fd, bytes)) {
    std::string message = fmt::format("cannot write {}: {}", path, errnoText());
    close(fd);
    unlink(temporary.c_str());
    return Status::error(message);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    std::string message = fmt::format("cannot write {}: {}", path, errnoText());
    unlink(temporary.c_str());
    return Status::error(message);
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    std::string message = fmt::format("cannot write {}: {}", path, errnoText());
    unlink(temporary.c_str());
    return Status::error(message);
  }
  return Status();
}

Result<FileLock> FileLock::acquire(const std::string &path,
                                   double timeoutSeconds, bool *timedOut) {
  if (timedOut)
    *timedOut = false;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return Status::error(
        fmt::format("cannot open the lock {}: {}", path, errnoText()));
  auto start = std::chrono::steady_clock::now();
  // Polled rather than blocking, so that a holder that never lets go (a
  // process stopped in a debugger, a compile that does not end) costs its
  // waiters a bounded time. The pause grows to 20 ms: short waits stay
  // short and long ones cost little.
  std::chrono::microseconds pause(200);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR)
      continue;
    if (errno != EWOULDBLOCK) {
      std::string message =
          fmt::format("cannot lock {}: {}", path, errnoText());
      close(fd);
      return Status::error(message);
    }
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (timeoutSeconds >= 0 && waited >= timeoutSeconds) {
      close(fd);
      if (timedOut)
        *timedOut = true;
      return Status::error(fmt::format(
          "waited {:.1f} s for the lock {}, which another process holds (a "
          "compile of the same pipeline that has not finished: look for a "
          "stuck process, or raise THDC_LOCK_TIMEOUT; 0 waits without a "
          "bound)",
          waited, path));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  FileLock lock;
  lock.fd_ = fd;
  return lock;
}

FileLock::FileLock(FileLock &&other) noexcept { *this = std::move(other); }

FileLock &FileLock::operator=(FileLock &&other) noexcept {
  std::swap(fd_, other.fd_);
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    flock(fd_, LOCK_UN);
    close(fd_);
  }
}
