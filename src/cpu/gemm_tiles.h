// What the fp32 and bf16 GEMMs (gemm.cpp, gemm_bf16.cpp) share: the walk over panels of 32
// outputs and tiles of up to 8 rows, and the epilogue y = act(acc + b), rounded the same way in
// every path.
#pragma once

#include <algorithm>
#include <immintrin.h>

#include "../../kernels/gemm_ref.h"

namespace tarnn::gemm {

constexpr int kPanel = 32; // outputs per panel of packed W
constexpr int kRows = 8;   // rows per micro-tile: 16 accumulators of 16 floats

// Store an R x 32 tile of accumulators through the epilogue, keeping only columns < ncols.
template <int R>
inline void store_tile(const float (&acc)[R][kPanel], const float *b, int ncols, float *y, int ldy,
                       Act act) {
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < ncols; ++j)
      y[r * ldy + j] = linear_finish(acc[r][j], b, j, act);
}

// The AVX-512 tiles' epilogue from their accumulators (c0: columns 0-15, c1: 16-31): in vector
// registers for a whole panel without GELU, the same bits as linear_finish (acc + b, then ReLU's
// u > 0 ? u : +0, which vmaxps(u, +0) is for -0 and NaN too); else through store_tile. Element by
// element, 256 scalar stores a tile weigh on a short GEMM (in = 256 in bf16: 128 pair steps).
// GCC 12's intrinsics headers start some casts from _mm512_undefined_*: a false positive
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int R>
__attribute__((target("avx512f"), always_inline)) inline void
store_tile_avx512(const __m512 (&c0)[R], const __m512 (&c1)[R], const float *b, int ncols, float *y,
                  int ldy, Act act) {
  if (ncols == kPanel && act != Act::Gelu) {
    const __m512 zero = _mm512_setzero_ps();
    const __m512 b0 = b ? _mm512_loadu_ps(b) : zero, b1 = b ? _mm512_loadu_ps(b + 16) : zero;
    for (int r = 0; r < R; ++r) {
      __m512 u0 = b ? _mm512_add_ps(c0[r], b0) : c0[r], u1 = b ? _mm512_add_ps(c1[r], b1) : c1[r];
      if (act == Act::Relu) {
        u0 = _mm512_max_ps(u0, zero);
        u1 = _mm512_max_ps(u1, zero);
      }
      _mm512_storeu_ps(y + r * ldy, u0);
      _mm512_storeu_ps(y + r * ldy + 16, u1);
    }
    return;
  }
  float acc[R][kPanel];
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(acc[r], c0[r]);
    _mm512_storeu_ps(acc[r] + 16, c1[r]);
  }
  store_tile<R>(acc, b, ncols, y, ldy, act);
}
#pragma GCC diagnostic pop

// tile(p, r, n, ncols) for panel p and rows [r, r + n): one panel of W stays in cache across all
// row tiles.
template <class Tile> void for_each_tile(int out, int rows, Tile &&tile) {
  const int panels = (out + kPanel - 1) / kPanel;
  for (int p = 0; p < panels; ++p) {
    const int ncols = std::min(kPanel, out - p * kPanel);
    for (int r = 0; r < rows; r += kRows)
      tile(p, r, std::min(kRows, rows - r), ncols);
  }
}

} // namespace tarnn::gemm
