// The CUDA backend's --precision int8 around cuBLASLt's int8 GEMM (docs/SPEC.md, "int8 GEMMs";
// kernels/gemm_int8_ref.h is the definition): each row of a GEMM's input quantized with its own
// scale before the GEMM, and the GEMM's exact int32 sums scaled back to fp32 after it, bias and
// activation in the reference's order. These are the CPU twins; kernels/int8_rows.cu runs the same
// functions on the GPU, one block a row and one thread an output, to the bit (nvcc --fmad=false:
// each multiply and add rounded alone), but for GELU, whose erff is CUDA's there: within 2 ulp of
// the host's, not its bits (test_kernels: int8_rows and int8_rows_gelu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gemm_int8_ref.h"

namespace tarnn {

// cuBLASLt's int8 GEMM (its IMMA kernels, on the column-major layouts the backend gives it) takes
// m and k, the outputs and the length of each sum, and the leading dimensions only in multiples
// of 4 (cublasLtMatmul's documentation; an H100 refused the small golden's 16 -> 54 layer). So the
// backend's int8 operands are stored padded: W [int8_padded(out), int8_padded(in)] and the
// quantized rows of x int8_padded(in) apart, zeros in the padding (they add 0 to every sum, which
// stays exact), and the int32 sums int8_padded(out) apart, the padding's never read.
constexpr int kInt8Multiple = 4;
constexpr int int8_padded(int n) { return (n + kInt8Multiple - 1) / kInt8Multiple * kInt8Multiple; }

// q [rows, ldq] and sx [rows]: each row of x [rows, in] quantized as int8_quantize_vector does,
// then zeros from `in` to ldq (>= in).
inline void quantize_rows_int8_cpu(const float *x, int rows, int in, int ldq, int8_t *q,
                                   float *sx) {
  for (int r = 0; r < rows; ++r) {
    sx[r] = int8_quantize_vector(x + size_t(r) * in, in, q + size_t(r) * ldq);
    for (int k = in; k < ldq; ++k)
      q[size_t(r) * ldq + k] = 0;
  }
}

// y [rows, out] = act(float(acc) * (sx[r] * sw[j]) + b[j]) (int8_finish; b may be null), acc's
// rows ldacc (>= out) apart. With ldacc == out, acc and y may be the same memory: each element is
// read before it is written, by one thread.
inline void finish_int8_cpu(const int32_t *acc, int ldacc, const float *sx, const float *sw,
                            const float *b, int rows, int out, Act act, float *y) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j)
      y[size_t(r) * out + j] = int8_finish(acc[size_t(r) * ldacc + j], sx[r], sw[j], b, j, act);
}

} // namespace tarnn
