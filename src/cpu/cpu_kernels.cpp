// The CPU's per-row loops that are worth vectorising, each compiled for AVX-512, AVX2 and any
// x86-64 (TARNN_CPU_VARIANTS) and chosen at run time: every variant gives the same bits.
#include <immintrin.h>
#include <vector>

#include "../../kernels/cpu_features.h"
#include "../../kernels/linear_attention.h"
#include "../../kernels/residual_layernorm.h"
#include "cpu_ops.h"
#include "tarnn/error.h"
#include "threads.h"

namespace tarnn {

namespace {

// GCC 12's intrinsics headers start some casts from _mm512_undefined_*: a false positive
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// phi of 16 floats with AVX-512: expf_exact's arithmetic (tarnn_math.h), 8 doubles at a time, so
// the same bits as the scalar phi; the table of 2^(i/32) read by two-source permutes.
__attribute__((target("avx512f"))) inline __m512d exp_exact_pd(__m512d xd) {
  constexpr double N = 32;
  const __m512d inv_ln2_n = _mm512_set1_pd(0x1.71547652b82fep+0 * N);
  const __m512d shift = _mm512_set1_pd(0x1.8p+52);
  const __m512i *table = reinterpret_cast<const __m512i *>(kExp2Table);
  const __m512d z = _mm512_mul_pd(inv_ln2_n, xd);
  const __m512d kd_shifted = _mm512_add_pd(z, shift);
  const __m512i ki = _mm512_castpd_si512(kd_shifted);
  const __m512d kd = _mm512_sub_pd(kd_shifted, shift);
  const __m512d r = _mm512_fmsub_pd(inv_ln2_n, xd, kd);
  const __m512i i = _mm512_and_si512(ki, _mm512_set1_epi64(31));
  const __m512i t0 =
      _mm512_permutex2var_epi64(_mm512_loadu_si512(table), i, _mm512_loadu_si512(table + 1));
  const __m512i t1 =
      _mm512_permutex2var_epi64(_mm512_loadu_si512(table + 2), i, _mm512_loadu_si512(table + 3));
  const __m512i t =
      _mm512_mask_blend_epi64(_mm512_test_epi64_mask(i, _mm512_set1_epi64(16)), t0, t1);
  const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-5 / N / N / N);
  const __m512d c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-3 / N / N);
  const __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-1 / N);
  const __m512d p =
      _mm512_fmadd_pd(_mm512_fmadd_pd(c0, r, c1), r2, _mm512_fmadd_pd(c2, r, _mm512_set1_pd(1.0)));
  return _mm512_mul_pd(p, s);
}

__attribute__((target("avx512f"))) inline void phi_avx512(const float *u, float *out, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(u + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    const __m512d hi =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    const __m256 elo = _mm512_cvtpd_ps(exp_exact_pd(lo)), ehi = _mm512_cvtpd_ps(exp_exact_pd(hi));
    __m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(elo)),
                                                   _mm256_castps_pd(ehi), 1));
    const __m512 zero = _mm512_setzero_ps();
    e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-0x1.9fe368p6f), _CMP_LT_OQ), e,
                             zero);
    const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ), e,
                                          _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    _mm512_storeu_ps(out + i, y);
  }
  for (; i < n; ++i)
    out[i] = phi(u[i]);
}
#pragma GCC diagnostic pop

#pragma GCC diagnostic push // as above
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The first n / 16 * 16 elements of S widened (times 2^e), 16 at a time; returns how many.
template <StateFormat F>
__attribute__((target("avx512f"))) inline int widen_avx512(const void *S, float *s, int n, int e) {
  const auto *h = static_cast<const __m256i *>(S);
  const __m512 scale = _mm512_set1_ps(pow2f(e));
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x = _mm256_loadu_si256(h + i / 16);
    if constexpr (F == StateFormat::Fp16)
      _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_cvtph_ps(x), scale));
    else if constexpr (F == StateFormat::Bf16)
      _mm512_storeu_ps(s + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16)));
    else
      static_assert(F == StateFormat::Fp16, "a stored format without its AVX-512 widening");
  }
  return i;
}

