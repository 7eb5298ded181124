// y = act(x W^T + b) with W, b and x rounded to bfloat16 and the products summed in fp32: the
// CPU's GEMM for --precision bf16.
//
// AVX512_BF16's vdpbf16ps does 32 products per instruction, twice the rate of fp32 FMAs. Its
// arithmetic per output lane and pair of k is acc += x[k+1] w[k+1], then acc += x[k] w[k]: a
// product of two bf16 is exact in fp32, each sum rounds to nearest. Every path here runs that
// chain (the portable one and the plain reference with two std::fma per pair), so they agree to
// the bit and a row never depends on which rows share the call, as in gemm.h. The plain reference
// and the shared pair arithmetic are kernels/gemm_ref.h's.
#pragma once

#include <cstdint>
#include <vector>

#include "../../kernels/gemm_ref.h"
#include "tarnn/model.h"

namespace tarnn {

// x2[r * ceil(in/2) + k/2] = bf16(x[r * ldx + k]) | bf16(x[r * ldx + k + 1]) << 16 (0 past `in`):
// a GEMM's input rounded once (tarnn_math.h's bf16_bits), with vcvtne2ps2bf16 where the CPU has it.
void round_to_bf16_pairs(const float *x, int ldx, int rows, int in, uint32_t *x2);

// AVX-512 with AVX512_BF16, and not refused by TARNN_NO_AVX512=1.
bool cpu_has_avx512_bf16();

// W as bf16 in panels of 32 outputs: for each pair of k, the 32 outputs' (w_k, w_k+1), the layout
// vdpbf16ps reads; zero-padded to whole panels and pairs.
struct PackedLinearBf16 {
  static constexpr int kPanel = 32;
  int out = 0, in = 0;
  std::vector<uint32_t> w; // [ceil(out/32)][ceil(in/2)][32]: bf16(w_k) | bf16(w_k+1) << 16
  std::vector<float> b;    // [out], rounded to bf16 (bf16_bias), held as fp32
};

PackedLinearBf16 pack_bf16(const Linear &l);

// y[r * ldy + j] = act(sum_k bf16(x[r * ldx + k]) bf16(W[j, k]) + bf16(b[j])), the chain above.
void linear_forward_bf16(const PackedLinearBf16 &l, const float *x, int ldx, int rows, float *y,
                         int ldy, Act act);

} // namespace tarnn
