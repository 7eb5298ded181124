// The CPU's per-row loops that are worth vectorising, each compiled for AVX-512, AVX2 and any
// x86-64 (TARNN_CPU_VARIANTS) and chosen at run time: every variant gives the same bits.
#include "../../kernels/linear_attention.h"
#include "../../kernels/residual_layernorm.h"
#include "cpu_features.h"
#include "cpu_ops.h"
#include "threads.h"

namespace tarnn {

namespace {

// linear_attention_step for every (row, head) of one layer. one_state: the rows are consecutive
// positions of ONE image (core/prefill.h), walked in row order through one state; else each row
// is an image with its own.
__attribute__((always_inline)) inline void attention_body(const float *qkv, float *state,
                                                          float *att, int rows, int layer,
                                                          int n_layers, int n_heads, int d,
                                                          bool one_state) {
  const int A = n_heads * d;
  for (int r = 0; r < rows; ++r) {
    const float *q = qkv + size_t(r) * 3 * A;
    for (int h = 0; h < n_heads; ++h) {
      float *S = state + state_block_offset(one_state ? 0 : r, layer, h, n_layers, n_heads, d);
      linear_attention_step(q + h * d, q + A + h * d, q + 2 * A + h * d, S, S + size_t(d) * d,
                            att + size_t(r) * A + h * d, d);
    }
  }
}

__attribute__((always_inline)) inline void
layernorm_rows_body(float *x, const float *y, const float *w, const float *b, int rows, int n) {
  residual_layernorm_cpu(x, y, w, b, rows, n);
}

TARNN_CPU_VARIANTS(attention,
                   (const float *qkv, float *state, float *att, int rows, int layer, int n_layers,
                    int n_heads, int d, bool one_state),
                   (qkv, state, att, rows, layer, n_layers, n_heads, d, one_state))
TARNN_CPU_VARIANTS(layernorm_rows,
                   (float *x, const float *y, const float *w, const float *b, int rows, int n),
                   (x, y, w, b, rows, n))

} // namespace

void linear_attention_rows(const float *qkv, float *state, float *att, int rows, int layer,
                           const Config &c) {
  static const auto run = cpu_pick(&attention_avx512, &attention_avx2, &attention_portable);
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, c.d_head, false);
}

void linear_attention_positions(const float *qkv, float *state, float *att, int rows, int layer,
                                const Config &c) {
  static const auto run = cpu_pick(&attention_avx512, &attention_avx2, &attention_portable);
  run(qkv, state, att, rows, layer, c.n_layers, c.n_heads, c.d_head, true);
}

void PrefillOps::linear(const CpuLinear &l, const float *x, float *y, int rows, Act act) {
  const int n = std::min(threads_, rows / 16); // at least 16 rows a thread, or one thread
  if (n <= 1)
    return CpuLinearOps<PrefillOps>::linear(l, x, y, rows, act);
  run_parallel(n, [&](int i) {
    const int first = rows * i / n, last = rows * (i + 1) / n;
    CpuLinearOps<PrefillOps>::linear(l, x + size_t(first) * l.in, y + size_t(first) * l.out,
                                     last - first, act);
  });
}

void residual_layernorm_rows(float *x, const float *y, const float *w, const float *b, int rows,
                             int n) {
  static const auto run =
      cpu_pick(&layernorm_rows_avx512, &layernorm_rows_avx2, &layernorm_rows_portable);
  run(x, y, w, b, rows, n);
}

} // namespace tarnn
