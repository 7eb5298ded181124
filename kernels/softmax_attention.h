// Softmax attention, the baseline the paper compares with (SPEC section 1): one head of one
// position, a = sum_{j<n} softmax_j(q . k_j / sqrt(d)) v_j over the n = t + 1 keys and values so
// far. Both softmax decoders (KV cache and recompute) call this, so they agree to the bit.
//
// The baseline should be a fair one, so every loop here vectorises under plain -O3 (no
// -ffast-math, no reordering the compiler would have to invent): sums over keys go into 16 fixed
// lanes, exp is a polynomial the compiler can inline, and the weighted sum of values takes four
// keys per dependent add. The order of every sum is fixed by this code, not by the compiler.
#pragma once

#include <cstdint>
#include <cstring>

#include "tarnn_math.h"

namespace tarnn {

constexpr int kLanes = 16; // partial sums over keys: one AVX-512 register
constexpr int kBlock = 64; // keys whose scores are accumulated together

// exp(x) for x <= 0, to about 2 ulp: x = k ln 2 + r with |r| <= ln 2 / 2, exp(r) by its degree-7
// Taylor polynomial, times 2^k built in the exponent bits. Below -87 it returns exp(-87), which
// is negligible beside the largest term (exp(0) = 1) of a softmax.
TARNN_HD float exp_nonpositive(float x) {
  x = x > -87.0f ? x : -87.0f;       // not fmaxf: its NaN rules keep it out of vector registers
  const float shifter = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
  const float kf = (x * 1.44269504f + shifter) - shifter;
  const float r = (x - kf * 0.693145752f) - kf * 1.42860677e-6f; // ln 2 in two parts
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(kf) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// KT holds the keys transposed: row i (ldk floats apart) is feature i of keys 0..n-1, so the
// scores of consecutive keys are independent lanes. V is [n, d] row-major. scores is scratch for
// n floats. Over 60 lines: its three steps (scores, the softmax in 16 lanes, the weighted sum of
// the values) share `scores`, `lane` and `j`, and each one's order of operations is the golden
// files' bits; kept as one body, it is also the device's.
TARNN_HD void softmax_attention(const float *__restrict__ q, const float *__restrict__ KT, int ldk,
                                const float *__restrict__ V, int n, int d,
                                float *__restrict__ scores, float *__restrict__ out) {
  // s_j = (q . k_j) / sqrt(d), each dot product in feature order; 64 keys at a time stay in
  // registers across the features
  int j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    float acc[kBlock] = {};
    for (int i = 0; i < d; ++i) {
      const float qi = q[i];
      const float *row = KT + static_cast<long>(i) * ldk + j;
      for (int l = 0; l < kBlock; ++l)
        acc[l] = acc[l] + qi * row[l];
    }
    for (int l = 0; l < kBlock; ++l)
      scores[j + l] = acc[l];
  }
  for (int l = j; l < n; ++l)
    scores[l] = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float qi = q[i];
    const float *row = KT + static_cast<long>(i) * ldk;
    for (int l = j; l < n; ++l)
      scores[l] = scores[l] + qi * row[l];
  }
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  float lane[kLanes];
  for (int l = 0; l < kLanes; ++l)
    lane[l] = -INFINITY;
  for (j = 0; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      scores[j + l] = scores[j + l] * scale;
      lane[l] = scores[j + l] > lane[l] ? scores[j + l] : lane[l];
    }
  for (int l = 0; j + l < n; ++l) {
    scores[j + l] = scores[j + l] * scale;
    lane[l] = scores[j + l] > lane[l] ? scores[j + l] : lane[l];
  }
  float mx = lane[0];
  for (int l = 1; l < kLanes; ++l)
    mx = fmaxf(mx, lane[l]);
  // p_j = exp(s_j - max) (never overflows), and their sum in 16 lanes
  for (int l = 0; l < kLanes; ++l)
    lane[l] = 0.0f;
  for (j = 0; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      scores[j + l] = exp_nonpositive(scores[j + l] - mx);
      lane[l] = lane[l] + scores[j + l];
    }
  for (int l = 0; j + l < n; ++l) {
    scores[j + l] = exp_nonpositive(scores[j + l] - mx);
    lane[l] = lane[l] + scores[j + l];
  }
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l)
    sum = sum + lane[l];
  // out = sum_j p_j v_j / sum, four keys per add into out
  for (int i = 0; i < d; ++i)
    out[i] = 0.0f;
  for (j = 0; j + 4 <= n; j += 4) {
    const float p0 = scores[j], p1 = scores[j + 1], p2 = scores[j + 2], p3 = scores[j + 3];
    const float *v0 = V + static_cast<long>(j) * d, *v1 = v0 + d, *v2 = v1 + d, *v3 = v2 + d;
    for (int i = 0; i < d; ++i)
      out[i] = out[i] + ((p0 * v0[i] + p1 * v1[i]) + (p2 * v2[i] + p3 * v3[i]));
  }
  for (; j < n; ++j) {
    const float p = scores[j];
    const float *v = V + static_cast<long>(j) * d;
    for (int i = 0; i < d; ++i)
      out[i] = out[i] + p * v[i];
  }
  for (int i = 0; i < d; ++i)
    out[i] = out[i] / sum;
}

} // namespace tarnn
