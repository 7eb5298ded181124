// y = act(y + b) in place over [rows, n]: the epilogue of a GEMM that leaves the bare product
// (cuBLAS). Adding the bias here, as acc + b then act, rounds exactly as the CPU GEMM's epilogue.
#pragma once

#include <cstddef>

#include "tarnn/config.h"
#include "tarnn_math.h"

namespace tarnn {

TARNN_HD float activate(float y, Act a) {
  return a == Act::Relu ? relu(y) : a == Act::Gelu ? gelu(y) : y;
}

TARNN_HD void bias_act_element(float *y, const float *b, int n, int r, int j, Act a) {
  const size_t e = size_t(r) * n + j;
  y[e] = activate(y[e] + b[j], a);
}

inline void bias_act_cpu(float *y, const float *b, int rows, int n, Act a) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n; ++j)
      bias_act_element(y, b, n, r, j, a);
}

} // namespace tarnn
