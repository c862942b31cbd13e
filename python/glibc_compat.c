/* The glibc functions and variables that the module's static archives
 * (LLVM's, libstdc++'s: compiled against glibc 2.36's headers) use and
 * glibc 2.28 lacks; linked into the manylinux module only
 * (cmake/thdcManylinux.cmake says why and how). Each is hidden: the module
 * uses its own, on any glibc, and exports none. Semantics as glibc's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#define THDC_COMPAT __attribute__((visibility("hidden")))

/* glibc 2.32: nonzero while the process is known to have one thread, which
 * lets libstdc++ skip atomic operations (reference counts). 0 says "not
 * known": always atomic, which is correct with any number of threads. */
THDC_COMPAT char __libc_single_threaded = 0;

/* glibc 2.36: 32 random bits from the kernel (getrandom, glibc 2.25; then
 * /dev/urandom where the kernel has no getrandom), as glibc's does it; no
 * failure is reported, so none is possible: it aborts, as glibc's does,
 * where neither gives entropy. libstdc++'s std::random_device and LLVM's
 * random numbers call it. */
THDC_COMPAT uint32_t arc4random(void) {
  uint32_t value;
  unsigned char *out = (unsigned char *)&value;
  size_t left = sizeof value;
  int saved_errno = errno;
  while (left > 0) {
    ssize_t n = getrandom(out, left, 0);
    if (n > 0) {
      out += n;
      left -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == ENOSYS) {
      int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      while (fd >= 0 && left > 0) {
        n = read(fd, out, left);
        if (n > 0) {
          out += n;
          left -= (size_t)n;
        } else if (!(n < 0 && errno == EINTR)) {
          break;
        }
      }
      if (fd >= 0)
        close(fd);
      if (left > 0)
        abort();
    } else {
      abort();
    }
  }
  errno = saved_errno;
  return value;
}

/* glibc 2.33: mallinfo with size_t fields; LLVM's Process::GetMallocUsage
 * reads uordblks. From mallinfo, whose int fields wrap past 2 GiB (read
 * here as unsigned: exact to 4 GiB). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
THDC_COMPAT struct mallinfo2 mallinfo2(void) {
  struct mallinfo m = mallinfo();
  struct mallinfo2 r;
  r.arena = (unsigned)m.arena;
  r.ordblks = (unsigned)m.ordblks;
  r.smblks = (unsigned)m.smblks;
  r.hblks = (unsigned)m.hblks;
  r.hblkhd = (unsigned)m.hblkhd;
  r.usmblks = (unsigned)m.usmblks;
  r.fsmblks = (unsigned)m.fsmblks;
  r.uordblks = (unsigned)m.uordblks;
  r.fordblks = (unsigned)m.fordblks;
  r.keepcost = (unsigned)m.keepcost;
  return r;
}
#pragma GCC diagnostic pop
