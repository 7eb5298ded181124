#include "gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <immintrin.h>
#include <utility>

#include "../../kernels/cpu_features.h"
#include "gemm_tiles.h"

namespace tarnn {

namespace {

using gemm::kRows;
using gemm::store_tile;
constexpr int P = PackedLinear::kPanel;
static_assert(P == gemm::kPanel);

template <int R>
__attribute__((target("avx512f"))) void tile_avx512(const float *panel, int in, const float *x,
                                                    int ldx, const float *b, int ncols, float *y,
                                                    int ldy, Act act) {
  __m512 c0[R], c1[R];
  for (int r = 0; r < R; ++r)
    c0[r] = c1[r] = _mm512_setzero_ps();
  for (int k = 0; k < in; ++k) {
    const __m512 w0 = _mm512_loadu_ps(panel + k * P);
    const __m512 w1 = _mm512_loadu_ps(panel + k * P + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
      c0[r] = _mm512_fmadd_ps(a, w0, c0[r]);
      c1[r] = _mm512_fmadd_ps(a, w1, c1[r]);
    }
  }
  gemm::store_tile_avx512<R>(c0, c1, b, ncols, y, ldy, act);
}

// The same chain per element in plain C++: compiled twice, for any x86-64 and with AVX2 and FMA
// (where the compiler turns std::fma into vector fused multiply-adds), chosen at run time.
template <int R>
__attribute__((always_inline)) inline void tile_fma_chain(const float *panel, int in,
                                                          const float *x, int ldx, const float *b,
                                                          int ncols, float *y, int ldy, Act act) {
  float acc[R][P] = {};
  for (int k = 0; k < in; ++k)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < P; ++j)
        acc[r][j] = std::fma(x[r * ldx + k], panel[k * P + j], acc[r][j]);
  store_tile<R>(acc, b, ncols, y, ldy, act);
}

template <int R>
void tile_portable(const float *panel, int in, const float *x, int ldx, const float *b, int ncols,
                   float *y, int ldy, Act act) {
  tile_fma_chain<R>(panel, in, x, ldx, b, ncols, y, ldy, act);
}

template <int R>
__attribute__((target("avx2,fma"))) void tile_avx2(const float *panel, int in, const float *x,
                                                   int ldx, const float *b, int ncols, float *y,
                                                   int ldy, Act act) {
  tile_fma_chain<R>(panel, in, x, ldx, b, ncols, y, ldy, act);
}

using TileFn = void (*)(const float *, int, const float *, int, const float *, int, float *, int,
                        Act);

template <size_t... R> auto tiles(std::index_sequence<R...>) {
  if (cpu_has_avx512())
    return std::array<TileFn, sizeof...(R)>{{&tile_avx512<int(R) + 1>...}};
  if (cpu_has_avx2_fma())
    return std::array<TileFn, sizeof...(R)>{{&tile_avx2<int(R) + 1>...}};
  return std::array<TileFn, sizeof...(R)>{{&tile_portable<int(R) + 1>...}};
}

} // namespace

PackedLinear pack(const Linear &l) {
  PackedLinear p;
  p.out = l.out;
  p.in = l.in;
  p.b = l.b;
  const int panels = (l.out + P - 1) / P;
  p.w.assign(size_t(panels) * l.in * P, 0.0f);
  for (int j = 0; j < l.out; ++j)
    for (int k = 0; k < l.in; ++k)
      p.w[(size_t(j / P) * l.in + k) * P + j % P] = l.w[size_t(j) * l.in + k];
  return p;
}

void linear_forward(const PackedLinear &l, const float *x, int ldx, int rows, float *y, int ldy,
                    Act act) {
  static const auto tile = tiles(std::make_index_sequence<kRows>());
  gemm::for_each_tile(l.out, rows, [&](int p, int r, int n, int ncols) {
    tile[n - 1](l.w.data() + size_t(p) * l.in * P, l.in, x + size_t(r) * ldx, ldx,
                l.b.data() + p * P, ncols, y + size_t(r) * ldy + p * P, ldy, act);
  });
}

} // namespace tarnn
