// x rounded to bfloat16 for a --precision bf16 GEMM: out[i] = bf16_bits(x[i]) (tarnn_math.h: to
// nearest even, NaN kept quiet, subnormals to a zero of their sign: vcvtne2ps2bf16's rule, which
// the CPU's GEMM uses). The CUDA backend rounds each GEMM's input with it before cuBLASLt reads
// it as CUDA_R_16BF; its weights are rounded once, on the host, by the same function.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tarnn_math.h"

namespace tarnn {

inline void round_bf16_cpu(const float *x, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = bf16_bits(x[i]);
}

// An attention output at `at` as its reader takes it: with att16, the bf16 the out-projection's
// bf16 GEMM reads (the bits this file's rounding pass would write), else fp32 into att. The
// attention kernels' one rule (linear_attention.cu, chunked_attention.cu).
TARNN_HD void store_att(float *att, uint16_t *att16, size_t at, float v) {
  if (att16)
    att16[at] = bf16_bits(v);
  else
    att[at] = v;
}

} // namespace tarnn
