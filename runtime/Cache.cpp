//===- Cache.cpp - thdc's on-disk cache: where, who, and how to write -----===//

#include "runtime/Cache.h"
#include "runtime/Sha256.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
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

std::string thdc::runtime::cacheKey(std::string_view material) {
  return sha256Hex(material).substr(0, 32);
}

Status thdc::runtime::checkPrivate(const std::string &path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0)
    return Status::error(
        fmt::format("cannot inspect {}: {}", path, errnoText()));
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

Status thdc::runtime::prepareCacheDirectory(const std::string &dir) {
  if (dir.empty() || dir == "-")
    return Status::error("no cache folder");
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

Result<std::string> thdc::runtime::readWholeFile(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(fmt::format("cannot read {}: {}", path, errnoText()));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      std::string message =
          fmt::format("cannot read {}: {}", path, errnoText());
      close(fd);
      return Status::error(message);
    }
    if (got == 0)
      break;
    bytes.append(buffer, size_t(got));
  }
  close(fd);
  return bytes;
}

Status thdc::runtime::writeFileAtomically(const std::string &path,
                                          std::string_view bytes) {
  std::string temporary = path + ".tmp-XXXXXX";
  int fd = mkstemp(temporary.data());
  if (fd < 0)
    return Status::error(fmt::format("cannot write {}: {}", path, errnoText()));
  const char *data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = write(fd, data, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0) {
      std::string message =
          fmt::format("cannot write {}: {}", path, errnoText());
      close(fd);
      unlink(temporary.c_str());
      return Status::error(message);
    }
    data += written;
    left -= size_t(written);
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

Result<FileLock> FileLock::acquire(const std::string &path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::error(
        fmt::format("cannot open the lock {}: {}", path, errnoText()));
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR)
      continue;
    std::string message = fmt::format("cannot lock {}: {}", path, errnoText());
    close(fd);
    return Status::error(message);
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
