// One position of linear attention in RNN mode for every (image, head) of one layer (equations
// 16-20): phi of q and k, S += phi(k) v^T, z += phi(k), a = phi(q)^T S / (phi(q)^T z + eps).
// q, k and v arrive with their biases (the linear op before adds them). S is stored in the run's
// StateFormat (state_format.h), z in fp32; every cell is updated and read in fp32, then rounded
// once to the storage: the read-out uses the updated value before its rounding.
//
// The GPU gives each (image, head) d_head threads; thread j owns column j of S. Phase 1 puts
// phi(q), phi(k) and the old z in shared memory (F of each: thread j takes features j, j + d, ...
// of the layer's feature map, feature_map.h); phase 2 walks i ascending over the F rows through
// normaliser_cell and state_cell, the very calls and order of linear_attention_update, so each
// column comes out bit-identical to the CPU backend's (up to expf, cosf and sinf in phi). The CPU
// twin runs the same two phases thread by thread.
#pragma once

#include <cstddef>
#include <vector>

#include "feature_map.h"
#include "state_format.h"

namespace tarnn {

// q, k and v as an attention kernel reads them, rows [q | k | v]: the q,k,v GEMM's output in fp32,
// or in bf16 (its bits, where a bf16 GEMM writes them so: forward.h's LinearWeights::bf16_output)
// widened exactly to fp32, so phi and the state's arithmetic are fp32's either way. Indexed and
// offset as a float pointer is: one code path reads either.
struct QkvIn {
  const void *p = nullptr; // floats, or bf16 bits where `bf16`: one pointer, so a kernel that
  bool bf16 = false;       // holds it across a call keeps the register budget (registers_test.sh)
  TARNN_HD float operator[](size_t i) const {
    return bf16 ? from_bf16_bits(static_cast<const uint16_t *>(p)[i])
                : static_cast<const float *>(p)[i];
  }
  TARNN_HD QkvIn operator+(size_t n) const {
    return {static_cast<const char *>(p) + n * (bf16 ? 2 : 4), bf16};
  }
};

// Phase 1, thread j < d of head h of one row: qkv_row holds [q | k | v], A wide each (a float
// pointer or a QkvIn); features j, j + d, ... of phi(q), phi(k) and the old z. kElementwise: the
// map is elu + 1 or relu (F = d, feature j alone), compiled without the random-feature maps' code:
// the register path's kernels (register_path) stay within their 64 registers.
template <bool kElementwise = false, class Row>
TARNN_HD void attention_load(int j, Row qkv_row, int A, int h, const PhiMap &m, const float *z,
                             float *fq, float *fk, float *z_old, float *v_j) {
  const int d = m.d;
  const Row q = qkv_row + size_t(h * d), k = qkv_row + size_t(A + h * d);
  if constexpr (kElementwise) {
    fq[j] = phi_elementwise(m.kind, q[j]);
    fk[j] = phi_elementwise(m.kind, k[j]);
    z_old[j] = z[j];
  } else {
    for (int c = j; c < m.features; c += d) {
      fq[c] = phi_feature(m, q, c);
      fk[c] = phi_feature(m, k, c);
      z_old[c] = z[c];
    }
  }
  *v_j = qkv_row[size_t(2 * A + h * d + j)];
}

// Column j of S wherever phase 2 walks it: its thread's registers, or the state in memory. Each
// cell is read widened with the exponent it was stored with (e_in) and set rounded with the next
// (e_out), as the storage would hold it (state_format.h).
//
// In registers, for a d_head known at compile time (the kernels' register path): fp32 values, or
// a 16-bit format's bits two to a register, half the registers (the fp16 step kernel then keeps
// to 64 without spilling). Loaded at entry and stored at the end: with D known the GPU issues the
// loads before phase 1 waits on q, k and v, so the state's DRAM latency overlaps theirs (a warp's
// load reads one whole row of S).
template <int D, StateFormat F> struct RegisterColumn {
  using Storage = StorageOf<F>;
  static constexpr int kPerWord = int(4 / sizeof(Storage)); // elements a 32-bit register holds
  static constexpr bool kPacked = !kStoredAsFloat<F>;
  static constexpr unsigned kBits = 8u * unsigned(sizeof(Storage));
  static constexpr uint32_t kMask = uint32_t((uint64_t(1) << kBits) - 1);
  // narrower formats: element i in part i % kPerWord of bits[i / kPerWord]
  uint32_t bits[kPacked ? (D + kPerWord - 1) / kPerWord : 1];
  float value[kPacked ? 1 : D]; // fp32
  int e_in = 0, e_out = 0;

  TARNN_HD float get(int i) const {
    if constexpr (kPacked)
      return StateTraits<F>::widen(Storage(bits[i / kPerWord] >> (kBits * (i % kPerWord))), e_in);
    else
      return value[i];
  }
  TARNN_HD void set(int i, float x) {
    if constexpr (kPacked) {
      const unsigned shift = kBits * unsigned(i % kPerWord);
      bits[i / kPerWord] = (bits[i / kPerWord] & ~(kMask << shift)) |
                           uint32_t(StateTraits<F>::narrow(x, e_out)) << shift;
    } else {
      value[i] = x;
    }
  }
  TARNN_HD void load(int j, const void *S) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < D; ++i)
      if constexpr (kPacked) {
        const uint32_t h = static_cast<const Storage *>(S)[size_t(i) * D + j];
        bits[i / kPerWord] =
            i % kPerWord ? (bits[i / kPerWord] | h << (kBits * (i % kPerWord))) : h;
      } else {
        value[i] = static_cast<const float *>(S)[size_t(i) * D + j];
      }
  }
  TARNN_HD void store(int j, void *S) const {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < D; ++i)
      if constexpr (kPacked)
        static_cast<Storage *>(S)[size_t(i) * D + j] =
            Storage(bits[i / kPerWord] >> (kBits * (i % kPerWord)));
      else
        static_cast<float *>(S)[size_t(i) * D + j] = value[i];
  }
};

