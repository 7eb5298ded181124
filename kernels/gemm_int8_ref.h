// --precision int8, defined once (docs/SPEC.md, "int8 GEMMs"): the quantization of W and of a
// GEMM's input, the integer sum and its scaling back to fp32, and the plain reference GEMM built
// from them. The CPU's fast paths (src/cpu/gemm_int8.h) and the accuracy study
// (tools/int8_study.cpp) run these very functions, or vector forms of them that give the same
// bits; so do the tests that compare them.
//
// - A vector v (a row of W, W's row j being output j; or a row of x) is quantized with its own
//   scale: a = max_k |v_k|, q_k = clamp(rne(v_k * (127 / a)), -127, 127), scale = a / 127, each
//   of 127 / a, a / 127 and v_k * (127 / a) one fp32 operation rounded to nearest even (rne: the
//   integer nearest, ties to even). q_k * scale is v_k to within half a step.
// - a = 0 (or below 2^-64, where 127 / a could overflow): q = 0 and scale = 0, the row adds
//   nothing. a not finite (v holds an Inf or a NaN): q = 0 and scale = NaN, so every output of
//   that row is NaN, as the fp32 GEMM's would be.
// - y[r, j] = act(float(acc) * (sx[r] * sw[j]) + b[j]), acc = sum_k qx[r, k] qw[j, k] in int32:
//   exact (|acc| <= 127 * 127 * in, and in <= 65,536 by config.h's bounds), so the order of the
//   sum is free and every path gives the same acc. float(acc) rounds to nearest even (exact below
//   2^24), then sx * sw, the product, and + b are each one fp32 rounding, in that order (no fused
//   multiply-add).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bias_act.h"

namespace tarnn {

constexpr int kInt8Max = 127;                  // symmetric: -127..127, never -128
constexpr uint32_t kInt8TinyBits = 0x1f800000; // 2^-64: a vector whose |max| is below is zero
constexpr uint32_t kFloatInfBits = 0x7f800000;

// |f|'s bits: as unsigned integers these order like |f|, with NaN above Inf; the max of a vector
// is an integer max, the same in any order, on any path. (TARNN_HD: the CUDA backend's int8
// kernels, kernels/int8_rows.cu, run these functions too.)
TARNN_HD uint32_t abs_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f) & 0x7fffffffu;
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u & 0x7fffffffu;
#endif
}

TARNN_HD float float_of_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// The scale of a vector whose largest |v_k| has the bits `amax`, and the factor that quantizes it.
struct Int8Scale {
  float scale; // a / 127: the value of one step
  float inv;   // 127 / a: v_k * inv rounds to q_k; 0 where q is all 0
};

TARNN_HD Int8Scale int8_scale(uint32_t amax) {
  if (amax >= kFloatInfBits)
    return {float_of_bits(0x7fc00000u), 0.0f}; // std::nanf(""): a quiet NaN
  if (amax < kInt8TinyBits)
    return {0.0f, 0.0f};
  const float a = float_of_bits(amax);
  return {a / float(kInt8Max), float(kInt8Max) / a};
}

// One element of a vector whose inv is not 0: rne(v * inv), clamped. rne by adding and taking
// away 1.5 * 2^23 (exact for |u| < 2^22, the same bits as vcvtps2dq's default rounding). |v| <= a
// makes |v * inv| <= 127 (1 + 2^-23) < 127.5, so the clamp never acts; it is kept so that the
// definition has no exception.
TARNN_HD int8_t int8_quantize(float v, float inv) {
  constexpr float kRound = 12582912.0f; // 1.5 * 2^23
  const float u = v * inv;
  const int q = int((u + kRound) - kRound);
  return int8_t(q < -kInt8Max ? -kInt8Max : q > kInt8Max ? kInt8Max : q);
}

TARNN_HD uint32_t abs_max_bits(const float *v, int n) {
  uint32_t amax = 0;
  for (int k = 0; k < n; ++k)
    amax = abs_bits(v[k]) > amax ? abs_bits(v[k]) : amax;
  return amax;
}

// q[k] for k < n (all 0 where inv is 0) and the vector's scale.
TARNN_HD float int8_quantize_vector(const float *v, int n, int8_t *q) {
  const Int8Scale s = int8_scale(abs_max_bits(v, n));
  for (int k = 0; k < n; ++k)
    q[k] = s.inv == 0.0f ? int8_t(0) : int8_quantize(v[k], s.inv);
  return s.scale;
}

// The epilogue: act(float(acc) * (sx * sw) + b[j]), or without b.
TARNN_HD float int8_finish(int32_t acc, float sx, float sw, const float *b, int j, Act act) {
  const float u = float(acc) * (sx * sw);
  return activate(b ? u + b[j] : u, act);
}

// The plain reference: W is [out, in] in fp32 (quantized here, column by column, as the packing
// does once at load); b may be null.
inline void linear_forward_int8_ref(const float *W, const float *b, int out, int in, const float *x,
                                    int ldx, int rows, float *y, int ldy, Act act) {
  std::vector<int8_t> qx(static_cast<size_t>(in)), qw(static_cast<size_t>(in));
  for (int r = 0; r < rows; ++r) {
    const float sx = int8_quantize_vector(x + size_t(r) * ldx, in, qx.data());
    for (int j = 0; j < out; ++j) {
      const float sw = int8_quantize_vector(W + size_t(j) * in, in, qw.data());
      int32_t acc = 0;
      for (int k = 0; k < in; ++k)
        acc += int32_t(qx[size_t(k)]) * int32_t(qw[size_t(k)]);
      y[size_t(r) * ldy + j] = int8_finish(acc, sx, sw, b, j, act);
    }
  }
}

} // namespace tarnn
