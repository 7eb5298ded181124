// x = LayerNorm(x + y) per row of [rows, n], the post-norm residual of every sublayer; with y null,
// x = LayerNorm(x) (the final norm). With x16, also a bfloat16 copy of the result (round_bf16.h's
// rule) for the bf16 GEMM that reads it next: written as the row is, with no pass of its own.
// The GPU kernel gives each row one warp and reduces in a tree; the twin is the CPU backend's own
// layernorm_row, so the two agree to float rounding of the mean and variance, not to the bit.
//
// The row kernel (launch_layernorm_rows) reads each row of x + y once into registers (rows up to
// kLayerNormRegisterWidth wide), with residual_layernorm_kernel's sums in its order, so its
// bits; where a second norm (w2, nb2) is given it normalizes the result again in registers
// (the last layer's second LayerNorm, then the final one: one pass, not two), and it writes the
// result in fp32 to out and in bf16 to out16, each where not null (the last pass's fp32 x has no
// reader when the head's GEMM is bf16).
#pragma once

#include <cstddef>

#include "round_bf16.h"
#include "tarnn_math.h"

namespace tarnn {

TARNN_HD float residual_in(const float *x, const float *y, size_t at) {
  return y ? x[at] + y[at] : x[at];
}

// x += y over `count` floats, as residual_in adds them; nothing when y is null.
inline void add_residual(float *x, const float *y, size_t count) {
  if (y)
    for (size_t i = 0; i < count; ++i)
      x[i] = residual_in(x, y, i);
}

inline void residual_layernorm_cpu(float *x, const float *y, const float *w, const float *nb,
                                   int rows, int n, uint16_t *x16 = nullptr) {
  constexpr int G = 8;
  add_residual(x, y, size_t(rows) * n);
  int r = 0;
  for (; r + G <= rows; r += G)
    layernorm_rows<G>(x + size_t(r) * n, w, nb, x + size_t(r) * n, n);
  for (; r < rows; ++r)
    layernorm_row(x + size_t(r) * n, w, nb, x + size_t(r) * n, n);
  if (x16)
    round_bf16_cpu(x, x16, size_t(rows) * n);
}

constexpr int kLayerNormRegisterWidth = 1024; // 32 floats a lane

// The row kernel's twin: x = LayerNorm(x + y), then LayerNorm with (w2, nb2) where w2 is not null.
inline void layernorm_rows_cpu(float *x, const float *y, const float *w, const float *nb,
                               const float *w2, const float *nb2, int rows, int n,
                               uint16_t *x16 = nullptr) {
  residual_layernorm_cpu(x, y, w, nb, rows, n, w2 ? nullptr : x16);
  if (w2)
    residual_layernorm_cpu(x, nullptr, w2, nb2, rows, n, x16);
}

} // namespace tarnn
