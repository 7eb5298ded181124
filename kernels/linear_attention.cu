// The fused linear-attention step (linear_attention.h): a block of 256 threads holds G = 256 /
// dpad (image, head) pairs, dpad = d_head rounded up to a warp. Thread j of a pair owns column j
// of S, so each i of the walk reads and writes one contiguous row of S per pair: the state
// streams through DRAM coalesced, once in and once out per step, which is the bound on the step
// (docs/CUDA.md). For the paper's d_head (kRegisterDHead) the column is held in registers, loaded
// at entry before q, k and v: the state's latency is hidden behind theirs and phi's.
#include <cmath>

#include "cuda_util.h"
#include "launch.h"
#include "linear_attention.h"
#include "round_bf16.h"

namespace tarnn {

namespace {

// DH > 0: d_head known at compile time (the paper's 32): the walk unrolls and the column of S
// lives in registers from entry to the end. F: how S is stored (state_format.h).
// A block is 256 threads (G pairs of dpad); 4 blocks per SM need at most 64 registers a thread
// (65 without the bound: 3 blocks, docs/CUDA.md); tests/cuda/registers_test.sh holds the budget.
template <int DH, StateFormat F>
__global__ void __launch_bounds__(256, 4)
    linear_attention_kernel(QkvIn qkv, void *state, float *att, int rows, int layer, int n_layers,
                            int n_heads, PhiMap m, const StepParams *p, uint16_t *att16) {
  const int d = DH > 0 ? DH : m.d, n = DH > 0 ? DH : m.features;
  const int t = StateTraits<F>::kScaled ? p->t : 0; // only a scaled format needs the position
  TARNN_DYNAMIC_SHARED(float, shared); // per pair: phi(q), phi(k), old z; F floats each
  const int g = threadIdx.y, j = threadIdx.x;
  const int64_t pair = int64_t(blockIdx.x) * blockDim.y + g;
  const bool active = pair < int64_t(rows) * n_heads && j < d;
  const int r = int(pair / n_heads), h = int(pair % n_heads);
  const int A = n_heads * d;
  float *fq = shared + size_t(g) * 3 * n, *fk = fq + n, *z_old = fk + n;
  void *S = nullptr;
  float *z = nullptr, v_j = 0.0f;
  ColumnOf<DH, F> col;
  if (active) {
    char *block =
        static_cast<char *>(state) + state_block_offset(r, layer, h, n_layers, n_heads, n, d, F);
    S = block;
    z = reinterpret_cast<float *>(block + state_s_bytes(n, d, F));
    if constexpr (DH > 0)
      col.load(j, S); // the longest wait: first
    attention_load<(DH > 0)>(j, qkv + size_t(r) * 3 * A, A, h, m, z, fq, fk, z_old, &v_j);
  }
  __syncthreads(); // every thread reaches it: inactive ones only skip the work
  if (!active)
    return;
  store_att(att, att16, size_t(r) * A + h * d + j,
            attention_phase2<DH, F>(j, d, n, v_j, fq, fk, z_old, col, S, z, t));
  if constexpr (DH > 0)
    col.store(j, S);
}

// The rows are consecutive positions of one image (a prefill): one block per head, thread j
// owning column j of that head's one state, the rows taken in order, each the step kernel's two
// phases. Position r's update must land before r + 1 reads z: a barrier after each phase. With
// DH > 0 the column stays in registers over all the rows: S is read once and written once.
template <int DH, StateFormat F>
__global__ void __launch_bounds__(256)
    linear_attention_positions_kernel(QkvIn qkv, void *state, float *att, int rows, int layer,
                                      int n_layers, int n_heads, PhiMap m, const StepParams *p,
                                      uint16_t *att16) {
  const int d = DH > 0 ? DH : m.d, n = DH > 0 ? DH : m.features;
  const int t0 = StateTraits<F>::kScaled ? p->t : 0; // row r is position t0 + r
  TARNN_DYNAMIC_SHARED(float, shared);               // phi(q), phi(k), old z; F floats each
  const int j = threadIdx.x, h = blockIdx.x;
  const bool active = j < d;
  const int A = n_heads * d;
  float *fq = shared, *fk = fq + n, *z_old = fk + n;
  char *block =
      static_cast<char *>(state) + state_block_offset(0, layer, h, n_layers, n_heads, n, d, F);
  void *S = block;
  float *z = reinterpret_cast<float *>(block + state_s_bytes(n, d, F));
  ColumnOf<DH, F> col;
  if constexpr (DH > 0)
    if (active)
      col.load(j, S);
  for (int r = 0; r < rows; ++r) {
    float v_j = 0.0f;
    if (active)
      attention_load<(DH > 0)>(j, qkv + size_t(r) * 3 * A, A, h, m, z, fq, fk, z_old, &v_j);
    __syncthreads();
    if (active)
      store_att(att, att16, size_t(r) * A + h * d + j,
                attention_phase2<DH, F>(j, d, n, v_j, fq, fk, z_old, col, S, z, t0 + r));
    __syncthreads(); // z and the shared rows are read again for r + 1
  }
  if constexpr (DH > 0)
    if (active)
      col.store(j, S);
}

// Launches the step kernel (or, with `positions`, the positions kernel) for format F.
template <StateFormat F>
void launch(QkvIn qkv, void *state, float *att, int rows, int layer, int n_layers, int n_heads,
            const PhiMap &m, const StepParams *p, cudaStream_t s, bool positions, uint16_t *att16) {
  const int d_head = m.d;
  const int dpad = (d_head + 31) / 32 * 32; // d_head <= 256 (Config::validate)
  const bool registers = register_path(m);
  if (positions) {
    const size_t smem = size_t(3) * m.features * sizeof(float);
    if (registers)
      TARNN_LAUNCH((linear_attention_positions_kernel<kRegisterDHead, F>), unsigned(n_heads),
                   unsigned(dpad), smem, s)
    (qkv, state, att, rows, layer, n_layers, n_heads, m, p, att16);
    else TARNN_LAUNCH((linear_attention_positions_kernel<0, F>), unsigned(n_heads), unsigned(dpad),
                      smem, s)(qkv, state, att, rows, layer, n_layers, n_heads, m, p, att16);
    launch_check("linear_attention_positions_kernel");
    return;
  }
  // pairs per block: 256 threads, and their phi(q), phi(k), z (3F floats each) in the 48 KB of
  // shared memory a launch gets without asking (F <= kMaxFeatures: 48 KB for one pair)
  const int G = std::max(1, std::min(256 / dpad, 49152 / (12 * m.features)));
  const int64_t pairs = int64_t(rows) * n_heads;
  const dim3 block(dpad, G);
  const unsigned blocks = unsigned((pairs + G - 1) / G);
  const size_t smem = size_t(G) * 3 * m.features * sizeof(float);
  if (registers)
    TARNN_LAUNCH((linear_attention_kernel<kRegisterDHead, F>), blocks, block, smem, s)
  (qkv, state, att, rows, layer, n_layers, n_heads, m, p, att16);
  else TARNN_LAUNCH((linear_attention_kernel<0, F>), blocks, block, smem,
                    s)(qkv, state, att, rows, layer, n_layers, n_heads, m, p, att16);
  launch_check("linear_attention_kernel");
}

} // namespace

void launch_linear_attention(const float *qkv, void *state, float *att, int rows, int layer,
                             int n_layers, int n_heads, const PhiMap &m, StateFormat f,
                             const StepParams *p, cudaStream_t s, bool positions, uint16_t *att16,
                             const uint16_t *qkv16) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const QkvIn in = qkv16 ? QkvIn{qkv16, true} : QkvIn{qkv, false};
  dispatch(f, [&](auto F) {
    launch<F>(in, state, att, rows, layer, n_layers, n_heads, m, p, s, positions, att16);
  });
}

} // namespace tarnn
