// The ops of core/forward.h and core/rollout.h that every host-memory backend shares: the CPU
// backend, the softmax baselines and the CUDA backend's CPU twin. Each is the CPU twin of its
// CUDA kernel (kernels/*.h), so the CPU and the GPU run the same element code. A derived class
// adds `linear` and `attention`, the two ops in which they differ (CRTP: no virtual calls).
#pragma once

#include <cstring>

#include "../../kernels/embedding.h"
#include "../../kernels/residual_layernorm.h"
#include "../../kernels/sample_bytes.h"
#include "../core/forward.h"

namespace tarnn {

// kernels/residual_layernorm.h's twin over `rows` rows, in the instruction set this CPU has
// (cpu_kernels.cpp).
void residual_layernorm_rows(float *x, const float *y, const float *w, const float *b, int rows,
                             int n);

template <class Derived, class Lin> class HostOps {
public:
  using Linear = Lin;

  HostOps(const Config &c, const ModelView<Lin> &w, const StepBuffers &b) : c_(c), w_(w), b_(b) {}

  const StepBuffers &buffers() const { return b_; }
  const ModelView<Lin> &view() const { return w_; }

  void embed(const ModelView<Lin> &w, int rows) {
    embedding_cpu(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model);
  }
  // For ops whose rows are consecutive positions of one image: row r at position params->t + r.
  void embed_positions(const ModelView<Lin> &w, int rows) {
    embedding_cpu(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model, true);
  }
  void add_norm(float *x, const float *y, NormView n, int rows) {
    residual_layernorm_rows(x, y, n.w, n.b, rows, c_.d_model);
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
  const ModelView<Lin> &w_;
  const StepBuffers &b_;
};

} // namespace tarnn