// The first n / 16 * 16 elements rounded into the storage (times 2^-e); returns how many.
template <StateFormat F>
__attribute__((target("avx512f"))) inline int narrow_avx512(const float *s, void *S, int n, int e) {
  auto *h = static_cast<__m256i *>(S);
  const __m512 scale = _mm512_set1_ps(pow2f(-e));
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(s + i);
    __m256i y;
    if constexpr (F == StateFormat::Fp16) {
      y = _mm512_cvtps_ph(_mm512_mul_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else if constexpr (F == StateFormat::Bf16) { // bf16_bits, lane by lane
      const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(
          _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
      const __mmask16 tiny = // zero or subnormal
          _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
      __m512i r = _mm512_srli_epi32(
          _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                               _mm512_and_si512(hi, _mm512_set1_epi32(1)))),
          16);
      r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
      r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(hi, _mm512_set1_epi32(0x8000)));
      y = _mm512_cvtepi32_epi16(r);
    } else {
      static_assert(F == StateFormat::Fp16, "a stored format without its AVX-512 rounding");
    }
    _mm256_storeu_si256(h + i / 16, y);
  }
  return i;
}

#pragma GCC diagnostic pop

// S of one block widened into `s` (n floats), and `s` rounded back into the storage, with
// exponent e: format F's load and store around an fp32 update (kernels/state_format.h). kAvx512:
// 16 at a time with vcvtph2ps and vcvtps2ph (fp16), shifts and the integer form of bf16_bits
// (bf16); the same bits as the scalar load_state and store_state (tests/cpu/test_state.cpp).
template <bool kAvx512, StateFormat F>
__attribute__((always_inline)) inline void widen_state(const void *S, float *s, int n, int e) {
  int i = 0;
  if constexpr (kAvx512 && !kStoredAsFloat<F>)
    i = widen_avx512<F>(S, s, n, e);
  for (; i < n; ++i)
    s[i] = load_state<F>(S, size_t(i), e);
}

template <bool kAvx512, StateFormat F>
__attribute__((always_inline)) inline void narrow_state(const float *s, void *S, int n, int e) {
  int i = 0;
  if constexpr (kAvx512 && !kStoredAsFloat<F>)
    i = narrow_avx512<F>(s, S, n, e);
  for (; i < n; ++i)
    store_state<F>(S, size_t(i), s[i], e);
}

// linear_attention_update<32> on S stored in fp16 (times 2^-e_in), rounded back with e_out, fused:
// each row of S (32 halves, two vectors) widened, updated, read into the numerators and rounded
// in registers. The same operations in the same order as the scalar update on a widened copy
// (no fused multiply-adds, the products rounded before the sums), so the same bits; but S is read
// and written once, 2 KB, instead of through a 4 KB scratch block (the scratch path was no faster
// than the fp32 state: tools/bench/runs/state).
#pragma GCC diagnostic push // as above
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The lanes of x that are 0 or within 2^-50 <= |x| <= 2^50 (not NaN, not infinite): an integer
// compare of the magnitude's bits.
__attribute__((target("avx512f"))) inline __mmask16 moderate(__m512 x) {
  const __m512i a = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  const __m512i lo = _mm512_set1_epi32((127 - 50) << 23), span = _mm512_set1_epi32(100 << 23);
  return _mm512_cmpeq_epi32_mask(a, _mm512_setzero_si512()) |
         _mm512_cmple_epu32_mask(_mm512_sub_epi32(a, lo), span);
}

// Whether the update may run on S as stored, scaled by 2^-e: with phi(k) times 2^-e and phi(q)
// times 2^e (exact), each product phi(k)_i v_j is the plain one times 2^-e, each sum S_ij +
// phi(k)_i v_j too (the exact sum is scaled; where the scaled one is below the normal range it
// is a multiple of 2^-149, held exactly), and phi(q)_i S_ij is the plain product itself: the same
// bits, without widening S times 2^e and narrowing it times 2^-e (four of the eight products a
// row). It holds where the exponent stays (every position but the 10 where it grows) and every
// value of phi(q), phi(k) and v is 0 or within 2^-50 .. 2^50, so that nothing scaled leaves the
// normal range; else the plain order runs.
__attribute__((target("avx512f"))) inline bool
scaled_update_exact(const float *fq, const float *fk, const float *v, int e_in, int e_out) {
  if (e_in != e_out)
    return false;
  __mmask16 ok = 0xffff;
  for (const float *x : {fq, fk, v})
    ok &= moderate(_mm512_loadu_ps(x)) & moderate(_mm512_loadu_ps(x + 16));
  return ok == 0xffff;
}

