// The CUDA backend's --precision int8 around cuBLASLt's int8 GEMM (docs/SPEC.md, "int8 GEMMs";
// kernels/gemm_int8_ref.h is the definition): each row of a GEMM's input quantized with its own
// scale before the GEMM, and the GEMM's exact int32 sums scaled back to fp32 after it, bias and
// activation in the reference's order. These are the CPU twins; kernels/int8_rows.cu runs the same
// functions on the GPU, one block a row and one thread an output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gemm_int8_ref.h"

namespace tarnn {

// q [rows, in] and sx [rows]: each row of x [rows, in] quantized as int8_quantize_vector does.
inline void quantize_rows_int8_cpu(const float *x, int rows, int in, int8_t *q, float *sx) {
  for (int r = 0; r < rows; ++r)
    sx[r] = int8_quantize_vector(x + size_t(r) * in, in, q + size_t(r) * in);
}

// y [rows, out] = act(float(acc) * (sx[r] * sw[j]) + b[j]) (int8_finish; b may be null). acc and
// y may be the same memory: each element is read before it is written, by one thread.
inline void finish_int8_cpu(const int32_t *acc, const float *sx, const float *sw, const float *b,
                            int rows, int out, Act act, float *y) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      const size_t e = size_t(r) * out + j;
      y[e] = int8_finish(acc[e], sx[r], sw[j], b, j, act);
    }
}

} // namespace tarnn
