/* LD_PRELOAD shim for tests/cli/reliability_test.sh: failures that cannot be provoked from
 * outside a process.
 *   TARNN_FAIL_THREAD=N       the Nth and later pthread_create fail with EAGAIN
 *   TARNN_FAIL_ALLOC_OVER=B   malloc of more than B bytes returns NULL (operator new throws)
 *   TARNN_CHANGE_FILE=PATH    the file changes while it is read: the first read, pread or mmap of
 *   TARNN_CHANGE_TO=OTHER     PATH (or of TARNN_CHANGE_WHEN, where set) gets half the bytes asked
 *                             for (mmap: the whole mapping), then PATH is written over with
 *                             OTHER's bytes in place, as cp does, and its time set a second on (as
 *                             a later write's would be on any clock) */
/* Not fortified, whatever the compiler's default (Ubuntu's gcc defines _FORTIFY_SOURCE=3 when
 * optimising): glibc's fortified unistd.h makes pread64 an always-inline wrapper that calls pread,
 * and the shim's own pread and pread64 below then do not compile ("inlining failed in call to
 * 'always_inline' 'pread.localalias'": the build on the GPU machine, 2026-11-25). The shim checks
 * no buffers of its own; tests/CMakeLists.txt compiles it fortified, so this is tested. */
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);

static long env_long(const char *name) {
  const char *v = getenv(name);
  return v ? atol(v) : 0;
}

void *malloc(size_t n) {
  static long over = -1;
  if (over < 0)
    over = env_long("TARNN_FAIL_ALLOC_OVER");
  if (over > 0 && n > (size_t)over) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_malloc(n);
}

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg) {
  static atomic_long calls;
  typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  static create_fn real;
  if (!real)
    real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  const long fail_from = env_long("TARNN_FAIL_THREAD");
  if (fail_from > 0 && ++calls >= fail_from)
    return EAGAIN;
  return real(t, a, f, arg);
}

/* Whether fd is open on the file whose read changes TARNN_CHANGE_FILE, not changed yet (once). */
static int change_due(int fd) {
  static atomic_int done;
  const char *path = getenv("TARNN_CHANGE_WHEN");
  if (!path)
    path = getenv("TARNN_CHANGE_FILE");
  struct stat a, b;
  if (!path || atomic_load(&done) || fd < 0 || fstat(fd, &a) != 0 || stat(path, &b) != 0 ||
      a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return 0;
  return !atomic_exchange(&done, 1);
}

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static void change_file(void) {
  static read_fn real_read;
  if (!real_read)
    real_read = (read_fn)dlsym(RTLD_NEXT, "read");
  const char *path = getenv("TARNN_CHANGE_FILE"), *other = getenv("TARNN_CHANGE_TO");
  struct stat st;
  const int in = other ? open(other, O_RDONLY) : -1, out = open(path, O_WRONLY | O_TRUNC);
  if (in < 0 || out < 0 || fstat(out, &st) != 0)
    abort();
  char buf[65536];
  for (ssize_t n; (n = real_read(in, buf, sizeof buf)) > 0;)
    if (write(out, buf, (size_t)n) != n)
      abort();
  const struct timespec times[2] = {{0, UTIME_OMIT}, {st.st_mtim.tv_sec + 1, 0}};
  if (futimens(out, times) != 0)
    abort();
  close(in);
  close(out);
}

ssize_t read(int fd, void *buf, size_t n) {
  static read_fn real;
  if (!real)
    real = (read_fn)dlsym(RTLD_NEXT, "read");
  if (!change_due(fd))
    return real(fd, buf, n);
  const ssize_t r = real(fd, buf, n > 1 ? n / 2 : n);
  change_file();
  return r;
}

static ssize_t changing_pread(int fd, void *buf, size_t n, off_t at) {
  static pread_fn real;
  if (!real)
    real = (pread_fn)dlsym(RTLD_NEXT, "pread");
  if (!change_due(fd))
    return real(fd, buf, n, at);
  const ssize_t r = real(fd, buf, n > 1 ? n / 2 : n, at);
  change_file();
  return r;
}

ssize_t pread(int fd, void *buf, size_t n, off_t at) { return changing_pread(fd, buf, n, at); }
ssize_t pread64(int fd, void *buf, size_t n, off_t at) { return changing_pread(fd, buf, n, at); }

static void *changing_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t at) {
  static mmap_fn real;
  if (!real)
    real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
  void *p = real(addr, len, prot, flags, fd, at);
  if (p != MAP_FAILED && change_due(fd))
    change_file();
  return p;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t at) {
  return changing_mmap(addr, len, prot, flags, fd, at);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t at) {
  return changing_mmap(addr, len, prot, flags, fd, at);
}
