// The CPU's per-row loops that are worth vectorising, each compiled for AVX-512, AVX2 and any
// x86-64 (TARNN_CPU_VARIANTS) and chosen at run time: every variant gives the same bits.
#include <immintrin.h>

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

// The attention of every row and of heads [h0, h1) of one layer: phi of the row's q and k (A wide
// each) first, then linear_attention_update per head. one_state: the rows are consecutive
// positions of ONE image (model/prefill.h), walked in row order through one state; else each row is
// an image with its own. Heads are independent: any split of them gives the same bits. kAvx512:
// phi 16 lanes at a time (phi_avx512), else element by element.
template <bool kAvx512>
__attribute__((always_inline)) inline void
attention_body(const float *qkv, float *state, float *att, int rows, int layer, int n_layers,
               int n_heads, int d, bool one_state, int h0, int h1) {
  const int A = n_heads * d;
  float fq[kMaxHeadDim], fk[kMaxHeadDim]; // phi of one head's q and k: no allocation per step
  for (int r = 0; r < rows; ++r) {
    const float *q = qkv + size_t(r) * 3 * A; // [q | k | v], A wide each
    for (int h = h0; h < h1; ++h) {
      if constexpr (kAvx512) {
        phi_avx512(q + h * d, fq, d);
        phi_avx512(q + A + h * d, fk, d);
      } else {
        for (int i = 0; i < d; ++i) {
          fq[i] = phi(q[h * d + i]);
          fk[i] = phi(q[A + h * d + i]);
        }
      }
      float *S = state + state_block_offset(one_state ? 0 : r, layer, h, n_layers, n_heads, d);
      if (!one_state && r + 1 < rows) { // the next image's block of this head, while this one runs
        const char *next = reinterpret_cast<const char *>(
            state + state_block_offset(r + 1, layer, h, n_layers, n_heads, d));
        for (size_t at = 0; at < (size_t(d) + 1) * d * sizeof(float); at += 64)
          __builtin_prefetch(next + at, /*write*/ 1, /*keep*/ 3);
      }
      float *out = att + size_t(r) * A + h * d;
      if (d == 32) // the paper's d_head: unrolled, the same bits
        linear_attention_update<32>(fq, fk, q + 2 * A + h * d, S, S + 32 * 32, out, d);
      else
        linear_attention_update(fq, fk, q + 2 * A + h * d, S, S + size_t(d) * d, out, d);
    }
  }
}

void attention_portable(const float *qkv, float *state, float *att, int rows, int layer,
                        int n_layers, int n_heads, int d, bool one_state, int h0, int h1) {
  attention_body<false>(qkv, state, att, rows, layer, n_layers, n_heads, d, one_state, h0, h1);
}
__attribute__((target("avx2,fma"))) void attention_avx2(const float *qkv, float *state, float *att,
                                                        int rows, int layer, int n_layers,
                                                        int n_heads, int d, bool one_state, int h0,
                                                        int h1) {
  attention_body<false>(qkv, state, att, rows, layer, n_layers, n_heads, d, one_state, h0, h1);
}
__attribute__((target("avx512f"))) void attention_avx512(const float *qkv, float *state, float *att,
                                                         int rows, int layer, int n_layers,
                                                         int n_heads, int d, bool one_state, int h0,
                                                         int h1) {
  attention_body<true>(qkv, state, att, rows, layer, n_layers, n_heads, d, one_state, h0, h1);
}

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

void linear_attention_rows(const float *qkv, float *state, float *att, int rows, int layer,
                           const Config &c) {
  static const auto run = cpu_pick(&attention_avx512, &attention_avx2, &attention_portable);
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, c.d_head, false, 0, c.n_heads);
}

void linear_attention_positions(const float *qkv, float *state, float *att, int rows, int layer,
                                const Config &c, int h0, int h1) {
  static const auto run = cpu_pick(&attention_avx512, &attention_avx2, &attention_portable);
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, c.d_head, true, h0, h1);
}

// A prefill's ops split their work over the team where there is enough of it: the GEMMs and
// LayerNorms by rows (at least 16 a thread), the attention walk by heads (each head's state is its
// own). Every row and head is computed as on one thread: the same bits for any team.
template <class F> void PrefillOps::split(int items, int least, F &&f) {
  const int n = team_ ? std::min(team_->size(), items / least) : 1;
  if (n <= 1)
    return f(0, items);
  team_->run([&](int i) { f(items * i / n, items * (i + 1) / n); });
}

void PrefillOps::linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) {
  split(rows, 16, [&](int first, int last) {
    k_.linear(l, x + size_t(first) * l.in, y + size_t(first) * l.out, last - first, act);
  });
}

void PrefillOps::attention(int layer, int rows) {
  split(c_.n_heads, 1, [&](int h0, int h1) {
    linear_attention_positions(b_.qkv, b_.state, b_.att, rows, layer, c_, h0, h1);
  });
}

void PrefillOps::add_norm(float *x, const float *y, NormView n, int rows) { // y null: no residual
  split(rows, 16, [&](int first, int last) {
    const size_t at = size_t(first) * c_.d_model;
    k_.add_norm(x + at, y ? y + at : nullptr, n.w, n.b, last - first, c_.d_model);
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
      return linear_forward_bf16_ref(l.w_ref, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
    return linear_forward_bf16(*static_cast<const PackedLinearBf16 *>(l.w), x, l.in, rows, y, l.out,
                               act);
  case Precision::Tf32:
    break;
  }
  throw Error(std::string("the CPU has no ") + name(l.precision) + " GEMM");
}

} // namespace tarnn
