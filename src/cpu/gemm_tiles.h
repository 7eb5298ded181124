// What the fp32 and bf16 GEMMs (gemm.cpp, gemm_bf16.cpp) share: the walk over panels of 32
// outputs and tiles of up to 8 rows, and the epilogue y = act(acc + b), rounded the same way in
// every path.
#pragma once

#include <algorithm>

#include "../../kernels/bias_act.h"

namespace tarnn::gemm {

constexpr int kPanel = 32; // outputs per panel of packed W
constexpr int kRows = 8;   // rows per micro-tile: 16 accumulators of 16 floats

inline float finish(float acc, const float *b, int j, Act act) {
  return activate(b ? acc + b[j] : acc, act);
}

// Store an R x 32 tile of accumulators through the epilogue, keeping only columns < ncols.
template <int R>
inline void store_tile(const float (&acc)[R][kPanel], const float *b, int ncols, float *y, int ldy,
                       Act act) {
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < ncols; ++j)
      y[r * ldy + j] = finish(acc[r][j], b, j, act);
}

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
