// x = LayerNorm(x + y) per row of [rows, n], the post-norm residual of every sublayer; with y null,
// x = LayerNorm(x) (the final norm).
// The GPU kernel gives each row one warp and reduces in a tree; the twin is the CPU backend's own
// layernorm_row, so the two agree to float rounding of the mean and variance, not to the bit.
#pragma once

#include <cstddef>

#include "tarnn_math.h"

namespace tarnn {

TARNN_HD float residual_in(const float *x, const float *y, size_t at) {
  return y ? x[at] + y[at] : x[at];
}

// layernorm_row over G rows of x at once: each row's sums are layernorm_row's chains (i
// ascending), so the same bits; G chains side by side let the CPU overlap their adds, where one
// row alone is n dependent adds twice (a 256-wide LayerNorm was 5% of a CPU step, waiting).
template <int G>
inline void layernorm_rows_together(float *x, const float *w, const float *nb, int n) {
  float mean[G] = {}, var[G] = {}, rstd[G];
  for (int i = 0; i < n; ++i)
    for (int g = 0; g < G; ++g)
      mean[g] += x[size_t(g) * n + i];
  for (int g = 0; g < G; ++g)
    mean[g] /= static_cast<float>(n);
  for (int i = 0; i < n; ++i)
    for (int g = 0; g < G; ++g) {
      const float c = x[size_t(g) * n + i] - mean[g];
      var[g] += c * c;
    }
  for (int g = 0; g < G; ++g)
    rstd[g] = 1.0f / sqrtf(var[g] / static_cast<float>(n) + kLayerNormEps);
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < n; ++i)
      x[size_t(g) * n + i] = (x[size_t(g) * n + i] - mean[g]) * rstd[g] * w[i] + nb[i];
}

inline void residual_layernorm_cpu(float *x, const float *y, const float *w, const float *nb,
                                   int rows, int n) {
  constexpr int G = 8;
  if (y)
    for (size_t i = 0; i < size_t(rows) * n; ++i)
      x[i] += y[i];
  int r = 0;
  for (; r + G <= rows; r += G)
    layernorm_rows_together<G>(x + size_t(r) * n, w, nb, n);
  for (; r < rows; ++r)
    layernorm_row(x + size_t(r) * n, w, nb, x + size_t(r) * n, n);
}

} // namespace tarnn