__attribute__((target("avx512f"))) void update_fp16_avx512(const float *fq, const float *fk,
                                                           const float *v, void *S16, float *z,
                                                           float *out, int e_in, int e_out) {
  auto *row = static_cast<__m256i *>(S16);
  // normaliser_cell for every i: z_i + phi(k)_i and phi(q)_i z_i lane by lane, then the products
  // summed in i's order, as the scalar loop does (off the loop over S's rows: no scalar work there)
  alignas(64) float p[32];
  for (int i = 0; i < 32; i += 16) {
    const __m512 zi = _mm512_add_ps(_mm512_loadu_ps(z + i), _mm512_loadu_ps(fk + i));
    _mm512_storeu_ps(z + i, zi);
    _mm512_store_ps(p + i, _mm512_mul_ps(_mm512_loadu_ps(fq + i), zi));
  }
  float den = 0.0f;
  for (int i = 0; i < 32; ++i)
    den = den + p[i];
  const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
  __m512 num0 = _mm512_setzero_ps(), num1 = _mm512_setzero_ps();
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  if (scaled_update_exact(fq, fk, v, e_in, e_out)) {
    alignas(64) float ks[32], qs[32]; // phi(k) times 2^-e, phi(q) times 2^e
    const __m512 up = _mm512_set1_ps(pow2f(e_in)), down = _mm512_set1_ps(pow2f(-e_in));
    for (int i = 0; i < 32; i += 16) {
      _mm512_store_ps(ks + i, _mm512_mul_ps(_mm512_loadu_ps(fk + i), down));
      _mm512_store_ps(qs + i, _mm512_mul_ps(_mm512_loadu_ps(fq + i), up));
    }
    for (int i = 0; i < 32; ++i) {
      const __m512 k = _mm512_set1_ps(ks[i]), qi = _mm512_set1_ps(qs[i]);
      const __m512 s0 =
          _mm512_add_ps(_mm512_cvtph_ps(_mm256_loadu_si256(row + 2 * i)), _mm512_mul_ps(k, v0));
      const __m512 s1 =
          _mm512_add_ps(_mm512_cvtph_ps(_mm256_loadu_si256(row + 2 * i + 1)), _mm512_mul_ps(k, v1));
      num0 = _mm512_add_ps(num0, _mm512_mul_ps(qi, s0));
      num1 = _mm512_add_ps(num1, _mm512_mul_ps(qi, s1));
      _mm256_storeu_si256(row + 2 * i, _mm512_cvtps_ph(s0, kRound));
      _mm256_storeu_si256(row + 2 * i + 1, _mm512_cvtps_ph(s1, kRound));
    }
  } else {
    const __m512 up = _mm512_set1_ps(pow2f(e_in)), down = _mm512_set1_ps(pow2f(-e_out));
    for (int i = 0; i < 32; ++i) {
      const __m512 k = _mm512_set1_ps(fk[i]), qi = _mm512_set1_ps(fq[i]);
      __m512 s0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(row + 2 * i)), up);
      __m512 s1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(row + 2 * i + 1)), up);
      s0 = _mm512_add_ps(s0, _mm512_mul_ps(k, v0)); // state_cell: S += phi(k)_i v_j
      s1 = _mm512_add_ps(s1, _mm512_mul_ps(k, v1));
      num0 = _mm512_add_ps(num0, _mm512_mul_ps(qi, s0)); // num_j += phi(q)_i S_ij
      num1 = _mm512_add_ps(num1, _mm512_mul_ps(qi, s1));
      _mm256_storeu_si256(row + 2 * i, _mm512_cvtps_ph(_mm512_mul_ps(s0, down), kRound));
      _mm256_storeu_si256(row + 2 * i + 1, _mm512_cvtps_ph(_mm512_mul_ps(s1, down), kRound));
    }
  }
  const __m512 d = _mm512_set1_ps(den + kAttentionEps); // attention_out
  _mm512_storeu_ps(out, _mm512_div_ps(num0, d));
  _mm512_storeu_ps(out + 16, _mm512_div_ps(num1, d));
}
#pragma GCC diagnostic pop