template <StateFormat F> struct MemoryColumn {
  void *S;
  int j, d, e_in, e_out;
  TARNN_HD float get(int i) const { return load_state<F>(S, size_t(i) * d + j, e_in); }
  TARNN_HD void set(int i, float x) { store_state<F>(S, size_t(i) * d + j, x, e_out); }
};

// Phase 2, thread j, over column j of S (F rows): each S_ij updated, read into the numerator,
// then set (to the storage's rounding); returns a_j and sets z_i for its features i = j, j + d,
// ... D > 0: F = d known at compile time, so the GPU unrolls the walk and a RegisterColumn stays
// in registers.
template <int D, class Column>
TARNN_HD float attention_walk(int j, int d_runtime, int features, float v_j, const float *fq,
                              const float *fk, const float *z_old, Column &col, float *z) {
  const int d = D > 0 ? D : d_runtime, n = D > 0 ? D : features;
  float num = 0.0f, den = 0.0f;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < n; ++i) {
    float z_i = z_old[i]; // every thread forms the same denominator, in the same order
    normaliser_cell(z_i, fk[i], fq[i], den);
    if (i % d == j)
      z[i] = z_i;
    float s = col.get(i);
    state_cell(s, fk[i], v_j, fq[i], num);
    col.set(i, s);
  }
  return attention_out(num, den);
}

// The paper's d_head: the kernels keep the column in registers for this size.
constexpr int kRegisterDHead = 32;

// The register column of a kernel instantiated for DH (0: unused, the memory path).
template <int DH, StateFormat F> using ColumnOf = RegisterColumn<(DH > 0 ? DH : 2), F>;

