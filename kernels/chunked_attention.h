// The attention kernels' step with the state's write deferred over chunks of C positions
// (docs/SPEC.md, "The state in chunks"; TARNN_STATE_CHUNK): position t reads S and z as stored
// after the chunk's start c0 and adds the chunk's own terms from the block's buffer (phi(k_p),
// v_p of its positions before t, in the state's storage: state_format.h, BufferOf), but writes
// neither S nor z unless t ends its chunk; else only its own buffer entry. Per cell the sums of
// chunked_update, in its order, so every column comes out bit-identical to the CPU backend's
// chunked path (up to expf, cosf and sinf in phi).
//
// The GPU runs it as linear_attention.h's two phases, thread j owning column j of S: phase 1 is
// attention_load, then chunk_load (z's chunk terms summed into z_old, t's entry written at a
// non-last position); phase 2 is chunked_walk (the buffer's terms into each cell read, the cell
// set to the storage only at the chunk's last position). The CPU twin, chunked_attention_cpu, runs
// the same phases thread by thread.
#pragma once

#include <vector>

#include "linear_attention.h"

namespace tarnn {

// Position t's place in its chunk of C: m = t % C earlier positions in the buffer; last: t ends
// the chunk (S and z stored).
struct ChunkPlace {
  int m;
  bool last;
};
TARNN_HD ChunkPlace chunk_place(int t, int C) { return {t % C, t % C == C - 1}; }

// Phase 1's chunk part, thread j < d of one (image, head) after attention_load: z_old at its
// features c = j, j + d, ... gets the chunk's terms of z in position order (chunked_update's z_i),
// and at a non-last position t's entry of the buffer (phi(k_t) then v_t, F + d elements) is
// written, rounded to the buffer's storage. buffer: the block's, after z.
template <StateFormat F>
TARNN_HD void chunk_load(int j, int d, int features, ChunkPlace at, ChunkBuffer<F> buffer,
                         const float *fk, float v_j, float *z_old) {
  // (C - 1) entries, far below 2^31 elements: read with int indices, written with size_t ones (the
  // arrangement that keeps every chunked kernel within its registers, unspilled: kernel_registers)
  const size_t entry = size_t(features) + size_t(d);
  for (int c = j; c < features; c += d) {
    float z_c = z_old[c];
    for (int p = 0; p < at.m; ++p)
      z_c = z_c + buffer[p * int(entry) + c];
    z_old[c] = z_c;
    if (!at.last)
      buffer.set(size_t(at.m) * entry + size_t(c), fk[c]);
  }
  if (!at.last)
    buffer.set(size_t(at.m) * entry + size_t(features) + size_t(j), v_j);
}

// Whether the chunked kernels keep column j in registers (D > 0, the paper's d_head): in a 16-bit
// format only, its bits packed two to a register. An fp32 column would take 32 of the step
// kernel's 64 registers and spill beside the chunk's loop, so in fp32 the kernels run their
// general path (the walk a loop reading S's rows from memory: the same reads as a register load,
// issued in the walk).
template <int D, StateFormat F> constexpr bool kChunkRegisters = D > 0 && !kStoredAsFloat<F>;
// Whether the chunked kernels run the register path (DH = kRegisterDHead) for map m in format f:
// the step's register path (register_path) in a 16-bit format; fp32 takes the general kernels.
TARNN_HD bool chunk_registers(const PhiMap &m, StateFormat f) {
  return register_path(m) && state_element_size(f) < 4;
}

// Phase 2, thread j, over column j of S as stored at the chunk's start (col.get: widened with
// stored_scale_exponent(t - 1, C)): each cell plus the buffer's terms in position order, then
// state_cell's (t's term, the numerator); the cell set (rounded to the storage) and z_i stored
// only at the chunk's last position (kLast: a walk of its own, so elsewhere a cell read is dead
// once used). The buffer's entries read widened to fp32. Returns a_j. D > 0: F = d = D known at
// compile time.
template <int D, bool kLast, class Column, class Buffer>
TARNN_HD float chunked_walk(int j, int d_runtime, int features, float v_j, const float *fq,
                            const float *fk, const float *z_old, Buffer buffer, ChunkPlace at,
                            Column &col, float *z) {
  const int d = D > 0 ? D : d_runtime, n = D > 0 ? D : features;
  const int entry = n + d; // a block's buffer: (C - 1) entries, far below 2^31 elements
  float num = 0.0f, den = 0.0f;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int i = 0; i < n; ++i) {
    float z_i = z_old[i]; // z_c0 and the chunk's terms (chunk_load): every thread the same
    normaliser_cell(z_i, fk[i], fq[i], den);
    if (kLast && i % d == j)
      z[i] = z_i;
    float s = col.get(i);
#ifdef __CUDA_ARCH__
#pragma unroll 1 // a loop per cell: unrolled with i's, m's remainders would spill
#endif
    for (int p = 0; p < at.m; ++p) // earlier positions first, as chunked_update
      s = s + buffer[p * entry + i] * buffer[p * entry + n + j];
    state_cell(s, fk[i], v_j, fq[i], num);
    if constexpr (kLast)
      col.set(i, s);
  }
  return attention_out(num, den);
}

