// The LayerNorm of one row by one warp, the device part the row kernels share
// (residual_layernorm.cu's layernorm_rows_kernel, feed_forward.cu's fused feed-forward): lane l
// holds elements l, l + 32, ... in registers; the mean and the variance are butterfly sums, so
// every lane ends with the same value, in residual_layernorm_kernel's order, so its bits. Device
// code: included by kernels/*.cu only.
#pragma once

#include "round_bf16.h"
#include "tarnn_math.h"

namespace tarnn {

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// LayerNorm of a row held K floats a lane (element lane + 32 k in v[k], 0 past n), in place.
template <int K>
__device__ void normalize_row(float (&v)[K], int lane, int n, const float *w, const float *nb) {
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (lane + 32 * k < n)
      sum += v[k];
  const float mean = warp_sum(sum) / static_cast<float>(n);
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (lane + 32 * k < n) {
      const float c = v[k] - mean;
      sq += c * c;
    }
  const float var = warp_sum(sq) / static_cast<float>(n);
  const float rstd = 1.0f / sqrtf(var + kLayerNormEps);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = lane + 32 * k;
    if (i < n)
      v[k] = (v[k] - mean) * rstd * w[i] + nb[i]; // layernorm_row's expression
  }
}

// One row of n <= 32 K elements, element i read as in(i) (the residual's sum x + y), once, into
// registers: LayerNorm with (w, nb), again with (w2, nb2) where w2 is not null (the last layer's
// second norm, then the final norm), written to out in fp32 and to out16 in bf16 (round_bf16.h's
// rule), each where not null. The whole warp calls it (the shuffles are full-warp).
template <int K, class In>
__device__ void layernorm_row_warp(In in, int lane, int n, const float *w, const float *nb,
                                   const float *w2, const float *nb2, float *out, uint16_t *out16) {
  float v[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = lane + 32 * k;
    v[k] = i < n ? in(i) : 0.0f;
  }
  normalize_row<K>(v, lane, n, w, nb);
  if (w2)
    normalize_row<K>(v, lane, n, w2, nb2);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = lane + 32 * k;
    if (i >= n)
      continue;
    if (out)
      out[i] = v[k];
    if (out16)
      out16[i] = bf16_bits(v[k]);
  }
}

} // namespace tarnn
