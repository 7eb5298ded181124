// The attention's step with the state's write deferred over chunks of C positions
// (chunked_attention.h; TARNN_STATE_CHUNK > 1), laid out as linear_attention.cu's kernels: thread
// j of an (image, head) pair owns column j of S, the paper's d_head keeps it in registers. At a
// position that does not end its chunk S and z are read only, never written: the step's state
// traffic is S and z read plus the buffer's entries (C - 1 of F + d elements at most, in the
// state's storage), and S and z
// written once a chunk (docs/CUDA.md, the byte budget).
#include <algorithm>

#include "chunked_attention.h"
#include "cuda_util.h"
#include "launch.h"
#include "round_bf16.h"

namespace tarnn {

namespace {

// One position for every (image, head): linear_attention_kernel's blocks and register budget
// (tests/cuda/registers_test.sh), the chunk's phases (chunked_attention.h) in place of the step's.
template <int DH, StateFormat F>
__global__ void __launch_bounds__(256, 4)
    chunked_attention_kernel(QkvIn qkv, void *state, float *att, int rows, int layer, int n_layers,
                             int n_heads, PhiMap m, const StepParams *p, uint16_t *att16, int C) {
  const int d = DH > 0 ? DH : m.d, n = DH > 0 ? DH : m.features;
  const int t = p->t;                  // the place in the chunk, whatever the format
  TARNN_DYNAMIC_SHARED(float, shared); // per pair: phi(q), phi(k), z with the chunk's terms
  const int g = threadIdx.y, j = threadIdx.x;
  const int64_t pair = int64_t(blockIdx.x) * blockDim.y + g;
  const bool active = pair < int64_t(rows) * n_heads && j < d;
  const int r = int(pair / n_heads), h = int(pair % n_heads);
  const int A = n_heads * d;
  float *fq = shared + size_t(g) * 3 * n, *fk = fq + n, *z_old = fk + n;
  ChunkBlock b{};
  float v_j = 0.0f;
  ColumnOf<DH, F> col;
  if (active) {
    b = chunk_block(state, r, layer, h, n_layers, n_heads, n, d, F, C);
    attention_load<(DH > 0)>(j, qkv + size_t(r) * 3 * A, A, h, m, b.z, fq, fk, z_old, &v_j);
    chunk_load(j, d, n, chunk_place(t, C), chunk_buffer<F>(b.buffer), fk, v_j, z_old);
    if constexpr (kChunkRegisters<DH, F>)
      col.load(j, b.S);
  }
  __syncthreads(); // every thread reaches it: inactive ones only skip the work
  if (!active)
    return;
  store_att(att, att16, size_t(r) * A + h * d + j,
            chunked_phase2<DH, F>(j, d, n, v_j, fq, fk, z_old, b.buffer, col, b.S, b.z, t, C));
  if constexpr (kChunkRegisters<DH, F>)
    if (chunk_place(t, C).last)
      col.store(j, b.S);
}

// Consecutive positions of one image (a prefill), one block per head, the rows in order across
// the chunks' boundaries: a barrier after each phase, as linear_attention_positions_kernel. With
// DH > 0 the column is loaded at each row and stored at each chunk's last (an fp32 column gets
// the chunk's terms added in place, so it cannot stay in registers over a chunk as S_c0): a
// prefill's S is written once a chunk, as the steps', and read from cache in between.
template <int DH, StateFormat F>
__global__ void __launch_bounds__(256)
    chunked_attention_positions_kernel(QkvIn qkv, void *state, float *att, int rows, int layer,
                                       int n_layers, int n_heads, PhiMap m, const StepParams *p,
                                       uint16_t *att16, int C) {
  const int d = DH > 0 ? DH : m.d, n = DH > 0 ? DH : m.features;
  const int t0 = p->t;                 // row r is position t0 + r
  TARNN_DYNAMIC_SHARED(float, shared); // phi(q), phi(k), z with the chunk's terms
  const int j = threadIdx.x, h = blockIdx.x;
  const bool active = j < d;
  const int A = n_heads * d;
  float *fq = shared, *fk = fq + n, *z_old = fk + n;
  const ChunkBlock b = chunk_block(state, 0, layer, h, n_layers, n_heads, n, d, F, C);
  for (int r = 0; r < rows; ++r) {
    const ChunkPlace at = chunk_place(t0 + r, C);
    float v_j = 0.0f;
    ColumnOf<DH, F> col;
    if (active) {
      attention_load<(DH > 0)>(j, qkv + size_t(r) * 3 * A, A, h, m, b.z, fq, fk, z_old, &v_j);
      chunk_load(j, d, n, at, chunk_buffer<F>(b.buffer), fk, v_j, z_old);
      if constexpr (kChunkRegisters<DH, F>)
        col.load(j, b.S);
    }
    __syncthreads();
    if (active) {
      store_att(
          att, att16, size_t(r) * A + h * d + j,
          chunked_phase2<DH, F>(j, d, n, v_j, fq, fk, z_old, b.buffer, col, b.S, b.z, t0 + r, C));
      if constexpr (kChunkRegisters<DH, F>)
        if (at.last)
          col.store(j, b.S);
    }
    __syncthreads(); // z, the buffer and the shared rows are read again for r + 1
  }
}

// Launches the step kernel (or, with `positions`, the positions kernel) for format F: DH = the
// paper's d_head where the column stays in registers (chunk_registers), else the general one.
template <int DH, StateFormat F>
void launch_chunked(QkvIn qkv, void *state, float *att, int rows, int layer, int n_layers,
                    int n_heads, const PhiMap &m, const StepParams *p, cudaStream_t s,
                    bool positions, uint16_t *att16, int C) {
  const int dpad = (m.d + 31) / 32 * 32; // d_head <= 256 (Config::validate)
  if (positions) {
    const size_t smem = size_t(3) * m.features * sizeof(float);
    TARNN_LAUNCH((chunked_attention_positions_kernel<DH, F>), unsigned(n_heads), unsigned(dpad),
                 smem, s)
    (qkv, state, att, rows, layer, n_layers, n_heads, m, p, att16, C);
    launch_check("chunked_attention_positions_kernel");
    return;
  }
  // pairs per block as the step kernel's: the buffer is read from global memory, not shared
  const int G = std::max(1, std::min(256 / dpad, 49152 / (12 * m.features)));
  const int64_t pairs = int64_t(rows) * n_heads;
  const unsigned blocks = unsigned((pairs + G - 1) / G);
  const size_t smem = size_t(G) * 3 * m.features * sizeof(float);
  TARNN_LAUNCH((chunked_attention_kernel<DH, F>), blocks, dim3(dpad, G), smem, s)
  (qkv, state, att, rows, layer, n_layers, n_heads, m, p, att16, C);
  launch_check("chunked_attention_kernel");
}

} // namespace

void launch_chunked_attention(const float *qkv, void *state, float *att, int rows, int layer,
                              int n_layers, int n_heads, const PhiMap &m, StateFormat f,
                              const StepParams *p, cudaStream_t s, bool positions, uint16_t *att16,
                              int C, const uint16_t *qkv16) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const QkvIn in = qkv16 ? QkvIn{qkv16, true} : QkvIn{qkv, false}; // linear_attention.h
  dispatch(f, [&](auto F) {
    if constexpr (kChunkRegisters<kRegisterDHead, F>)
      if (chunk_registers(m, F)) {
        launch_chunked<kRegisterDHead, F>(in, state, att, rows, layer, n_layers, n_heads, m, p, s,
                                          positions, att16, C);
        return;
      }
    launch_chunked<0, F>(in, state, att, rows, layer, n_layers, n_heads, m, p, s, positions, att16,
                         C);
  });
}

} // namespace tarnn
