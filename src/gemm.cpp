#include "gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <utility>

#include "../kernels/tarnn_math.h"

namespace tarnn {

namespace {

constexpr int P = PackedLinear::kPanel;
constexpr int kRows = 8; // rows per micro-tile: 16 accumulators of 16 floats

inline float finish(float acc, float bias, Epilogue act) {
  const float y = acc + bias;
  return act == Epilogue::Relu ? relu(y) : act == Epilogue::Gelu ? gelu(y) : y;
}

// Store an R x 32 tile of accumulators through the epilogue, keeping only columns < ncols.
template <int R>
inline void store_tile(const float (&acc)[R][P], const float *b, int ncols, float *y, int ldy,
                       Epilogue act) {
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < ncols; ++j)
      y[r * ldy + j] = finish(acc[r][j], b[j], act);
}

template <int R>
__attribute__((target("avx512f"))) void tile_avx512(const float *panel, int in, const float *x,
                                                    int ldx, const float *b, int ncols, float *y,
                                                    int ldy, Epilogue act) {
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
  float acc[R][P];
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(acc[r], c0[r]);
    _mm512_storeu_ps(acc[r] + 16, c1[r]);
  }
  store_tile<R>(acc, b, ncols, y, ldy, act);
}

// The same chain per element without vector registers, for CPUs without AVX-512.
template <int R>
void tile_scalar(const float *panel, int in, const float *x, int ldx, const float *b, int ncols,
                 float *y, int ldy, Epilogue act) {
  float acc[R][P] = {};
  for (int k = 0; k < in; ++k)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < P; ++j)
        acc[r][j] = std::fma(x[r * ldx + k], panel[k * P + j], acc[r][j]);
  store_tile<R>(acc, b, ncols, y, ldy, act);
}

using TileFn = void (*)(const float *, int, const float *, int, const float *, int, float *, int,
                        Epilogue);

template <size_t... R> constexpr auto tiles(std::index_sequence<R...>, bool avx512) {
  return std::array<TileFn, sizeof...(R)>{
      {(avx512 ? &tile_avx512<int(R) + 1> : &tile_scalar<int(R) + 1>)...}};
}

} // namespace

bool gemm_has_avx512() {
  // TARNN_NO_AVX512=1 takes the portable path (the tests run both).
  static const bool has = __builtin_cpu_supports("avx512f") && !std::getenv("TARNN_NO_AVX512");
  return has;
}

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
                    Epilogue act) {
  static const auto tile = tiles(std::make_index_sequence<kRows>(), gemm_has_avx512());
  const int panels = (l.out + P - 1) / P;
  for (int p = 0; p < panels; ++p) { // one panel of W stays in cache across all row tiles
    const float *panel = l.w.data() + size_t(p) * l.in * P;
    const int ncols = std::min(P, l.out - p * P);
    for (int r = 0; r < rows; r += kRows) {
      const int n = std::min(kRows, rows - r);
      tile[n - 1](panel, l.in, x + size_t(r) * ldx, ldx, l.b.data() + p * P, ncols,
                  y + size_t(r) * ldy + p * P, ldy, act);
    }
  }
}

void linear_forward_ref(const Linear &l, const float *x, int ldx, int rows, float *y, int ldy,
                        Epilogue act) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < l.out; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < l.in; ++k)
        acc = std::fma(x[size_t(r) * ldx + k], l.w[size_t(j) * l.in + k], acc);
      y[size_t(r) * ldy + j] = finish(acc, l.b[j], act);
    }
}

} // namespace tarnn
