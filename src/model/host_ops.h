// The ops of model/forward.h and model/rollout.h that every host-memory backend shares: the CPU
// backend, the softmax baselines and the CUDA backend's CPU twin. Each is the CPU twin of its
// CUDA kernel (kernels/*.h), so the CPU and the GPU run the same element code.
//
// Two policies make a backend's host ops:
//   Kernels  linear(l, x, y, rows, act)        y = act(x W^T + b), the backend's GEMM
//            add_norm(x, y, w, b, rows, n)     x = LayerNorm(x + y), in the instruction set it has
//            (forward.h's feed_forward and after_attention are their compositions,
//            feed_forward_unfused and after_attention_unfused, on every host)
//   Derived  attention(layer, rows)            the attention form and its memory (CRTP: no
//                                              virtual calls), and any op it runs its own way
#pragma once

#include <cstring>

#include "../../kernels/embedding.h"
#include "../../kernels/residual_layernorm.h"
#include "../../kernels/sample_bytes.h"
#include "forward.h"

namespace tarnn {

template <class Derived, class Kernels> class HostOps {
public:
  static constexpr bool kHostMemory = true; // the buffers are host memory (model/rollout.h)
  HostOps(const Config &c, const ModelView &w, const StepBuffers &b, Kernels k = {})
      : c_(c), w_(w), b_(b), k_(k) {}

  const StepBuffers &buffers() const { return b_; }
  const ModelView &view() const { return w_; }
  const Kernels &kernels() const { return k_; }

  void embed(const ModelView &w, int rows) {
    embedding_cpu(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model);
  }
  // For ops whose rows are consecutive positions of one image: row r at position params->t + r.
  void embed_positions(const ModelView &w, int rows) {
    embedding_cpu(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model, true);
  }
  void linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) {
    k_.linear(l, x, y, rows, act);
  }
  void add_norm(float *x, const float *y, NormView n, int rows, const NormView *then = nullptr) {
    k_.add_norm(x, y, n.w, n.b, rows, c_.d_model);
    if (then)
      k_.add_norm(x, nullptr, then->w, then->b, rows, c_.d_model);
  }
  // the linears and add_norm of the backend (Derived's, where it has its own)
  void feed_forward(const LayerView &w, int rows, Act act, const NormView *then = nullptr) {
    feed_forward_unfused(static_cast<Derived &>(*this), w, rows, act, then);
  }
  void after_attention(const LayerView &w, int rows, Act act, const NormView *then = nullptr) {
    after_attention_unfused(static_cast<Derived &>(*this), w, rows, act, then);
  }
  void sample(int rows) {
    sample_bytes_cpu(b_.o, c_.mixtures, b_.given, b_.known, c_.bytes_per_image(), b_.cur, b_.out,
                     b_.log_prob, b_.params, rows);
  }
  void advance() { advance_position(b_.params); }

  void upload(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void download(void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); }
  void download_columns(uint8_t *dst, size_t dpitch, const uint8_t *src, size_t spitch,
                        size_t width, size_t rows) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * dpitch, src + r * spitch, width);
  }
  void zero(void *p, size_t n) { std::memset(p, 0, n); }
  void sync() {}
  void steps(int rows, int count) {
    for (int i = 0; i < count; ++i)
      step(static_cast<Derived &>(*this), c_, w_, rows);
  }

protected:
  const Config &c_;
  const ModelView &w_;
  const StepBuffers &b_;
  Kernels k_;
};

// The plain LayerNorm of kernels/residual_layernorm.h: a Kernels' add_norm where nothing faster is
// wanted (the CUDA twin).
struct PlainNorm {
  void add_norm(float *x, const float *y, const float *w, const float *b, int rows, int n) const {
    residual_layernorm_cpu(x, y, w, b, rows, n);
  }
};

} // namespace tarnn
