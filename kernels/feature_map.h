// phi of one head's query or key as the model's config.json says (docs/SPEC.md section 1,
// "Feature maps"): elementwise (elu + 1, the paper's; relu) or fast-transformers' random-feature
// maps over a stored omega. F = features: S is F x d_head and z is F wide. One feature at a time,
// so a GPU thread takes features j, j + d, ... of a head and the CPU all of them in order: the
// same function, the same bits on the host (the device's cosf, sinf and expf are its own).
#pragma once

#include "tarnn/config.h"
#include "tarnn_math.h"

namespace tarnn {

// One layer's phi, resolved once from the config and the layer's omega.
struct PhiMap {
  FeatureMapKind kind = FeatureMapKind::EluPlusOne;
  int d = 0;                                       // x's width, d_head
  int features = 0;                                // F, phi's width
  int cols = 0;                                    // omega's columns (random-feature maps)
  float x_scale = 1.0f;                            // sqrt(softmax_temp): x is scaled before omega
  float out_scale = 1.0f;                          // random_fourier: sqrt(2 / m)
  float log_half_n = 0.0f;                         // favor: ln(n) / 2
  float smoothing = 1.0f;                          // smoothed_random_fourier's last feature
  FeatureMapKind kernel_fn = FeatureMapKind::Relu; // generalized_random's f
  const float *omega = nullptr;                    // [d, cols], row-major

  TARNN_HD bool elementwise() const {
    return kind == FeatureMapKind::EluPlusOne || kind == FeatureMapKind::Relu;
  }
};

// Layer `omega`'s phi for config c (omega: the layer's, where the backend keeps it; null for the
// elementwise maps).
inline PhiMap phi_map(const Config &c, const float *omega) {
  const FeatureMap &fm = c.feature_map;
  PhiMap m;
  m.kind = fm.kind;
  m.d = c.d_head;
  m.features = c.features();
  m.cols = fm.omega_columns();
  m.omega = omega;
  m.kernel_fn = fm.kernel_fn;
  m.smoothing = float(fm.smoothing);
  // the library scales x by sqrt(softmax_temp), except GeneralizedRandomFeatures at 1
  m.x_scale = float(std::sqrt(fm.softmax_temp));
  const int n = fm.n_dims - (fm.kind == FeatureMapKind::SmoothedRandomFourier ? 1 : 0);
  if (n > 0)
    m.out_scale = float(std::sqrt(2.0 / n));
  if (fm.n_dims > 0)
    m.log_half_n = float(0.5 * std::log(double(fm.n_dims)));
  return m;
}

// An elementwise map of u: elu(u) + 1 or relu(u).
TARNN_HD float phi_elementwise(FeatureMapKind k, float u) {
  return k == FeatureMapKind::Relu ? relu(u) : phi(u);
}

// u_c = sum_i (x_i s) omega_ic, i ascending.
TARNN_HD float omega_dot(const PhiMap &m, const float *x, int c) {
  float u = 0.0f;
  for (int i = 0; i < m.d; ++i)
    u = u + (x[i] * m.x_scale) * m.omega[size_t(i) * m.cols + c];
  return u;
}

// Feature c (< m.features) of phi(x), x one head's d values (biases included).
TARNN_HD float phi_feature(const PhiMap &m, const float *x, int c) {
  if (m.elementwise())
    return phi_elementwise(m.kind, x[c]);
  switch (m.kind) {
  case FeatureMapKind::GeneralizedRandom:
    return phi_elementwise(m.kernel_fn, omega_dot(m, x, c));
  case FeatureMapKind::Favor: { // [exp(u - off) | exp(-u - off)], off = |x s|^2 / 2 + ln(n) / 2
    float norm = 0.0f;
    for (int i = 0; i < m.d; ++i)
      norm = norm + (x[i] * m.x_scale) * (x[i] * m.x_scale);
    const float offset = norm * 0.5f + m.log_half_n;
    const float u = omega_dot(m, x, c < m.cols ? c : c - m.cols);
    return expf((c < m.cols ? u : -u) - offset);
  }
  default: // random_fourier, smoothed: sqrt(2 / m) [cos u | sin u] (| smoothing)
    if (c >= 2 * m.cols)
      return m.smoothing;
    const float u = omega_dot(m, x, c < m.cols ? c : c - m.cols);
    return (c < m.cols ? cosf(u) : sinf(u)) * m.out_scale;
  }
}

// All F features of phi(x) into out, on the host: phi_feature's values to the bit, with each u_c
// and |x s|^2 formed once (phi_feature, one feature a thread, forms them per feature) and u's sums
// in a loop over omega's rows that vectorises (each u_c still summed over i ascending).
inline void phi_features(const PhiMap &m, const float *x, float *out) {
  if (m.elementwise()) {
    for (int c = 0; c < m.features; ++c)
      out[c] = phi_elementwise(m.kind, x[c]);
    return;
  }
  float u[kMaxFeatures];
  for (int c = 0; c < m.cols; ++c)
    u[c] = 0.0f;
  for (int i = 0; i < m.d; ++i) {
    const float xs = x[i] * m.x_scale;
    const float *row = m.omega + size_t(i) * m.cols;
    for (int c = 0; c < m.cols; ++c)
      u[c] = u[c] + xs * row[c];
  }
  switch (m.kind) {
  case FeatureMapKind::GeneralizedRandom:
    for (int c = 0; c < m.cols; ++c)
      out[c] = phi_elementwise(m.kernel_fn, u[c]);
    return;
  case FeatureMapKind::Favor: {
    float norm = 0.0f;
    for (int i = 0; i < m.d; ++i)
      norm = norm + (x[i] * m.x_scale) * (x[i] * m.x_scale);
    const float offset = norm * 0.5f + m.log_half_n;
    for (int c = 0; c < m.cols; ++c) {
      out[c] = expf(u[c] - offset);
      out[m.cols + c] = expf(-u[c] - offset);
    }
    return;
  }
  default:
    for (int c = 0; c < m.cols; ++c) {
      out[c] = cosf(u[c]) * m.out_scale;
      out[m.cols + c] = sinf(u[c]) * m.out_scale;
    }
    if (m.kind == FeatureMapKind::SmoothedRandomFourier)
      out[2 * m.cols] = m.smoothing;
  }
}

} // namespace tarnn