// Phase 2 of position t as the kernels run it, setting z at features j, j + d, ... and returning
// a_j: D > 0 (F = d = D), on the column in `col` (registers, as position t - 1 left them;
// col.store writes them back), else on S in memory (`col` unused).
template <int D, StateFormat F>
TARNN_HD float attention_phase2(int j, int d, int features, float v_j, const float *fq,
                                const float *fk, const float *z_old, ColumnOf<D, F> &col, void *S,
                                float *z, int t) {
  const int e_in = state_scale_exponent<F>(t - 1), e_out = state_scale_exponent<F>(t);
  if constexpr (D > 0) {
    col.e_in = e_in;
    col.e_out = e_out;
    return attention_walk<D>(j, D, D, v_j, fq, fk, z_old, col, z);
  } else {
    MemoryColumn<F> memory{S, j, d, e_in, e_out};
    return attention_walk<0>(j, d, features, v_j, fq, fk, z_old, memory, z);
  }
}

// One head of one image at position t with the state's write deferred over chunks of C positions
// (docs/SPEC.md, "The state in chunks"), on S_c0 already widened to fp32 (`S`, F x d, changed in
// place) and the stored z (`z`), with `buffer` the chunk's m = t - c0 positions before t widened
// to fp32: phi(k) [F] then v [d] each. Each cell gets the chunk's terms in position order, t's
// last, each added as state_cell adds it, then is read into the numerator: with C = 1, or S in
// fp32 for any C, the very operations of linear_attention_update. last (t ends its chunk): z is
// stored (S is the caller's to store, rounded once).
TARNN_HD void chunked_update(const float *fq, const float *fk, const float *v, float *S, float *z,
                             const float *buffer, float *out, int d, int n, int m, bool last) {
  const size_t entry = size_t(n) + size_t(d);
  float den = 0.0f;
  for (int j = 0; j < d; ++j)
    out[j] = 0.0f; // the numerators until the last loop
  for (int i = 0; i < n; ++i) {
    float z_i = z[i];
    for (int p = 0; p < m; ++p)
      z_i = z_i + buffer[size_t(p) * entry + size_t(i)];
    normaliser_cell(z_i, fk[i], fq[i], den);
    if (last)
      z[i] = z_i;
    float *row = S + size_t(i) * d;
    for (int p = 0; p < m; ++p) { // earlier positions first, each cell's sum in position order
      const float k = buffer[size_t(p) * entry + size_t(i)], *vp = buffer + size_t(p) * entry + n;
      for (int j = 0; j < d; ++j)
        row[j] = row[j] + k * vp[j];
    }
    for (int j = 0; j < d; ++j)
      state_cell(row[j], fk[i], v[j], fq[i], out[j]);
  }
  for (int j = 0; j < d; ++j)
    out[j] = attention_out(out[j], den);
}

// The same on the block's buffer as stored in format F (`buffer`; state_format.h: ChunkBuffer):
// its m entries widened into `scratch` (m (F + d) floats) first, and at a position that does not
// end its chunk phi(k_t) and v_t rounded into entry m after.
template <StateFormat F>
void chunked_update(const float *fq, const float *fk, const float *v, float *S, float *z,
                    void *buffer, float *scratch, float *out, int d, int n, int m, bool last) {
  const ChunkBuffer<F> b = chunk_buffer<F>(buffer);
  const int entry = n + d; // (C - 1) entries, far below 2^31 elements
  for (int c = 0; c < m * entry; ++c)
    scratch[c] = b[c];
  chunked_update(fq, fk, v, S, z, scratch, out, d, n, m, last);
  if (last)
    return;
  for (int i = 0; i < n; ++i)
    b.set(m * entry + i, fk[i]);
  for (int j = 0; j < d; ++j)
    b.set(m * entry + n + j, v[j]);
}

