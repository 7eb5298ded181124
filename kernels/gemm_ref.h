// The plain reference GEMMs, one output element at a time: y = act(x W^T + b). What every fast
// GEMM is checked against and what the CUDA backend's CPU twin runs in cuBLAS's place.
//
// fp32: acc = fma(x_k, w_k, acc) over k = 0..in-1, then act(acc + b): the CPU's packed GEMM runs
// the same chain in every path (src/cpu/gemm.h), so the two agree to the bit.
// bf16: x and W rounded by bf16_bits, then per pair of k the chain of AVX512_BF16's vdpbf16ps:
// acc += x[k+1] w[k+1], then acc += x[k] w[k] (a product of two bf16 is exact in fp32; each sum
// rounds to nearest), then act(acc + b[j]) with b rounded to bf16 too (bf16_bias):
// src/cpu/gemm_bf16.h runs it too.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bias_act.h"
#include "tarnn_math.h"

namespace tarnn {

// The epilogue of every GEMM path: act(acc + b[j]), or act(acc) without a bias.
inline float linear_finish(float acc, const float *b, int j, Act act) {
  return activate(b ? acc + b[j] : acc, act);
}

// W is [out, in]; b may be null (no bias: the bare product, as cuBLAS leaves it).
inline void linear_forward_ref(const float *W, const float *b, int out, int in, const float *x,
                               int ldx, int rows, float *y, int ldy, Act act) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < in; ++k)
        acc = std::fma(x[size_t(r) * ldx + k], W[size_t(j) * in + k], acc);
      y[size_t(r) * ldy + j] = linear_finish(acc, b, j, act);
    }
}

inline float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16(v[k]) | bf16(v[k + 1]) << 16, 0 past n: two rounded elements as vdpbf16ps reads them.
inline uint32_t bf16_pair(const float *v, int k, int n) {
  const uint16_t lo = bf16_bits(v[k]);
  const uint16_t hi = k + 1 < n ? bf16_bits(v[k + 1]) : 0;
  return uint32_t(lo) | uint32_t(hi) << 16;
}

// One pair of k for one element: the instruction's order (the odd element first).
inline float bf16_pair_step(float acc, uint32_t x2, uint32_t w2) {
  acc = std::fma(from_bf16(uint16_t(x2 >> 16)), from_bf16(uint16_t(w2 >> 16)), acc);
  return std::fma(from_bf16(uint16_t(x2)), from_bf16(uint16_t(w2)), acc);
}

// A bf16 layer's bias, rounded to bf16 once as its W is (docs/PRECISION.md), as the float it
// rounds to: what every path adds. cuBLASLt adds a bias in its output's type only, and a GEMM that
// writes its output in bf16 (src/cuda/gemm.h) then adds a bf16 one.
inline float bf16_bias(float b) { return from_bf16(bf16_bits(b)); }

// y [n] as a bf16 output holds it (forward.h's LinearWeights::bf16_output: the GPU's GEMM writes
// it in bf16): each value rounded by bf16_bits and kept as the float it rounds to, the value its
// bf16 reader widens.
inline void round_to_bf16(float *y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    y[i] = from_bf16(bf16_bits(y[i]));
}

// W is [out, in] and b [out] in fp32 (both rounded here); b may be null.
inline void linear_forward_bf16_ref(const float *W, const float *b, int out, int in, const float *x,
                                    int ldx, int rows, float *y, int ldy, Act act) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < in; k += 2)
        acc = bf16_pair_step(acc, bf16_pair(x + size_t(r) * ldx, k, in),
                             bf16_pair(W + size_t(j) * in, k, in));
      const float bj = b ? bf16_bias(b[j]) : 0.0f;
      y[size_t(r) * ldy + j] = linear_finish(acc, b ? &bj : nullptr, 0, act);
    }
}

} // namespace tarnn
