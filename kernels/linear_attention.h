// One position of linear attention in RNN mode for every (image, head) of one layer (equations
// 16-20): phi of q and k, S += phi(k) v^T, z += phi(k), a = phi(q)^T S / (phi(q)^T z + eps), the
// state in fp32. q, k and v arrive with their biases (the linear op before adds them).
//
// The GPU gives each (image, head) d_head threads; thread j owns column j of S. Phase 1 puts
// phi(q), phi(k) and the old z in shared memory; phase 2 walks i ascending through
// normaliser_cell and state_cell, the very calls and order of linear_attention_step, so each
// column comes out bit-identical to the CPU backend's (up to expf in phi). The CPU twin runs the
// same two phases thread by thread.
#pragma once

#include <cstddef>
#include <vector>

#include "tarnn_math.h"

namespace tarnn {

// Floats before the state block of (image, layer, head): blocks of (d_head + 1) x d_head floats,
// S row-major then z, ordered image, layer, head (model/batch.h: every backend's layout). An
// image's blocks are contiguous, so a chunk's first n images are one contiguous range.
TARNN_HD size_t state_block_offset(int image, int layer, int head, int n_layers, int n_heads,
                                   int d_head) {
  return ((size_t(image) * n_layers + layer) * n_heads + head) * (size_t(d_head) + 1) * d_head;
}

// Phase 1, thread j < d of head h of one row: qkv_row holds [q | k | v], A wide each.
TARNN_HD void attention_load(int j, const float *qkv_row, int A, int h, int d, const float *z,
                             float *fq, float *fk, float *z_old, float *v_j) {
  const int c = h * d + j;
  fq[j] = phi(qkv_row[c]);
  fk[j] = phi(qkv_row[A + c]);
  z_old[j] = z[j];
  *v_j = qkv_row[2 * A + c];
}

// Phase 2, thread j, over column j of S wherever it lives: col[i * stride] is S[i][j] (the state
// itself, stride d, or the thread's registers, stride 1), updated in place; returns a_j and sets
// z_j. D > 0: d known at compile time, so the GPU unrolls the walk and `col` can be registers.
template <int D>
TARNN_HD float attention_walk(int j, int d_runtime, float v_j, const float *fq, const float *fk,
                              const float *z_old, float *col, int stride, float &z_j) {
  const int d = D > 0 ? D : d_runtime;
  float num = 0.0f, den = 0.0f;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < d; ++i) {
    float z_i = z_old[i]; // every thread forms the same denominator, in the same order
    normaliser_cell(z_i, fk[i], fq[i], den);
    if (i == j)
      z_j = z_i;
    state_cell(col[i * stride], fk[i], v_j, fq[i], num);
  }
  return attention_out(num, den);
}

// Phase 2 on the state in memory: column j of S updated in place, z_j, and a_j.
TARNN_HD float attention_column(int j, int d, float v_j, const float *fq, const float *fk,
                                const float *z_old, float *S, float *z) {
  float z_j = 0.0f;
  const float a = attention_walk<0>(j, d, v_j, fq, fk, z_old, S + j, d, z_j);
  z[j] = z_j;
  return a;
}

// Column j of S into `s` and back: with D known, the GPU loads the column into registers at
// entry, before phase 1 waits on q, k and v, so the state's DRAM latency overlaps theirs (each
// load instruction of a warp reads one whole 128-byte row of S), and stores it once at the end.
template <int D> TARNN_HD void load_column(int j, const float *S, float (&s)[D]) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < D; ++i)
    s[i] = S[size_t(i) * D + j];
}
template <int D> TARNN_HD void store_column(int j, const float (&s)[D], float *S) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < D; ++i)
    S[size_t(i) * D + j] = s[i];
}

// The paper's d_head: the kernels keep the column in registers for this size.
constexpr int kRegisterDHead = 32;

// Phase 2 as the kernels run it, setting z[j] and returning a_j: D > 0, on the column in `col`
// (registers; store_column writes it back), else on S in memory (`col` unused).
template <int D>
TARNN_HD float attention_phase2(int j, int d, float v_j, const float *fq, const float *fk,
                                const float *z_old, float *col, float *S, float *z) {
  if constexpr (D > 0) {
    float z_j = 0.0f;
    const float a = attention_walk<D>(j, D, v_j, fq, fk, z_old, col, 1, z_j);
    z[j] = z_j;
    return a;
  } else {
    return attention_column(j, d, v_j, fq, fk, z_old, S, z);
  }
}

// CPU twin: qkv [rows, 3A], state for all layers, att [rows, A] for layer `layer`. With
// `positions` the rows are consecutive positions of one image, walked in order through image 0's
// state (the GPU's positions kernel: one block per head, a loop over the rows). For d =
// kRegisterDHead it runs the kernels' register path: every column loaded first, then phase 1,
// the walk over the copies, the columns stored back (once per row here; the positions kernel
// keeps them over all its rows, the same values).
inline void linear_attention_cpu(const float *qkv, float *state, float *att, int rows, int layer,
                                 int n_layers, int n_heads, int d, bool positions = false) {
  constexpr int R = kRegisterDHead;
  const int A = n_heads * d;
  std::vector<float> fq(d), fk(d), z_old(d), v(d);
  struct Column {
    float s[R];
  };
  std::vector<Column> cols(d == R ? R : 0);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      float *S = state + state_block_offset(positions ? 0 : r, layer, h, n_layers, n_heads, d);
      float *z = S + size_t(d) * d;
      for (size_t j = 0; j < cols.size(); ++j)
        load_column<R>(int(j), S, cols[j].s);
      for (int j = 0; j < d; ++j)
        attention_load(j, qkv + size_t(r) * 3 * A, A, h, d, z, fq.data(), fk.data(), z_old.data(),
                       &v[j]);
      float *out = att + size_t(r) * A + h * d;
      for (int j = 0; j < d; ++j)
        out[j] = d == R ? attention_phase2<R>(j, d, v[j], fq.data(), fk.data(), z_old.data(),
                                              cols[size_t(j)].s, S, z)
                        : attention_phase2<0>(j, d, v[j], fq.data(), fk.data(), z_old.data(),
                                              nullptr, S, z);
      for (size_t j = 0; j < cols.size(); ++j)
        store_column<R>(int(j), cols[j].s, S);
    }
}

} // namespace tarnn