// Phase 2 of position t with the write deferred over chunks of C: on the column in `col` where
// kChunkRegisters (col.store writes it back, the caller's at the chunk's last position), else on
// S in memory (`col` unused).
template <int D, StateFormat F>
TARNN_HD float chunked_phase2(int j, int d, int features, float v_j, const float *fq,
                              const float *fk, const float *z_old, void *buffer_bytes,
                              ColumnOf<D, F> &col, void *S, float *z, int t, int C) {
  const ChunkPlace at = chunk_place(t, C);
  const ChunkBuffer<F> buffer = chunk_buffer<F>(buffer_bytes);
  const int e_in = stored_scale_exponent<F>(t - 1, C), e_out = state_scale_exponent<F>(t);
  if constexpr (kChunkRegisters<D, F>) {
    col.e_in = e_in;
    col.e_out = e_out;
    return at.last ? chunked_walk<D, true>(j, D, D, v_j, fq, fk, z_old, buffer, at, col, z)
                   : chunked_walk<D, false>(j, D, D, v_j, fq, fk, z_old, buffer, at, col, z);
  } else {
    static_assert(D == 0, "the register path's kernels keep their column in registers");
    MemoryColumn<F> memory{S, j, d, e_in, e_out};
    return at.last
               ? chunked_walk<0, true>(j, d, features, v_j, fq, fk, z_old, buffer, at, memory, z)
               : chunked_walk<0, false>(j, d, features, v_j, fq, fk, z_old, buffer, at, memory, z);
  }
}

// One (image, head) block's parts (state_format.h, with the chunk's buffer): S, z, the buffer
// (chunk_buffer<F> reads it).
struct ChunkBlock {
  void *S;
  float *z;
  void *buffer;
};
TARNN_HD ChunkBlock chunk_block(void *state, int image, int layer, int head, int n_layers,
                                int n_heads, int features, int d, StateFormat f, int C) {
  char *block = static_cast<char *>(state) +
                state_block_offset(image, layer, head, n_layers, n_heads, features, d, f, C);
  float *z = reinterpret_cast<float *>(block + state_s_bytes(features, d, f));
  return {block, z, z + features};
}

// CPU twin of the chunked kernels (chunked_attention.cu), as linear_attention_cpu is of the step's:
// qkv [rows, 3A], state laid out with the chunk's buffer, att [rows, A], at position t (with
// `positions`: rows t, t + 1, ... of image 0, in order). Where the kernels keep the columns in
// registers (chunk_registers) they are loaded after phase 1 and stored back only where the row's
// position ends its chunk; the positions kernel does so row by row too.
template <StateFormat F>
void chunked_attention_cpu(const float *qkv, void *state, float *att, int rows, int layer,
                           int n_layers, int n_heads, const PhiMap &m, int t, bool positions,
                           int C) {
  constexpr int R = kRegisterDHead;
  const int d = m.d, n = m.features, A = n_heads * d;
  const bool registers = chunk_registers(m, F);
  std::vector<float> fq(n), fk(n), z_old(n), v(d);
  std::vector<RegisterColumn<R, F>> cols(registers ? R : 0);
  ColumnOf<0, F> unused; // the memory path's
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      const int at = positions ? t + r : t; // the row's position
      const ChunkBlock b =
          chunk_block(state, positions ? 0 : r, layer, h, n_layers, n_heads, n, d, F, C);
      const float *row = qkv + size_t(r) * 3 * A;
      for (int j = 0; j < d; ++j) {
        registers ? attention_load<true>(j, row, A, h, m, b.z, fq.data(), fk.data(), z_old.data(),
                                         &v[size_t(j)])
                  : attention_load(j, row, A, h, m, b.z, fq.data(), fk.data(), z_old.data(),
                                   &v[size_t(j)]);
        chunk_load(j, d, n, chunk_place(at, C), chunk_buffer<F>(b.buffer), fk.data(), v[size_t(j)],
                   z_old.data());
      }
      for (size_t j = 0; j < cols.size(); ++j)
        cols[j].load(int(j), b.S);
      float *out = att + size_t(r) * A + h * d;
      for (int j = 0; j < d; ++j) {
        if constexpr (kChunkRegisters<R, F>)
          if (registers) {
            out[j] = chunked_phase2<R, F>(j, d, n, v[size_t(j)], fq.data(), fk.data(), z_old.data(),
                                          b.buffer, cols[size_t(j)], b.S, b.z, at, C);
            continue;
          }
        out[j] = chunked_phase2<0, F>(j, d, n, v[size_t(j)], fq.data(), fk.data(), z_old.data(),
                                      b.buffer, unused, b.S, b.z, at, C);
      }
      if (chunk_place(at, C).last)
        for (size_t j = 0; j < cols.size(); ++j)
          cols[j].store(int(j), b.S);
    }
}

inline void chunked_attention_cpu(const float *qkv, void *state, float *att, int rows, int layer,
                                  int n_layers, int n_heads, const PhiMap &m, StateFormat f, int t,
                                  bool positions, int C) {
  dispatch(f, [&](auto F) {
    chunked_attention_cpu<F>(qkv, state, att, rows, layer, n_layers, n_heads, m, t, positions, C);
  });
}

} // namespace tarnn
