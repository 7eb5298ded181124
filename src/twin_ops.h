// The CUDA backend's plan (step_plan.h) run on the CPU with each kernel's CPU twin and a plain
// GEMM: what the GPU computes, step for step, on host memory. With the GEMM as the CPU backend's
// fused multiply-add chain it must reproduce run_cpu to the bit, which the CPU tests check on
// machines without a GPU.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "../kernels/bias_act.h"
#include "../kernels/embedding.h"
#include "../kernels/linear_attention.h"
#include "../kernels/residual_layernorm.h"
#include "../kernels/sample_bytes.h"
#include "step_plan.h"

namespace tarnn {

struct TwinOps {
  const Config &c;
  const WeightPtrs &w;
  const StepBuffers &b;

  void embedding(float *x, const float *E, const float *P, const uint8_t *cur, const StepParams *p,
                 int rows, int d_model) {
    embedding_cpu(x, E, P, cur, p, rows, d_model);
  }
  // Y = X W^T, each element the chain acc = fma(x_k, w_k, acc), k ascending (gemm.h).
  void gemm(const float *W, const float *X, float *Y, int rows, int out, int in) {
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < out; ++j) {
        float acc = 0.0f;
        for (int k = 0; k < in; ++k)
          acc = std::fma(X[size_t(r) * in + k], W[size_t(j) * in + k], acc);
        Y[size_t(r) * out + j] = acc;
      }
  }
  void linear_attention(const float *qkv, const float *bias, float *state, float *att, int rows,
                        int layer, int n_layers, int n_heads, int d_head) {
    linear_attention_cpu(qkv, bias, state, att, rows, layer, n_layers, n_heads, d_head);
  }
  void bias_act(float *y, const float *bias, int rows, int n, Act a) {
    bias_act_cpu(y, bias, rows, n, a);
  }
  void residual_layernorm(float *x, const float *y, const float *bias, const float *nw,
                          const float *nb, int rows, int n) {
    residual_layernorm_cpu(x, y, bias, nw, nb, rows, n);
  }
  void sample_bytes(const float *o, int K, const uint8_t *given, const uint8_t *known, int T,
                    uint8_t *cur, uint8_t *out, double *log_prob, const StepParams *p, int rows) {
    sample_bytes_cpu(o, K, given, known, T, cur, out, log_prob, p, rows);
  }
  void advance_position(StepParams *p) { tarnn::advance_position(p); }

  void upload(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void download(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void download_columns(uint8_t *dst, size_t dpitch, const uint8_t *src, size_t spitch,
                        size_t width, size_t rows) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * dpitch, src + r * spitch, width);
  }
  void zero(void *p, size_t n) { std::memset(p, 0, n); }
  void steps(int rows, int count) {
    for (int i = 0; i < count; ++i)
      step_sequence(*this, c, w, b, rows);
  }
  void sync() {}
};

// run_cuda's plan on the CPU: a batch of `batch` images in one host allocation laid out as on
// the device.
inline void run_twin(const Model &m, const Rollout &job, int batch) {
  const Config &c = m.config;
  const BatchLayout layout =
      batch_layout(c, std::min<int64_t>(batch, std::max<int64_t>(job.count, 1)));
  std::vector<double> mem(layout.total / sizeof(double) + 1); // 8-byte aligned, like the device's
  const StepBuffers b = step_buffers(mem.data(), layout);
  const WeightPtrs w = weight_ptrs(m.weights, [](const std::vector<float> &v) { return v.data(); });
  TwinOps ops{c, w, b};
  rollout(ops, c, b, job, nullptr);
}

} // namespace tarnn
