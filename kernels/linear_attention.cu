// The fused linear-attention step (linear_attention.h): a block of 256 threads holds G = 256 /
// dpad (image, head) pairs, dpad = d_head rounded up to a warp. Thread j of a pair owns column j
// of S, so each i of the walk reads and writes one contiguous row of S per pair: the state
// streams through DRAM coalesced, once in and once out per step, which is the bound on the step
// (docs/CUDA.md).
#include <cmath>

#include "../src/cuda_backend.h"
#include "cuda_util.h"
#include "launch.h"
#include "linear_attention.h"

namespace tarnn {

namespace {

// DH > 0: d_head known at compile time (the paper's 32), so the walk over i unrolls.
template <int DH>
__global__ void linear_attention_kernel(const float *qkv, const float *bias, float *state,
                                        float *att, int rows, int layer, int n_layers, int n_heads,
                                        int d_runtime) {
  const int d = DH > 0 ? DH : d_runtime;
  extern __shared__ float shared[]; // per pair: phi(q), phi(k), old z; d floats each
  const int g = threadIdx.y, j = threadIdx.x;
  const int64_t pair = int64_t(blockIdx.x) * blockDim.y + g;
  const bool active = pair < int64_t(rows) * n_heads && j < d;
  const int r = int(pair / n_heads), h = int(pair % n_heads);
  const int A = n_heads * d;
  float *fq = shared + size_t(g) * 3 * d, *fk = fq + d, *z_old = fk + d;
  float *S = nullptr, *z = nullptr, v_j = 0.0f;
  if (active) {
    S = state + state_block_offset(r, layer, h, n_layers, n_heads, d);
    z = S + size_t(d) * d;
    attention_load(j, qkv + size_t(r) * 3 * A, bias, A, h, d, z, fq, fk, z_old, &v_j);
  }
  __syncthreads(); // every thread reaches it: inactive ones only skip the work
  if (active)
    att[size_t(r) * A + h * d + j] = attention_column(j, d, v_j, fq, fk, z_old, S, z);
}

} // namespace

void launch_linear_attention(const float *qkv, const float *bias, float *state, float *att,
                             int rows, int layer, int n_layers, int n_heads, int d_head,
                             cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const int dpad = (d_head + 31) / 32 * 32; // d_head <= 256 (Config::validate)
  const int G = std::max(1, 256 / dpad);
  const int64_t pairs = int64_t(rows) * n_heads;
  const dim3 block(dpad, G);
  const unsigned blocks = unsigned((pairs + G - 1) / G);
  const size_t smem = size_t(G) * 3 * d_head * sizeof(float);
  if (d_head == 32)
    linear_attention_kernel<32>
        <<<blocks, block, smem, s>>>(qkv, bias, state, att, rows, layer, n_layers, n_heads, d_head);
  else
    linear_attention_kernel<0>
        <<<blocks, block, smem, s>>>(qkv, bias, state, att, rows, layer, n_layers, n_heads, d_head);
  launch_check("linear_attention_kernel");
}

// Three steps of layer 1 of a 2-layer state, from a random nonzero state: outputs and the whole
// state against the twin. phi's expf may differ in the last bit from the host's, nothing else.
KernelCheck check_linear_attention_kernel(int d) {
  const int rows = 9, n_layers = 2, n_heads = 3, A = n_heads * d, layer = 1, steps = 3;
  const size_t state_n = state_block_offset(rows, 0, 0, n_layers, n_heads, d);
  std::vector<float> state = random_floats(state_n, 10, 0.0f, 0.5f);
  const std::vector<float> bias = random_floats(3 * A, 11, -0.5f, 0.5f);
  DeviceArray<float> dstate(state), dbias(bias), datt(size_t(rows) * A);
  KernelCheck k{"linear_attention d_head " + std::to_string(d), 0, 2e-5, 0,
                "rows 9, 2 layers, 3 heads, 3 steps; relative to max(1, |value|)"};
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> qkv = random_floats(size_t(rows) * 3 * A, 20 + step, -2.0f, 2.0f);
    DeviceArray<float> dqkv(qkv);
    launch_linear_attention(dqkv.get(), dbias.get(), dstate.get(), datt.get(), rows, layer,
                            n_layers, n_heads, d, nullptr);
    std::vector<float> att(size_t(rows) * A);
    linear_attention_cpu(qkv.data(), bias.data(), state.data(), att.data(), rows, layer, n_layers,
                         n_heads, d);
    auto compare = [&](const std::vector<float> &got, const std::vector<float> &want) {
      for (size_t i = 0; i < want.size(); ++i) {
        const double scale = std::max(1.0, std::fabs(double(want[i])));
        k.max_error = std::max(k.max_error, std::fabs(double(got[i]) - want[i]) / scale);
      }
      k.compared += int64_t(want.size());
    };
    compare(datt.download(), att);
    compare(dstate.download(), state);
  }
  return k;
}

} // namespace tarnn
