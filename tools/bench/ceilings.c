// This machine's ceilings for the precision figures (docs/PRECISION.md): one core's peak of
// fp32 FMA (vfmadd, 16 lanes) against bf16 dot products (vdpbf16ps, 16 lanes x 2 pairs) and int8
// ones (vpdpbusd, 16 lanes x 4 byte products; 2 operations a product, as FLOPs count), and the
// read-modify-write bandwidth of a state the size of a 256-image MNIST batch's (67 MB), as the
// attention streams it. Build and run:
//   gcc -O2 -march=native -pthread -o /tmp/ceilings tools/bench/ceilings.c && /tmp/ceilings
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { kChains = 12 }; // independent accumulators: enough to cover the latency of either
static const long kOps = 200000000;

static void peaks(void) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; i++)
    a[i] = _mm512_set1_ps(i * 0.001f);
  const __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(0.0001f); // a stays near 1
  double t = now();
  for (long n = 0; n < kOps / kChains; n++)
#pragma GCC unroll 12 // the accumulators in registers
    for (int i = 0; i < kChains; i++)
      a[i] = _mm512_fmadd_ps(a[i], x, y);
  double s = now() - t, sink = 0;
  for (int i = 0; i < kChains; i++)
    sink += _mm512_reduce_add_ps(a[i]);
  printf("fp32 FMA:  %.1f GFLOP/s one core\n", kOps * 32.0 / s / 1e9);
  const __m512bh bx = (__m512bh)_mm512_set1_epi16(0x3f80), by = (__m512bh)_mm512_set1_epi16(0x3f00);
  for (int i = 0; i < kChains; i++)
    a[i] = _mm512_setzero_ps();
  t = now();
  for (long n = 0; n < kOps / kChains; n++)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; i++)
      a[i] = _mm512_dpbf16_ps(a[i], bx, by);
  s = now() - t;
  for (int i = 0; i < kChains; i++)
    sink += _mm512_reduce_add_ps(a[i]);
  printf("bf16 dot:  %.1f GFLOP/s one core (checksum %g)\n", kOps * 64.0 / s / 1e9, sink);
  // int8: vpdpbusd, 16 lanes x 4 byte products, as the instruction itself (GCC 12 compiles its
  // intrinsic with a copy of the accumulator each time), 12 accumulators in named registers
  const __m512i ux = _mm512_set1_epi8(3), sy = _mm512_set1_epi8(-2);
  __m512i c0 = _mm512_set1_epi32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
#define DP(c) __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(ux), "v"(sy))
  t = now();
  for (long n = 0; n < kOps / kChains; n++) {
    DP(c0); DP(c1); DP(c2); DP(c3); DP(c4); DP(c5);
    DP(c6); DP(c7); DP(c8); DP(c9); DP(c10); DP(c11);
  }
  s = now() - t;
  const __m512i c = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)),
                       _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11))));
  const long isink = _mm512_reduce_add_epi32(c);
  printf("int8 dot:  %.1f GOP/s one core (checksum %ld)\n", kOps * 128.0 / s / 1e9, isink);
}

enum { kThreads = 2 };
static const long kFloats = 256L * 270336 / 4; // 256 images' S and z
static float *state;

static void *touch(void *arg) { // read, scale, write back: the attention's traffic
  const long i0 = (long)arg * kFloats / kThreads, i1 = i0 + kFloats / kThreads;
  const __m512 k = _mm512_set1_ps(1.0001f); // not 1: a store of what was loaded may be elided
  for (long i = i0; i < i1; i += 16)
    _mm512_store_ps(state + i, _mm512_mul_ps(_mm512_load_ps(state + i), k));
  return NULL;
}

int main(void) {
  peaks();
  state = aligned_alloc(64, kFloats * 4);
  for (long i = 0; i < kFloats; i++)
    state[i] = 1.0f;
  for (int rep = 0; rep < 7; rep++) {
    pthread_t th[kThreads];
    const double t = now();
    for (long k = 0; k < kThreads; k++)
      pthread_create(&th[k], NULL, touch, (void *)k);
    for (int k = 0; k < kThreads; k++)
      pthread_join(th[k], NULL);
    const double s = now() - t;
    printf("state %.1f MB read and written, %d threads: %.2f ms (%.1f GB/s)\n", kFloats * 4 / 1e6,
           kThreads, s * 1e3, 2.0 * kFloats * 4 / s / 1e9);
  }
  free(state);
  return 0;
}