// phi of one head's q and k (d wide each) into fq and fk (m.features wide): elu + 1 16 lanes at a
// time where kAvx512, else element by element, or the random-feature maps' projections.
template <bool kAvx512>
__attribute__((always_inline)) inline void phi_head(const PhiMap &m, const float *q, const float *k,
                                                    float *fq, float *fk) {
  const int d = m.d;
  if (kAvx512 && m.kind == FeatureMapKind::EluPlusOne) {
    phi_avx512(q, fq, d);
    phi_avx512(k, fk, d);
  } else if (m.elementwise) {
    for (int i = 0; i < d; ++i) {
      fq[i] = phi_elementwise(m.kind, q[i]);
      fk[i] = phi_elementwise(m.kind, k[i]);
    }
  } else {
    phi_features(m, q, fq);
    phi_features(m, k, fk);
  }
}

// One head at `position` with the state's write deferred over chunks of C (SPEC, "The state in
// chunks"; linear_attention.h: chunked_update): S as stored at the chunk's start widened into
// `wide`, the chunk's terms added, and S rounded back only at the chunk's last position.
template <bool kAvx512, StateFormat F>
__attribute__((always_inline)) inline void
chunked_head(const float *pq, const float *pk, const float *v, char *at, float *z, float *wide,
             float *out, int d, int n, int position, int chunk) {
  const int i = position % chunk, last = i == chunk - 1;
  widen_state<kAvx512, F>(at, wide, n * d, stored_scale_exponent<F>(position - 1, chunk));
  chunked_update<F>(pq, pk, v, wide, z, z + n, wide + size_t(n) * d, out, d, n, i, last);
  if (last)
    narrow_state<kAvx512, F>(wide, at, n * d, state_scale_exponent<F>(position));
}

// The attention of every row and of heads [h0, h1) of one layer: phi of the row's q and k (A wide
// each; m: the layer's feature map, n = m.features wide) first, then linear_attention_update per
// head, on S (n x d) as it is stored (fp32) or widened into a scratch block and rounded back
// (16-bit formats: the update and the read-out in fp32, one rounding per cell and position, as
// every backend). one_state: the rows are consecutive positions t, t + 1, ... of ONE image
// (model/prefill.h), walked in row order through one state; else each row is an image with its
// own, at position t. Heads are independent: any split of them gives the same bits. kAvx512: elu
// + 1 and the state's conversions 16 lanes at a time, else element by element.
template <bool kAvx512, StateFormat F>
__attribute__((always_inline)) inline void
attention_body(const float *qkv, void *state, float *att, int rows, int layer, int n_layers,
               int n_heads, const PhiMap &m, int t, int chunk, bool one_state, int h0, int h1) {
  const int d = m.d, n = m.features, A = n_heads * d;
  const size_t block = state_block_bytes(n, d, F, chunk), s_bytes = state_s_bytes(n, d, F);
  float fq[kMaxFeatures], fk[kMaxFeatures]; // phi of one head's q and k: no allocation per step
  thread_local std::vector<float> wide;     // a 16-bit block's S in fp32 (and a chunk's buffer)
  if (!kStoredAsFloat<F> || chunk > 1)      // a chunk keeps S as stored until its last position
    wide.resize(size_t(n) * d + size_t(chunk - 1) * (size_t(n) + size_t(d)));
  const bool whole_row = kAvx512 && m.kind == FeatureMapKind::EluPlusOne && h0 == 0 &&
                         h1 == n_heads && 2 * A <= kMaxFeatures;
  for (int r = 0; r < rows; ++r) {
    const float *q = qkv + size_t(r) * 3 * A; // [q | k | v], A wide each
    const int position = one_state ? t + r : t;
    if (whole_row) // phi of the row's q and k at once, as one loop
      phi_avx512(q, fq, 2 * A);
    for (int h = h0; h < h1; ++h) {
      const float *pq = fq, *pk = fk; // phi of this head's q and k
      if (whole_row)
        pq = fq + h * d, pk = fq + A + h * d;
      else
        phi_head<kAvx512>(m, q + h * d, q + A + h * d, fq, fk);
      char *at = static_cast<char *>(state) +
                 state_block_offset(one_state ? 0 : r, layer, h, n_layers, n_heads, n, d, F, chunk);
      if (!one_state && r + 1 < rows) { // the next image's block of this head, while this one runs
        const char *next = static_cast<const char *>(state) +
                           state_block_offset(r + 1, layer, h, n_layers, n_heads, n, d, F, chunk);
        for (size_t b = 0; b < block; b += 64)
          __builtin_prefetch(next + b, /*write*/ 1, /*keep*/ 3);
      }
      float *z = reinterpret_cast<float *>(at + s_bytes);
      if (chunk > 1) { // the write deferred (linear_attention.h: chunked_update), S widened
        chunked_head<kAvx512, F>(pq, pk, q + 2 * A + h * d, at, z, wide.data(),
                                 att + size_t(r) * A + h * d, d, n, position, chunk);
        continue;
      }
      const bool square32 = d == 32 && n == 32; // the paper's d_head, S square
      if constexpr (kAvx512 && F == StateFormat::Fp16)
        if (square32) { // S converted row by row in registers, no scratch
          update_fp16_avx512(pq, pk, q + 2 * A + h * d, at, z, att + size_t(r) * A + h * d,
                             state_scale_exponent<F>(position - 1),
                             state_scale_exponent<F>(position));
          continue;
        }
      float *S = kStoredAsFloat<F> ? reinterpret_cast<float *>(at) : wide.data();
      if constexpr (!kStoredAsFloat<F>)
        widen_state<kAvx512, F>(at, S, n * d, state_scale_exponent<F>(position - 1));
      float *out = att + size_t(r) * A + h * d;
      if (square32) // unrolled, the same bits
        linear_attention_update<32>(pq, pk, q + 2 * A + h * d, S, z, out, d);
      else
        linear_attention_update(pq, pk, q + 2 * A + h * d, S, z, out, d, n);
      if constexpr (!kStoredAsFloat<F>)
        narrow_state<kAvx512, F>(S, at, n * d, state_scale_exponent<F>(position));
    }
  }
}

