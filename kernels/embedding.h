// The input vector e_t = [E[p_t] | P[t]] of every row (SPEC section 1): the learned value table and
// the stored positional row. One thread per element on the GPU, the same body in the CPU twin.
#pragma once

#include <cstddef>
#include <cstdint>

#include "step_params.h"

namespace tarnn {

TARNN_HD void embedding_element(float *x, const float *E, const float *P, const uint8_t *cur, int t,
                                int r, int i, int d_model) {
  const int H = d_model / 2;
  x[size_t(r) * d_model + i] = i < H ? E[size_t(cur[r]) * H + i] : P[size_t(t) * H + (i - H)];
}

// CPU twin: x [rows, d_model] from the bytes cur [rows] at position p->t; with `positions`, row r
// at position p->t + r (the rows are consecutive positions of one image: a prefill).
inline void embedding_cpu(float *x, const float *E, const float *P, const uint8_t *cur,
                          const StepParams *p, int rows, int d_model, bool positions = false) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < d_model; ++i)
      embedding_element(x, E, P, cur, p->t + (positions ? r : 0), r, i, d_model);
}

} // namespace tarnn
