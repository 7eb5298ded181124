// The CUDA backend's work, written once over an `Ops` policy: the launch sequence of one step and
// the rollout around it (chunks of the batch, teacher forcing, copies in and out). The CUDA
// backend instantiates it with kernels and cuBLAS on device pointers (cuda_backend.cu); the CPU
// tests instantiate it with the kernels' CPU twins on host memory (twin_ops.h), so the wiring of
// every buffer, bias and position is checked against the CPU backend on any machine.
//
// Ops provides the step's operations
//   embedding, gemm (Y = X W^T, no bias), linear_attention, bias_act, residual_layernorm,
//   sample_bytes, advance_position
// and the rollout's
//   upload, download, download_columns, zero, steps(rows, count), sync.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "../kernels/bias_act.h"
#include "../kernels/step_params.h"
#include "config.h"
#include "cuda_plan.h"
#include "engine.h"
#include "model.h"

namespace tarnn {

// Where each weight tensor is, in the backend's memory (PyTorch layout, [out, in]).
struct LayerPtrs {
  const float *qkv_w, *qkv_b, *out_w, *out_b, *ff1_w, *ff1_b, *ff2_w, *ff2_b;
  const float *norm1_w, *norm1_b, *norm2_w, *norm2_b;
};

struct WeightPtrs {
  const float *value_embedding, *pos;
  std::vector<LayerPtrs> layers;
  const float *final_w, *final_b, *predictor_w, *predictor_b;
};

// `place(vector)` returns where that tensor lives (host: its data; device: its copy).
template <class Place> WeightPtrs weight_ptrs(const Weights &W, Place &&place) {
  WeightPtrs p;
  p.value_embedding = place(W.value_embedding);
  p.pos = place(W.pos);
  for (const LayerWeights &l : W.layers)
    p.layers.push_back(LayerPtrs{place(l.qkv.w), place(l.qkv.b), place(l.out.w), place(l.out.b),
                                 place(l.ff1.w), place(l.ff1.b), place(l.ff2.w), place(l.ff2.b),
                                 place(l.norm1.w), place(l.norm1.b), place(l.norm2.w),
                                 place(l.norm2.b)});
  p.final_w = place(W.final_norm.w);
  p.final_b = place(W.final_norm.b);
  p.predictor_w = place(W.predictor.w);
  p.predictor_b = place(W.predictor.b);
  return p;
}

// A batch's buffers, carved from one allocation by batch_layout.
struct StepBuffers {
  int rows = 0; // capacity
  float *x, *qkv, *att, *y, *hid, *o, *state;
  uint8_t *cur, *out, *given, *known;
  double *log_prob;
  StepParams *params;
};

inline StepBuffers step_buffers(void *base, const BatchLayout &l) {
  char *m = static_cast<char *>(base);
  auto f = [&](size_t at) { return reinterpret_cast<float *>(m + at); };
  auto u = [&](size_t at) { return reinterpret_cast<uint8_t *>(m + at); };
  StepBuffers b;
  b.rows = int(l.rows);
  b.x = f(l.x), b.qkv = f(l.qkv), b.att = f(l.att), b.y = f(l.y), b.hid = f(l.hid), b.o = f(l.o);
  b.state = f(l.state);
  b.cur = u(l.cur), b.out = u(l.out), b.given = u(l.given), b.known = u(l.known);
  b.log_prob = reinterpret_cast<double *>(m + l.log_prob);
  b.params = reinterpret_cast<StepParams *>(m + l.params);
  return b;
}

// Feeds cur (p_t, t = params->t) through the network: o = the mixture parameters for p_{t+1}.
// The same order as CpuDecoder::step; biases are added where the next kernel reads them (the
// attention adds q, k, v's; the residual LayerNorm adds the out projection's and ff2's).
template <class Ops>
void forward(Ops &ops, const Config &c, const WeightPtrs &w, const StepBuffers &b, int rows) {
  const int D = c.d_model, A = c.d_attn(), F = c.d_ff;
  const Act act = c.activation == Activation::Relu ? Act::Relu : Act::Gelu;
  ops.embedding(b.x, w.value_embedding, w.pos, b.cur, b.params, rows, D);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerPtrs &L = w.layers[l];
    ops.gemm(L.qkv_w, b.x, b.qkv, rows, 3 * A, D); // q, k, v: one GEMM on the stacked weights
    ops.linear_attention(b.qkv, L.qkv_b, b.state, b.att, rows, l, c.n_layers, c.n_heads, c.d_head);
    ops.gemm(L.out_w, b.att, b.y, rows, D, A);
    ops.residual_layernorm(b.x, b.y, L.out_b, L.norm1_w, L.norm1_b, rows, D);
    ops.gemm(L.ff1_w, b.x, b.hid, rows, F, D);
    ops.bias_act(b.hid, L.ff1_b, rows, F, act);
    ops.gemm(L.ff2_w, b.hid, b.y, rows, D, F);
    ops.residual_layernorm(b.x, b.y, L.ff2_b, L.norm2_w, L.norm2_b, rows, D);
  }
  ops.residual_layernorm(b.x, nullptr, nullptr, w.final_w, w.final_b, rows, D);
  ops.gemm(w.predictor_w, b.x, b.o, rows, c.d_out(), D);
  ops.bias_act(b.o, w.predictor_b, rows, c.d_out(), Act::None);
}

