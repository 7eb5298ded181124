// Softmax attention, the baseline the paper compares with (SPEC section 1): one head of one
// position, a = sum_{j<n} softmax_j(q . k_j / sqrt(d)) v_j over the n = t + 1 keys and values so
// far. Both softmax decoders (KV cache and recompute) call this, so they agree to the bit.
#pragma once

#include "tarnn_math.h"

namespace tarnn {

// KT holds the keys transposed: row i (ldk floats apart) is feature i of keys 0..n-1, so the
// scores of consecutive keys are independent lanes and the loop over keys vectorises without
// reordering any sum. V is [n, d] row-major. scores is scratch for n floats.
TARNN_HD void softmax_attention(const float *__restrict__ q, const float *__restrict__ KT, int ldk,
                                const float *__restrict__ V, int n, int d,
                                float *__restrict__ scores, float *__restrict__ out) {
  for (int j = 0; j < n; ++j)
    scores[j] = 0.0f;
  for (int i = 0; i < d; ++i) { // s_j = q . k_j, each sum in feature order
    const float qi = q[i];
    const float *row = KT + static_cast<long>(i) * ldk;
    for (int j = 0; j < n; ++j)
      scores[j] = scores[j] + qi * row[j];
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) {
    scores[j] = scores[j] * scale;
    mx = fmaxf(mx, scores[j]);
  }
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) { // subtract the max: exp never overflows
    scores[j] = expf(scores[j] - mx);
    sum += scores[j];
  }
  for (int i = 0; i < d; ++i)
    out[i] = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float p = scores[j];
    const float *v = V + static_cast<long>(j) * d;
    for (int i = 0; i < d; ++i)
      out[i] = out[i] + p * v[i];
  }
  for (int i = 0; i < d; ++i)
    out[i] = out[i] / sum;
}

} // namespace tarnn