// The runtime format f as the template argument F of attention_body, widen_state, narrow_state.
// The lambdas are always inlined, as the bodies: into each variant, in its instruction set.
template <bool kAvx512>
__attribute__((always_inline)) inline void
attention_any(const float *qkv, void *state, float *att, int rows, int layer, int n_layers,
              int n_heads, const PhiMap &m, StateFormat f, int t, int chunk, bool one_state, int h0,
              int h1) {
  dispatch(
      f, [&](auto F) __attribute__((always_inline)) {
        attention_body<kAvx512, F>(qkv, state, att, rows, layer, n_layers, n_heads, m, t, chunk,
                                   one_state, h0, h1);
      });
}

// from: n elements rounded into `to`; else n elements of `in` widened into `out`.
template <bool kAvx512>
__attribute__((always_inline)) inline void convert_any(const float *from, void *to, const void *in,
                                                       float *out, size_t n, StateFormat f, int e) {
  const int m = int(n);
  dispatch(
      f, [&](auto F) __attribute__((always_inline)) {
        return from ? narrow_state<kAvx512, F>(from, to, m, e)
                    : widen_state<kAvx512, F>(in, out, m, e);
      });
}

#define TARNN_ATTENTION_ARGS                                                                       \
  (const float *qkv, void *state, float *att, int rows, int layer, int n_layers, int n_heads,      \
   const PhiMap &m, StateFormat f, int t, int chunk, bool one_state, int h0, int h1)
#define TARNN_ATTENTION_CALL                                                                       \
  (qkv, state, att, rows, layer, n_layers, n_heads, m, f, t, chunk, one_state, h0, h1)
#define TARNN_CONVERT_ARGS                                                                         \
  (const float *from, void *to, const void *in, float *out, size_t n, StateFormat f, int e)
#define TARNN_CONVERT_CALL (from, to, in, out, n, f, e)
void attention_portable TARNN_ATTENTION_ARGS { attention_any<false> TARNN_ATTENTION_CALL; }
__attribute__((target("avx2,fma"))) void attention_avx2 TARNN_ATTENTION_ARGS {
  attention_any<false> TARNN_ATTENTION_CALL;
}
__attribute__((target("avx512f"))) void attention_avx512 TARNN_ATTENTION_ARGS {
  attention_any<true> TARNN_ATTENTION_CALL;
}
void convert_portable TARNN_CONVERT_ARGS { convert_any<false> TARNN_CONVERT_CALL; }
__attribute__((target("avx2,fma"))) void convert_avx2 TARNN_CONVERT_ARGS {
  convert_any<false> TARNN_CONVERT_CALL;
}
__attribute__((target("avx512f"))) void convert_avx512 TARNN_CONVERT_ARGS {
  convert_any<true> TARNN_CONVERT_CALL;
}
#undef TARNN_ATTENTION_ARGS
#undef TARNN_ATTENTION_CALL
#undef TARNN_CONVERT_ARGS
#undef TARNN_CONVERT_CALL

