/* close_range (glibc 2.34) for the interpreter that scripts/test-old-glibc.sh
 * links against glibc 2.31: the system call, as glibc's wrapper makes it.
 * Where the kernel lacks it (before Linux 5.9) it fails with ENOSYS, and
 * CPython closes the descriptors one by one. */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

int close_range(unsigned int first, unsigned int last, int flags) {
  return (int)syscall(SYS_close_range, first, last, flags);
}