// The same on a head's state block as stored (state_format.h: S in format F, z, the buffer), the
// plain reference: S widened cell by cell into `wide` (F x d floats, then C - 1 entries' room for
// the buffer widened) with the exponent it was stored with, and rounded back once, with e(t),
// where t ends its chunk.
template <StateFormat F>
void chunked_attention_update(const float *fq, const float *fk, const float *v, void *block,
                              float *out, int d, int n, int t, int C, float *wide) {
  const int m = t % C;
  const bool last = m == C - 1;
  const size_t cells = size_t(n) * d;
  float *z = reinterpret_cast<float *>(static_cast<char *>(block) + state_s_bytes(n, d, F));
  const int e_in = stored_scale_exponent<F>(t - 1, C);
  for (size_t c = 0; c < cells; ++c)
    wide[c] = load_state<F>(block, c, e_in);
  chunked_update<F>(fq, fk, v, wide, z, z + n, wide + cells, out, d, n, m, last);
  if (last)
    for (size_t c = 0; c < cells; ++c)
      store_state<F>(block, c, wide[c], state_scale_exponent<F>(t));
}

// Whether a kernel may keep column j in registers: the paper's d_head and an elementwise map (S
// square, F = d).
TARNN_HD bool register_path(const PhiMap &m) { return m.d == kRegisterDHead && m.elementwise; }

// CPU twin in format F: qkv [rows, 3A], state for all layers, att [rows, A] for layer `layer`
// (its phi: m), at position t. With `positions` the rows are consecutive positions t, t + 1, ... of
// one image, walked in order through image 0's state (the GPU's positions kernel: one block per
// head, a loop over the rows). On the register path (register_path) it runs the kernels' way:
// every column loaded first, then phase 1, the walk over the copies, the columns stored back
// (once per row here; the positions kernel keeps them over all its rows, the same values).
template <StateFormat F>
void linear_attention_cpu(const float *qkv, void *state, float *att, int rows, int layer,
                          int n_layers, int n_heads, const PhiMap &m, int t, bool positions) {
  constexpr int R = kRegisterDHead;
  const int d = m.d, n = m.features, A = n_heads * d;
  const bool registers = register_path(m);
  std::vector<float> fq(n), fk(n), z_old(n), v(d);
  std::vector<RegisterColumn<R, F>> cols(registers ? R : 0);
  ColumnOf<0, F> unused; // the memory path's
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      const int at = positions ? t + r : t; // the row's position
      char *block = static_cast<char *>(state) +
                    state_block_offset(positions ? 0 : r, layer, h, n_layers, n_heads, n, d, F);
      void *S = block;
      float *z = reinterpret_cast<float *>(block + state_s_bytes(n, d, F));
      for (size_t j = 0; j < cols.size(); ++j)
        cols[j].load(int(j), S);
      for (int j = 0; j < d; ++j)
        registers ? attention_load<true>(j, qkv + size_t(r) * 3 * A, A, h, m, z, fq.data(),
                                         fk.data(), z_old.data(), &v[j])
                  : attention_load(j, qkv + size_t(r) * 3 * A, A, h, m, z, fq.data(), fk.data(),
                                   z_old.data(), &v[j]);
      float *out = att + size_t(r) * A + h * d;
      for (int j = 0; j < d; ++j)
        out[j] = registers ? attention_phase2<R, F>(j, d, n, v[j], fq.data(), fk.data(),
                                                    z_old.data(), cols[size_t(j)], S, z, at)
                           : attention_phase2<0, F>(j, d, n, v[j], fq.data(), fk.data(),
                                                    z_old.data(), unused, S, z, at);
      for (size_t j = 0; j < cols.size(); ++j)
        cols[j].store(int(j), S);
    }
}

inline void linear_attention_cpu(const float *qkv, void *state, float *att, int rows, int layer,
                                 int n_layers, int n_heads, const PhiMap &m, StateFormat f, int t,
                                 bool positions = false) {
  dispatch(f, [&](auto F) {
    linear_attention_cpu<F>(qkv, state, att, rows, layer, n_layers, n_heads, m, t, positions);
  });
}

} // namespace tarnn
