/* LD_PRELOAD shim for tests/cli/reliability_test.sh: failures that cannot be provoked from
 * outside a process.
 *   TARNN_FAIL_THREAD=N       the Nth and later pthread_create fail with EAGAIN
 *   TARNN_FAIL_ALLOC_OVER=B   malloc of more than B bytes returns NULL (operator new throws) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

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
