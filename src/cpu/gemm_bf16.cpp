#include "gemm_bf16.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <utility>

#include "../../kernels/cpu_features.h"
#include "../../kernels/gemm_ref.h"
#include "gemm_tiles.h"

namespace tarnn {

bool cpu_has_avx512_bf16() {
  static const bool yes = cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
  return yes;
}

namespace {

using gemm::kRows;
using gemm::store_tile;
constexpr int P = PackedLinearBf16::kPanel;
static_assert(P == gemm::kPanel);

// panel: [pairs][32] 32-bit (w_k | w_k+1 << 16); x2: rows of [pairs] the same for x.
template <int R>
__attribute__((target("avx512f,avx512bf16"))) void
tile_avx512_bf16(const uint32_t *panel, int pairs, const uint32_t *x2, int ld2, const float *b,
                 int ncols, float *y, int ldy, Act act) {
  __m512 c0[R], c1[R];
  for (int r = 0; r < R; ++r)
    c0[r] = c1[r] = _mm512_setzero_ps();
  for (int k = 0; k < pairs; ++k) {
    const __m512i w0 = _mm512_loadu_si512(panel + k * P);
    const __m512i w1 = _mm512_loadu_si512(panel + k * P + 16);
    for (int r = 0; r < R; ++r) {
      const __m512i a = _mm512_set1_epi32(int(x2[r * ld2 + k]));
      c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)a, (__m512bh)w0);
      c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)a, (__m512bh)w1);
    }
  }
  gemm::store_tile_avx512<R>(c0, c1, b, ncols, y, ldy, act);
}

template <int R>
void tile_portable_bf16(const uint32_t *panel, int pairs, const uint32_t *x2, int ld2,
                        const float *b, int ncols, float *y, int ldy, Act act) {
  float acc[R][P] = {};
  for (int k = 0; k < pairs; ++k)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < P; ++j)
        acc[r][j] = bf16_pair_step(acc[r][j], x2[r * ld2 + k], panel[k * P + j]);
  store_tile<R>(acc, b, ncols, y, ldy, act);
}

using TileFn = void (*)(const uint32_t *, int, const uint32_t *, int, const float *, int, float *,
                        int, Act);

template <size_t... R> auto tiles(std::index_sequence<R...>) {
  if (cpu_has_avx512_bf16())
    return std::array<TileFn, sizeof...(R)>{{&tile_avx512_bf16<int(R) + 1>...}};
  return std::array<TileFn, sizeof...(R)>{{&tile_portable_bf16<int(R) + 1>...}};
}

// x2[r][k / 2] = bf16_pair(x[r], k, in) for every row: the rounding of a GEMM's input.
void round_rows_portable(const float *x, int ldx, int rows, int in, uint32_t *x2, int pairs) {
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < pairs; ++k)
      x2[size_t(r) * pairs + k] = bf16_pair(x + size_t(r) * ldx, 2 * k, in);
}

// The same with vcvtne2ps2bf16, 32 floats an instruction: bf16_bits' rule, so the same bits. What
// this (with the vector epilogue, LayerNorm 16 rows at a time and the state prefetched) did to
// `tarnn bench --precision bf16`: docs/RESULTS.md, "One command, run by run".
__attribute__((target("avx512f,avx512bf16"))) void
round_rows_avx512(const float *x, int ldx, int rows, int in, uint32_t *x2, int pairs) {
  for (int r = 0; r < rows; ++r) {
    const float *xr = x + size_t(r) * ldx;
    uint32_t *o = x2 + size_t(r) * pairs;
    for (int k = 0; k < in; k += 32) {
      const int left = std::min(32, in - k); // the tail: zeros past `in`, as pair_of
      const __mmask16 lo = __mmask16((1u << std::min(16, left)) - 1);
      const __mmask16 hi = __mmask16(left > 16 ? (1u << (left - 16)) - 1 : 0);
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, xr + k + 16),
                                             _mm512_maskz_loadu_ps(lo, xr + k));
      _mm512_mask_storeu_epi32(o + k / 2, __mmask16((1u << ((left + 1) / 2)) - 1), (__m512i)v);
    }
  }
}

} // namespace

void round_to_bf16_pairs(const float *x, int ldx, int rows, int in, uint32_t *x2) {
  static const auto run = cpu_has_avx512_bf16() ? &round_rows_avx512 : &round_rows_portable;
  run(x, ldx, rows, in, x2, (in + 1) / 2);
}

PackedLinearBf16 pack_bf16(const Linear &l) {
  PackedLinearBf16 p;
  p.out = l.out;
  p.in = l.in;
  p.b.resize(l.b.size());
  std::transform(l.b.begin(), l.b.end(), p.b.begin(), bf16_bias);
  const int panels = (l.out + P - 1) / P, pairs = (l.in + 1) / 2;
  p.w.assign(size_t(panels) * pairs * P, 0);
  for (int j = 0; j < l.out; ++j)
    for (int k = 0; k < l.in; k += 2)
      p.w[(size_t(j / P) * pairs + k / 2) * P + j % P] = bf16_pair(&l.w[size_t(j) * l.in], k, l.in);
  return p;
}

void linear_forward_bf16(const PackedLinearBf16 &l, const float *x, int ldx, int rows, float *y,
                         int ldy, Act act) {
  static const auto tile = tiles(std::make_index_sequence<kRows>());
  const int pairs = (l.in + 1) / 2;
  // x rounded once per call, not once per panel
  thread_local std::vector<uint32_t> x2;
  x2.resize(size_t(rows) * pairs);
  round_to_bf16_pairs(x, ldx, rows, l.in, x2.data());
  gemm::for_each_tile(l.out, rows, [&](int p, int r, int n, int ncols) {
    tile[n - 1](l.w.data() + size_t(p) * pairs * P, pairs, x2.data() + size_t(r) * pairs, pairs,
                l.b.data() + p * P, ncols, y + size_t(r) * ldy + p * P, ldy, act);
  });
}

} // namespace tarnn
