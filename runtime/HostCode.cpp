//===- HostCode.cpp - a bundle's host code, opened from its bytes ---------===//

#include "runtime/HostCode.h"
#include "runtime/Cache.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace thdc::runtime;

Result<OpenedHostCode> thdc::runtime::openHostCode(const std::string &bytes,
                                                   const std::string &name) {
  auto failed = [&](const std::string &how) {
    return Status::error(
        fmt::format("cannot load the host code {}: {}", name, how));
  };
  // Where memory files cannot be mapped executable (no /proc, a
  // memfd_noexec policy, SELinux), a private copy serves instead.
  std::string memoryFileError;
  int fd = memfd_create("thdc-host-code", MFD_CLOEXEC);
  if (fd < 0) {
    memoryFileError = std::strerror(errno);
  } else if (!writeAll(fd, bytes)) {
    memoryFileError = std::strerror(errno);
    close(fd);
  } else {
    // A name some library is still loaded by (one opened through a
    // descriptor number that was closed since, by code other than this)
    // would return that library: take another number until it is free.
    std::vector<int> held{fd};
    void *handle = nullptr;
    memoryFileError = "no descriptor number was free of a loaded library";
    for (int attempt = 0; attempt < 64; ++attempt) {
      std::string path = fmt::format("/proc/self/fd/{}", held.back());
      if (void *loaded = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        dlclose(loaded);
        int next = fcntl(held.back(), F_DUPFD_CLOEXEC, 0);
        if (next < 0)
          break;
        held.push_back(next);
        continue;
      }
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle)
        memoryFileError = dlerror();
      break;
    }
    int kept = handle ? held.back() : -1;
    for (int open : held)
      if (open != kept)
        close(open);
    if (handle)
      return OpenedHostCode{handle, kept};
  }
  // A private folder of our own, removed once the copy is mapped.
  const char *tmp = std::getenv("TMPDIR");
  std::string parent = tmp && *tmp ? tmp : "/tmp";
  std::string folder = parent + "/thdc-host-XXXXXX";
  if (!mkdtemp(folder.data()))
    return failed(fmt::format("neither from a memory file ({}) nor from a "
                              "private copy in '{}' ({}; set TMPDIR to a "
                              "folder of yours)",
                              memoryFileError, parent, std::strerror(errno)));
  std::string path = folder + "/host.so";
  fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  bool written = fd >= 0 && writeAll(fd, bytes);
  std::string message = written ? "" : std::strerror(errno);
  if (fd >= 0)
    close(fd);
  void *handle =
      written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (written && !handle)
    message = dlerror();
  unlink(path.c_str());
  rmdir(folder.c_str());
  if (!handle)
    return failed(message + " (from a memory file: " + memoryFileError + ")");
  return OpenedHostCode{handle, -1};
}

void thdc::runtime::closeHostCode(void *handle, int fd) {
  dlclose(handle);
  if (fd < 0)
    return;
  std::string path = fmt::format("/proc/self/fd/{}", fd);
  if (void *still = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(still);
    return;
  }
  close(fd);
}

size_t thdc::runtime::symbolSize(const void *address) {
  Dl_info info;
  void *entry = nullptr;
  if (!dladdr1(address, &info, &entry, RTLD_DL_SYMENT) || !entry ||
      info.dli_saddr != address)
    return 0;
  return static_cast<const ElfW(Sym) *>(entry)->st_size;
}