// One whole step: forward, then choose p_{t+1} of every row and move to the next position.
// This is the sequence a CUDA graph captures.
template <class Ops>
void step_sequence(Ops &ops, const Config &c, const WeightPtrs &w, const StepBuffers &b, int rows) {
  forward(ops, c, w, b, rows);
  ops.sample_bytes(b.o, c.mixtures, b.given, b.known, c.bytes_per_image(), b.cur, b.out, b.log_prob,
                   b.params, rows);
  ops.advance_position(b.params);
}

// The rollout of engine.h (the semantics of run_cpu) in chunks of b.rows images. Per chunk the
// given bytes and the mask go in once and the images and log-likelihoods come out once; between,
// only ops.steps runs.
template <class Ops>
void rollout(Ops &ops, const Config &c, const StepBuffers &b, const Rollout &job,
             const std::function<void(int64_t, int64_t)> &progress) {
  const int T = c.bytes_per_image();
  const int steps = job.positions < 0 ? T - 1 : std::min(job.positions, T - 1);
  const int64_t total = job.count * steps;
  if (job.log_prob)
    std::fill(job.log_prob, job.log_prob + job.count, 0.0);
  std::vector<uint8_t> p0(size_t(b.rows));
  const int between_reports = 32; // steps; a report waits for the GPU, so not every step
  for (int64_t image0 = 0; image0 < job.count; image0 += b.rows) {
    const int n = int(std::min<int64_t>(b.rows, job.count - image0));
    const size_t first = size_t(image0) * T, bytes = size_t(n) * T;
    ops.zero(b.state, size_t(n) * size_t(c.state_floats_per_image()) * 4);
    ops.zero(b.log_prob, size_t(n) * 8);
    StepParams p;
    p.has_given = job.given != nullptr;
    p.has_known = job.given && job.known;
    p.seed = job.seed;
    p.image_base = uint64_t(job.first_index + image0);
    if (p.has_given)
      ops.upload(b.given, job.given + first, bytes);
    if (p.has_known)
      ops.upload(b.known, job.known + first, bytes);
    for (int r = 0; r < n; ++r) { // p_0: given, or 0 (black corner)
      const size_t at = first + size_t(r) * T;
      p0[r] = p.has_given && (!p.has_known || job.known[at]) ? job.given[at] : 0;
    }
    ops.upload(b.cur, p0.data(), size_t(n));
    ops.upload(b.params, &p, sizeof p);
    for (int t = 0; t < steps;) {
      const int k = progress ? std::min(between_reports, steps - t) : steps - t;
      ops.steps(n, k);
      t += k;
      if (progress) {
        ops.sync();
        progress(image0 * steps + int64_t(t) * n, total);
      }
    }
    ops.sync();
    if (steps > 0) // columns 1..steps: what the steps wrote; the rest of job.out is left alone
      ops.download_columns(job.out + first + 1, size_t(T), b.out + 1, size_t(T), size_t(steps),
                           size_t(n));
    for (int r = 0; r < n; ++r)
      job.out[first + size_t(r) * T] = p0[r];
    if (job.log_prob)
      ops.download(job.log_prob + image0, b.log_prob, size_t(n) * 8);
  }
  if (progress)
    progress(total, total);
}

} // namespace tarnn
