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
  bool elementwise = true;                         // FeatureMap::elementwise(): F = d, no omega
  int d = 0;                                       // x's width, d_head
  int features = 0;                                // F, phi's width
  int cols = 0;                                    // omega's columns (random-feature maps)
  float x_scale = 1.0f;                            // sqrt(softmax_temp): x is scaled before omega
  float out_scale = 1.0f;                          // random_fourier: sqrt(2 / m)
  float log_half_n = 0.0f;                         // favor: ln(n) / 2
  float smoothing = 1.0f;                          // smoothed_random_fourier's last feature
  FeatureMapKind kernel_fn = FeatureMapKind::Relu; // generalized_random's f
  const float *omega = nullptr;                    // [d, cols], row-major
};

// Layer `omega`'s phi for config c (omega: the layer's, where the backend keeps it; null for the
// elementwise maps).
inline PhiMap phi_map(const Config &c, const float *omega) {
  const FeatureMap &fm = c.feature_map;
  PhiMap m;
  m.kind = fm.kind;
  m.elementwise = fm.elementwise();
  m.d = c.d_head;
  m.features = c.features();
  m.cols = fm.omega_columns();
  m.omega = omega;
  m.kernel_fn = fm.kernel_fn;
  m.smoothing = float(fm.smoothing);
  // the library scales x by sqrt(softmax_temp), except GeneralizedRandomFeatures at 1
  m.x_scale = float(std::sqrt(fm.softmax_temp));
  const int n = fm.n_dims - feature_map_traits(fm.kind).constants; // the random features
  if (n > 0)
    m.out_scale = float(std::sqrt(2.0 / n));
  if (fm.n_dims > 0)
    m.log_half_n = float(0.5 * std::log(double(fm.n_dims)));
  return m;
}

// A feature map's kind as a type: dispatch's argument (as state_format.h's Format).
template <FeatureMapKind K> struct Kind {
  static_assert(int(K) < kFeatureMapKinds, "a feature map without its row in kFeatureMaps");
  static constexpr FeatureMapKind value = K;
  TARNN_HD constexpr operator FeatureMapKind() const { return K; }
};

// fn(Kind<K>{}) for the K that k names: the one switch from a layer's map to its code (Phi<K>
// below), on every backend. Every kind has its case (no default: -Werror=switch).
TARNN_HD_CALLS_ANY
template <class Fn> TARNN_HD decltype(auto) dispatch(FeatureMapKind k, Fn &&fn) {
  switch (k) {
  case FeatureMapKind::EluPlusOne:
    return fn(Kind<FeatureMapKind::EluPlusOne>{});
  case FeatureMapKind::Relu:
    return fn(Kind<FeatureMapKind::Relu>{});
  case FeatureMapKind::RandomFourier:
    return fn(Kind<FeatureMapKind::RandomFourier>{});
  case FeatureMapKind::SmoothedRandomFourier:
    return fn(Kind<FeatureMapKind::SmoothedRandomFourier>{});
  case FeatureMapKind::Favor:
    return fn(Kind<FeatureMapKind::Favor>{});
  case FeatureMapKind::GeneralizedRandom:
    return fn(Kind<FeatureMapKind::GeneralizedRandom>{});
  }
  __builtin_unreachable(); // k is one of the cases (config.json's kinds are parsed into them)
}

// Map K's code: feature(m, x, c), feature c (< m.features) of phi(x), x one head's d values
// (biases included; X: a float pointer, or anything indexed as one, such as linear_attention.h's
// QkvIn), one feature at a time (a GPU thread's); and features(m, x, out), all F of
// them into out on the host, phi_feature's values to the bit, with each u_c and |x s|^2 formed
// once and u's sums in a loop over omega's rows that vectorises (each u_c still summed over i
// ascending). The elementwise maps have of(u), phi of one element. There is no code by default:
// a kind added to FeatureMapKind does not compile until it has its Phi here.
template <FeatureMapKind K> struct Phi;

// An elementwise map, of(u) for each element.
template <class Map> struct ElementwisePhi {
  template <class X> static TARNN_HD float feature(const PhiMap &, X x, int c) {
    return Map::of(x[c]);
  }
  static void features(const PhiMap &m, const float *x, float *out) {
    for (int c = 0; c < m.features; ++c)
      out[c] = Map::of(x[c]);
  }
};
template <>
struct Phi<FeatureMapKind::EluPlusOne> : ElementwisePhi<Phi<FeatureMapKind::EluPlusOne>> {
  static TARNN_HD float of(float u) { return phi(u); } // elu(u) + 1
};
template <> struct Phi<FeatureMapKind::Relu> : ElementwisePhi<Phi<FeatureMapKind::Relu>> {
  static TARNN_HD float of(float u) { return relu(u); }
};