#pragma GCC diagnostic push // as above
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// 16 x 16 floats transposed in registers: t[i] = the i-th floats of rows r[0..15].
__attribute__((target("avx512f"))) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; ++j) { // r[i + e]: the e-th float of each 128-bit lane, rows i..i+3
      r[i + 2 * j] = _mm512_castpd_ps(
          _mm512_unpacklo_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
      r[i + 2 * j + 1] = _mm512_castpd_ps(
          _mm512_unpackhi_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
    }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}

// block[k] = element i + k of rows 0..15 of x ([16, n]).
__attribute__((target("avx512f"))) inline void load16(const float *x, int n, int i,
                                                      __m512 (&block)[16]) {
  for (int g = 0; g < 16; ++g)
    block[g] = _mm512_loadu_ps(x + size_t(g) * n + i);
  transpose16(block);
}

// layernorm_row over 16 rows of x ([16, n], n a multiple of 16), one row per lane: blocks of
// 16 x 16 transposed, so lane g adds row g's elements in layernorm_row's order (i ascending):
// the same bits, 16 sums at once instead of one chain of n dependent adds.
__attribute__((target("avx512f"))) void layernorm16_avx512(float *x, const float *w, const float *b,
                                                           int n) {
  __m512 mean = _mm512_setzero_ps(), var = _mm512_setzero_ps();
  __m512 block[16];

  for (int i = 0; i < n; i += 16) {
    load16(x, n, i, block);
    for (int k = 0; k < 16; ++k)
      mean = _mm512_add_ps(mean, block[k]);
  }
  mean = _mm512_div_ps(mean, _mm512_set1_ps(float(n)));
  for (int i = 0; i < n; i += 16) {
    load16(x, n, i, block);
    for (int k = 0; k < 16; ++k) {
      const __m512 c = _mm512_sub_ps(block[k], mean);
      var = _mm512_add_ps(var, _mm512_mul_ps(c, c));
    }
  }
  var = _mm512_div_ps(var, _mm512_set1_ps(float(n)));
  const __m512 rstd = _mm512_div_ps(
      _mm512_set1_ps(1.0f), _mm512_sqrt_ps(_mm512_add_ps(var, _mm512_set1_ps(kLayerNormEps))));
  alignas(64) float m[16], rs[16];
  _mm512_store_ps(m, mean);
  _mm512_store_ps(rs, rstd);
  for (int g = 0; g < 16; ++g) { // (x - mean) * rstd * w + b, rounded step by step as the row's
    const __m512 mg = _mm512_set1_ps(m[g]), rg = _mm512_set1_ps(rs[g]);
    float *xr = x + size_t(g) * n;
    for (int i = 0; i < n; i += 16) {
      const __m512 u = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + i), mg), rg);
      _mm512_storeu_ps(
          xr + i, _mm512_add_ps(_mm512_mul_ps(u, _mm512_loadu_ps(w + i)), _mm512_loadu_ps(b + i)));
    }
  }
}

#pragma GCC diagnostic pop

void layernorm_rows_portable(float *x, const float *y, const float *w, const float *b, int rows,
                             int n) {
  residual_layernorm_cpu(x, y, w, b, rows, n);
}
__attribute__((target("avx2,fma"))) void
layernorm_rows_avx2(float *x, const float *y, const float *w, const float *b, int rows, int n) {
  residual_layernorm_cpu(x, y, w, b, rows, n);
}
__attribute__((target("avx512f"))) void
layernorm_rows_avx512(float *x, const float *y, const float *w, const float *b, int rows, int n) {
  int r = 0;
  if (n % 16 == 0)
    for (; r + 16 <= rows; r += 16) {
      float *xr = x + size_t(r) * n;
      add_residual(xr, y ? y + size_t(r) * n : nullptr, size_t(16) * n);
      layernorm16_avx512(xr, w, b, n);
    }
  residual_layernorm_cpu(x + size_t(r) * n, y ? y + size_t(r) * n : nullptr, w, b, rows - r, n);
}

} // namespace

