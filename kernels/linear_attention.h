// One position of linear attention in RNN mode for every (image, head) of one layer (equations
// 16-20): phi of q and k, S += phi(k) v^T, z += phi(k), a = phi(q)^T S / (phi(q)^T z + eps).
// q, k and v arrive with their biases (the linear op before adds them). S is stored in the run's
// StateFormat (state_format.h), z in fp32; every cell is updated and read in fp32, then rounded
// once to the storage: the read-out uses the updated value before its rounding.
//
// The GPU gives each (image, head) d_head threads; thread j owns column j of S. Phase 1 puts
// phi(q), phi(k) and the old z in shared memory; phase 2 walks i ascending through
// normaliser_cell and state_cell, the very calls and order of linear_attention_step, so each
// column comes out bit-identical to the CPU backend's (up to expf in phi). The CPU twin runs the
// same two phases thread by thread.
#pragma once

#include <cstddef>
#include <vector>

#include "state_format.h"

namespace tarnn {

// Phase 1, thread j < d of head h of one row: qkv_row holds [q | k | v], A wide each.
TARNN_HD void attention_load(int j, const float *qkv_row, int A, int h, int d, const float *z,
                             float *fq, float *fk, float *z_old, float *v_j) {
  const int c = h * d + j;
  fq[j] = phi(qkv_row[c]);
  fk[j] = phi(qkv_row[A + c]);
  z_old[j] = z[j];
  *v_j = qkv_row[2 * A + c];
}

// Column j of S wherever phase 2 walks it: a thread's registers (the values widened, each
// rounded to format F as it is set, as the storage would hold it), or the state in memory. The
// exponents: what S was stored with (e_in, read) and will be (e_out, set): state_format.h.
template <StateFormat F> struct RegisterColumn {
  float *s;
  int e_out;
  TARNN_HD float get(int i) const { return s[i]; }
  TARNN_HD void set(int i, float x) const { s[i] = quantize<F>(x, e_out); }
};
template <StateFormat F> struct MemoryColumn {
  void *S;
  int j, d, e_in, e_out;
  TARNN_HD float get(int i) const { return load_state<F>(S, size_t(i) * d + j, e_in); }
  TARNN_HD void set(int i, float x) const { store_state<F>(S, size_t(i) * d + j, x, e_out); }
};

// Phase 2, thread j, over column j of S: each S_ij updated, read into the numerator, then set (to
// the storage's rounding); returns a_j and sets z_j. D > 0: d known at compile time, so the GPU
// unrolls the walk and a RegisterColumn stays in registers.
template <int D, class Column>
TARNN_HD float attention_walk(int j, int d_runtime, float v_j, const float *fq, const float *fk,
                              const float *z_old, const Column &col, float &z_j) {
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
    float s = col.get(i);
    state_cell(s, fk[i], v_j, fq[i], num);
    col.set(i, s);
  }
  return attention_out(num, den);
}

// Column j of S into registers (widened) and back (rounded: exact, the values are quantized):
// with D known, the GPU loads the column at entry, before phase 1 waits on q, k and v, so the
// state's DRAM latency overlaps theirs (each load instruction of a warp reads one whole row of
// S), and stores it once at the end.
template <int D, StateFormat F>
TARNN_HD void load_column(int j, const void *S, float (&s)[D], int e) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < D; ++i)
    s[i] = load_state<F>(S, size_t(i) * D + j, e);
}
template <int D, StateFormat F>
TARNN_HD void store_column(int j, const float (&s)[D], void *S, int e) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < D; ++i)
    store_state<F>(S, size_t(i) * D + j, s[i], e);
}

// The paper's d_head: the kernels keep the column in registers for this size.
constexpr int kRegisterDHead = 32;

// Phase 2 of position t as the kernels run it, setting z[j] and returning a_j: D > 0, on the
// column in `col` (registers, as position t - 1 left them; store_column writes them back), else
// on S in memory (`col` unused).
template <int D, StateFormat F>
TARNN_HD float attention_phase2(int j, int d, float v_j, const float *fq, const float *fk,
                                const float *z_old, float *col, void *S, float *z, int t) {
  const int e_in = state_scale_exponent(F, t - 1), e_out = state_scale_exponent(F, t);
  float z_j = 0.0f;
  float a;
  if constexpr (D > 0)
    a = attention_walk<D>(j, D, v_j, fq, fk, z_old, RegisterColumn<F>{col, e_out}, z_j);
  else
    a = attention_walk<0>(j, d, v_j, fq, fk, z_old, MemoryColumn<F>{S, j, d, e_in, e_out}, z_j);
  z[j] = z_j;
  return a;
}

// CPU twin in format F: qkv [rows, 3A], state for all layers, att [rows, A] for layer `layer`, at
// position t. With `positions` the rows are consecutive positions t, t + 1, ... of one image,
// walked in order through image 0's state (the GPU's positions kernel: one block per head, a loop
// over the rows). For d =
// kRegisterDHead it runs the kernels' register path: every column loaded first, then phase 1,
// the walk over the copies, the columns stored back (once per row here; the positions kernel
// keeps them over all its rows, the same values).
template <StateFormat F>
void linear_attention_cpu(const float *qkv, void *state, float *att, int rows, int layer,
                          int n_layers, int n_heads, int d, int t, bool positions) {
  constexpr int R = kRegisterDHead;
  const int A = n_heads * d;
  std::vector<float> fq(d), fk(d), z_old(d), v(d);
  struct Column {
    float s[R];
  };
  std::vector<Column> cols(d == R ? R : 0);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      const int at = positions ? t + r : t; // the row's position
      char *block = static_cast<char *>(state) +
                    state_block_offset(positions ? 0 : r, layer, h, n_layers, n_heads, d, F);
      void *S = block;
      float *z = reinterpret_cast<float *>(block + state_s_bytes(d, F));
      for (size_t j = 0; j < cols.size(); ++j)
        load_column<R, F>(int(j), S, cols[j].s, state_scale_exponent(F, at - 1));
      for (int j = 0; j < d; ++j)
        attention_load(j, qkv + size_t(r) * 3 * A, A, h, d, z, fq.data(), fk.data(), z_old.data(),
                       &v[j]);
      float *out = att + size_t(r) * A + h * d;
      for (int j = 0; j < d; ++j)
        out[j] = d == R ? attention_phase2<R, F>(j, d, v[j], fq.data(), fk.data(), z_old.data(),
                                                 cols[size_t(j)].s, S, z, at)
                        : attention_phase2<0, F>(j, d, v[j], fq.data(), fk.data(), z_old.data(),
                                                 nullptr, S, z, at);
      for (size_t j = 0; j < cols.size(); ++j)
        store_column<R, F>(int(j), cols[j].s, S, state_scale_exponent(F, at));
    }
}

inline void linear_attention_cpu(const float *qkv, void *state, float *att, int rows, int layer,
                                 int n_layers, int n_heads, int d, StateFormat f, int t,
                                 bool positions = false) {
  switch (f) {
  case StateFormat::Fp32:
    return linear_attention_cpu<StateFormat::Fp32>(qkv, state, att, rows, layer, n_layers, n_heads,
                                                   d, t, positions);
  case StateFormat::Fp16:
    return linear_attention_cpu<StateFormat::Fp16>(qkv, state, att, rows, layer, n_layers, n_heads,
                                                   d, t, positions);
  case StateFormat::Bf16:
    return linear_attention_cpu<StateFormat::Bf16>(qkv, state, att, rows, layer, n_layers, n_heads,
                                                   d, t, positions);
  }
}

} // namespace tarnn