// is_elementwise as a constant the device code may read (config.h's function is host code).
template <FeatureMapKind K> constexpr bool kElementwise = is_elementwise(K);

// An elementwise map k of u: elu(u) + 1 or relu(u) (k is elementwise: the layer's, or
// generalized_random's kernel_fn).
TARNN_HD float phi_elementwise(FeatureMapKind k, float u) {
  return dispatch(k, [u](auto K) {
    if constexpr (kElementwise<K>)
      return Phi<K>::of(u);
    else
      return u; // (never asked: k is elementwise)
  });
}

// u_c = sum_i (x_i s) omega_ic, i ascending.
template <class X> TARNN_HD float omega_dot(const PhiMap &m, X x, int c) {
  float u = 0.0f;
  for (int i = 0; i < m.d; ++i)
    u = u + (x[i] * m.x_scale) * m.omega[size_t(i) * m.cols + c];
  return u;
}

// Every u_c into u, in a loop over omega's rows (each u_c summed over i ascending, as omega_dot).
inline void omega_dots(const PhiMap &m, const float *x, float *u) {
  for (int c = 0; c < m.cols; ++c)
    u[c] = 0.0f;
  for (int i = 0; i < m.d; ++i) {
    const float xs = x[i] * m.x_scale;
    const float *row = m.omega + size_t(i) * m.cols;
    for (int c = 0; c < m.cols; ++c)
      u[c] = u[c] + xs * row[c];
  }
}

// random_fourier, smoothed: sqrt(2 / m) [cos u | sin u] (| smoothing)
template <bool kSmoothed> struct FourierPhi {
  template <class X> static TARNN_HD float feature(const PhiMap &m, X x, int c) {
    if (c >= 2 * m.cols)
      return m.smoothing;
    const float u = omega_dot(m, x, c < m.cols ? c : c - m.cols);
    return (c < m.cols ? cosf(u) : sinf(u)) * m.out_scale;
  }
  static void features(const PhiMap &m, const float *x, float *out) {
    float u[kMaxFeatures];
    omega_dots(m, x, u);
    for (int c = 0; c < m.cols; ++c) {
      out[c] = cosf(u[c]) * m.out_scale;
      out[m.cols + c] = sinf(u[c]) * m.out_scale;
    }
    if constexpr (kSmoothed)
      out[2 * m.cols] = m.smoothing;
  }
};
template <> struct Phi<FeatureMapKind::RandomFourier> : FourierPhi<false> {};
template <> struct Phi<FeatureMapKind::SmoothedRandomFourier> : FourierPhi<true> {};

// favor: [exp(u - off) | exp(-u - off)], off = |x s|^2 / 2 + ln(n) / 2
template <> struct Phi<FeatureMapKind::Favor> {
  template <class X> static TARNN_HD float offset(const PhiMap &m, X x) {
    float norm = 0.0f;
    for (int i = 0; i < m.d; ++i)
      norm = norm + (x[i] * m.x_scale) * (x[i] * m.x_scale);
    return norm * 0.5f + m.log_half_n;
  }
  template <class X> static TARNN_HD float feature(const PhiMap &m, X x, int c) {
    const float off = offset(m, x);
    const float u = omega_dot(m, x, c < m.cols ? c : c - m.cols);
    return expf((c < m.cols ? u : -u) - off);
  }
  static void features(const PhiMap &m, const float *x, float *out) {
    float u[kMaxFeatures];
    omega_dots(m, x, u);
    const float off = offset(m, x);
    for (int c = 0; c < m.cols; ++c) {
      out[c] = expf(u[c] - off);
      out[m.cols + c] = expf(-u[c] - off);
    }
  }
};

// generalized_random: f(u), f elementwise (kernel_fn)
template <> struct Phi<FeatureMapKind::GeneralizedRandom> {
  template <class X> static TARNN_HD float feature(const PhiMap &m, X x, int c) {
    return phi_elementwise(m.kernel_fn, omega_dot(m, x, c));
  }
  static void features(const PhiMap &m, const float *x, float *out) {
    float u[kMaxFeatures];
    omega_dots(m, x, u);
    for (int c = 0; c < m.cols; ++c)
      out[c] = phi_elementwise(m.kernel_fn, u[c]);
  }
};

// Feature c (< m.features) of phi(x), x one head's d values (biases included).
template <class X> TARNN_HD float phi_feature(const PhiMap &m, X x, int c) {
  return dispatch(m.kind, [&](auto K) { return Phi<K>::feature(m, x, c); });
}

// All F features of phi(x) into out, on the host (Phi<K>::features).
inline void phi_features(const PhiMap &m, const float *x, float *out) {
  dispatch(m.kind, [&](auto K) { Phi<K>::features(m, x, out); });
}

} // namespace tarnn