void narrow_state_rows(const float *s, void *S, size_t n, StateFormat f, int e) {
  static const auto run = cpu_pick(&convert_avx512, &convert_avx2, &convert_portable);
  run(s, S, nullptr, nullptr, n, f, e);
}

void widen_state_rows(const void *S, float *s, size_t n, StateFormat f, int e) {
  static const auto run = cpu_pick(&convert_avx512, &convert_avx2, &convert_portable);
  run(nullptr, nullptr, S, s, n, f, e);
}

void linear_attention_rows(const float *qkv, void *state, StateFormat f, int t, float *att,
                           int rows, int layer, const Config &c, const PhiMap &m, int chunk) {
  static const auto run = cpu_pick(&attention_avx512, &attention_avx2, &attention_portable);
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, m, f, t, chunk, false, 0, c.n_heads);
}

void linear_attention_positions(const float *qkv, void *state, StateFormat f, int t, float *att,
                                int rows, int layer, const Config &c, const PhiMap &m, int h0,
                                int h1, int chunk) {
  static const auto run = cpu_pick(&attention_avx512, &attention_avx2, &attention_portable);
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, m, f, t, chunk, true, h0, h1);
}

// A prefill's ops split their work over the team where there is enough of it: the GEMMs and
// LayerNorms by rows (at least 16 a thread), the attention walk by heads (each head's state is its
// own). Every row and head is computed as on one thread: the same bits for any team. The slices
// may be fewer than the team's threads (39 rows make 2 slices of 16, 3 heads 3): the team is given
// n tasks, and a thread without one does nothing.
template <class F> void PrefillOps::split(int items, int least, F &&f) {
  const int n = team_ ? std::min(team_->size(), items / least) : 1;
  if (n <= 1)
    return f(0, items);
  team_->run(n, [&](int i) { f(items * i / n, items * (i + 1) / n); });
}

void PrefillOps::linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) {
  split(rows, 16, [&](int first, int last) {
    k_.linear(l, x + size_t(first) * l.in, y + size_t(first) * l.out, last - first, act);
  });
}

void PrefillOps::attention(int layer, int rows) {
  split(c_.n_heads, 1, [&](int h0, int h1) {
    linear_attention_positions(b_.qkv, b_.state, b_.state_format, b_.params->t, b_.att, rows, layer,
                               c_, phi_map(c_, w_.layers[size_t(layer)].omega), h0, h1,
                               b_.state_chunk);
  });
}

void PrefillOps::add_norm(float *x, const float *y, NormView n, int rows,
                          const NormView *then) { // y null: no residual
  split(rows, 16, [&](int first, int last) {
    const size_t at = size_t(first) * c_.d_model;
    k_.add_norm(x + at, y ? y + at : nullptr, n.w, n.b, last - first, c_.d_model);
    if (then)
      k_.add_norm(x + at, nullptr, then->w, then->b, last - first, c_.d_model);
  });
}

void CpuKernels::add_norm(float *x, const float *y, const float *w, const float *b, int rows,
                          int n) const {
  static const auto run =
      cpu_pick(&layernorm_rows_avx512, &layernorm_rows_avx2, &layernorm_rows_portable);
  run(x, y, w, b, rows, n);
}

void CpuKernels::linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) const {
  switch (l.precision) {
  case Precision::Fp32:
    if (reference)
      return linear_forward_ref(l.w_ref, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
    return linear_forward(*static_cast<const PackedLinear *>(l.w), x, l.in, rows, y, l.out, act);
  case Precision::Bf16:
    if (reference)
      linear_forward_bf16_ref(l.w_ref, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
    else
      linear_forward_bf16(*static_cast<const PackedLinearBf16 *>(l.w), x, l.in, rows, y, l.out,
                          act);
    if (l.bf16_output) // stored in bf16 on the GPU (forward.h: mark_bf16_outputs)
      round_to_bf16(y, size_t(rows) * size_t(l.out));
    return;
  case Precision::Int8:
    if (reference)
      return linear_forward_int8_ref(l.w_ref, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
    return linear_forward_int8(*static_cast<const PackedLinearInt8 *>(l.w), x, l.in, rows, y, l.out,
                               act);
  case Precision::Tf32:
    break;
  }
  throw Error(std::string("the CPU has no ") + name(l.precision) + " GEMM");
}

} // namespace tarnn
