// Linear attention on the CPU (cpu_ops.h), one loop compiled for three instruction sets and
// chosen at run time: the loop over a row of S vectorises, and each element's arithmetic is the
// same (no fused multiply-adds: -ffp-contract=off), so every build gives the same bits.
#include "../../kernels/linear_attention.h"
#include "cpu_features.h"
#include "cpu_ops.h"

namespace tarnn {

namespace {

__attribute__((always_inline)) inline void rows_body(const float *qkv, float *state, float *att,
                                                     int rows, int layer, int n_layers, int n_heads,
                                                     int d) {
  const int A = n_heads * d;
  for (int r = 0; r < rows; ++r) {
    const float *q = qkv + size_t(r) * 3 * A;
    for (int h = 0; h < n_heads; ++h) {
      float *S = state + state_block_offset(r, layer, h, n_layers, n_heads, d);
      linear_attention_step(q + h * d, q + A + h * d, q + 2 * A + h * d, S, S + size_t(d) * d,
                            att + size_t(r) * A + h * d, d);
    }
  }
}

void rows_portable(const float *qkv, float *state, float *att, int rows, int layer, int n_layers,
                   int n_heads, int d) {
  rows_body(qkv, state, att, rows, layer, n_layers, n_heads, d);
}

__attribute__((target("avx2"))) void rows_avx2(const float *qkv, float *state, float *att, int rows,
                                               int layer, int n_layers, int n_heads, int d) {
  rows_body(qkv, state, att, rows, layer, n_layers, n_heads, d);
}

__attribute__((target("avx512f"))) void rows_avx512(const float *qkv, float *state, float *att,
                                                    int rows, int layer, int n_layers, int n_heads,
                                                    int d) {
  rows_body(qkv, state, att, rows, layer, n_layers, n_heads, d);
}

} // namespace

void linear_attention_rows(const float *qkv, float *state, float *att, int rows, int layer,
                           const Config &c) {
  static const auto run = cpu_has_avx512()     ? &rows_avx512
                          : cpu_has_avx2_fma() ? &rows_avx2
                                               : &rows_portable;
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, c.d_head);
}

} // namespace tarnn
