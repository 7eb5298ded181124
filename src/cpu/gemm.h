// y = act(x W^T + b) over a batch of rows: the projections and the feed-forward of every step.
//
// Why not a BLAS: images must be byte-identical whatever --batch and --threads are, so each output
// element must not depend on how many rows share the call. Here every element is the same fused
// multiply-add chain acc = fma(x_k, w_k, acc) over k = 0..in-1, then act(acc + b), in every path:
// the AVX-512 kernel, its edge tiles, the portable kernel and the plain reference
// (kernels/gemm_ref.h) agree to the bit.
#pragma once

#include <vector>

#include "../../kernels/gemm_ref.h"
#include "tarnn/model.h"

namespace tarnn {

// W repacked into panels of kPanel outputs, k-major inside a panel, zero-padded: the kernel reads
// one contiguous 32-float line of W per k.
struct PackedLinear {
  static constexpr int kPanel = 32;
  int out = 0, in = 0;
  std::vector<float> w; // [ceil(out/32)][in][32]
  std::vector<float> b; // [out]
};

PackedLinear pack(const Linear &l);

// y[r * ldy + j] = act(sum_k x[r * ldx + k] W[j, k] + b[j]) for r < rows, j < out.
void linear_forward(const PackedLinear &l, const float *x, int ldx, int rows, float *y, int ldy,
                    Act act);

} // namespace tarnn
