#include <cstring>

#include "../../kernels/softmax_attention.h"
#include "../cpu/cpu_features.h"
#include "softmax_ops.h"
#include "tarnn/error.h"

namespace tarnn {

namespace {

// One head's softmax attention in the instruction set this CPU has (the loops are written to
// vectorise; the summation order is the code's, so every variant gives the same bits).
__attribute__((always_inline)) inline void attend_body(const float *q, const float *KT, int ldk,
                                                       const float *V, int n, int d, float *scores,
                                                       float *out) {
  softmax_attention(q, KT, ldk, V, n, d, scores, out);
}

TARNN_CPU_VARIANTS(attend,
                   (const float *q, const float *KT, int ldk, const float *V, int n, int d,
                    float *scores, float *out),
                   (q, KT, ldk, V, n, d, scores, out))

using AttendFn = void (*)(const float *, const float *, int, const float *, int, int, float *,
                          float *);

AttendFn attend() {
  static const AttendFn f = cpu_pick(&attend_avx512, &attend_avx2, &attend_portable);
  return f;
}

} // namespace

KvCache::KvCache(const Config &c, int images, int capacity)
    : layers_(c.n_layers), heads_(c.n_heads), d_head_(c.d_head), capacity_(capacity),
      block_(2 * int64_t(c.d_head) * capacity),
      data_(size_t(images) * layers_ * heads_ * block_, 0.0f) {}

KvOps::KvOps(const Config &c, const ModelView<CpuLinear> &w, const StepBuffers &b, KvCache &cache,
             int first)
    : CpuLinearOps(c, w, b, false), cache_(cache), first_(first), scores_(c.positions()) {}

void KvOps::attention(int layer, int rows) {
  const int A = c_.d_attn(), dh = c_.d_head, cap = cache_.capacity(), t = b_.params->t;
  if (t < 0 || t >= cap)
    throw Error("KV cache holds " + std::to_string(cap) + " positions, asked for position " +
                std::to_string(t));
  const AttendFn f = attend();
  for (int r = 0; r < rows; ++r) {
    const float *q = b_.qkv + size_t(r) * 3 * A;
    for (int h = 0; h < c_.n_heads; ++h) {
      float *KT = cache_.keys(first_ + r, layer, h), *V = cache_.values(first_ + r, layer, h);
      const float *k = q + A + h * dh, *v = q + 2 * A + h * dh;
      for (int i = 0; i < dh; ++i)
        KT[size_t(i) * cap + t] = k[i];
      std::memcpy(V + size_t(t) * dh, v, dh * 4);
      f(q + h * dh, KT, cap, V, t + 1, dh, scores_.data(), b_.att + size_t(r) * A + h * dh);
    }
  }
}

RecomputeOps::RecomputeOps(const Config &c, const ModelView<CpuLinear> &w, const StepBuffers &b)
    : CpuLinearOps(c, w, b, false), keys_(size_t(c.positions()) * c.d_attn()),
      values_(keys_.size()), scores_(c.positions()) {}

void RecomputeOps::embed(const ModelView<CpuLinear> &w, int rows) {
  b_.params->t = 0; // row p is position p: e_p = [E[p_p] | P[p]]
  embed_positions(w, rows);
}

void RecomputeOps::attention(int layer, int rows) {
  (void)layer; // keys and values are recomputed for every layer: nothing is kept
  const int A = c_.d_attn(), dh = c_.d_head, L = c_.positions();
  const AttendFn f = attend();
  for (int h = 0; h < c_.n_heads; ++h) {
    float *KT = &keys_[size_t(h) * dh * L], *V = &values_[size_t(h) * L * dh];
    for (int p = 0; p < rows; ++p) {
      const float *qkv = b_.qkv + size_t(p) * 3 * A;
      for (int i = 0; i < dh; ++i)
        KT[size_t(i) * L + p] = qkv[A + h * dh + i];
      std::memcpy(V + size_t(p) * dh, qkv + 2 * A + h * dh, dh * 4);
    }
    for (int p = 0; p < rows; ++p) // causal: position p attends to 0..p
      f(b_.qkv + size_t(p) * 3 * A + h * dh, KT, L, V, p + 1, dh, scores_.data(),
        b_.att + size_t(p) * A + h * dh);
  }
}

RecomputeDecoder::RecomputeDecoder(const Config &c, const ModelView<CpuLinear> &w, int rows)
    : c_(c), rows_(rows), prefix_(c, w, c.positions(), false) {}

int64_t RecomputeDecoder::bytes_per_image(const Config &c) {
  const int64_t per_row = 2 * c.d_model + 6 * c.d_attn() + c.d_ff + 1; // x y qkv att K V hid score
  return int64_t(c.positions()) * per_row * 4;
}

void RecomputeDecoder::step(int t, const uint8_t *images, int stride, float *o) {
  const int L = c_.positions(), K3 = c_.d_out();
  if (t < 0 || t >= L)
    throw Error("position " + std::to_string(t) + " is outside [0, " + std::to_string(L) + ")");
  const StepBuffers &b = prefix_.buffers();
  for (int r = 0; r < rows_; ++r) { // one image's prefix at a time: t + 1 rows through every layer
    std::memcpy(b.cur, images + size_t(r) * stride, size_t(t) + 1);
    prefix_.forward_rows(t + 1);
    std::memcpy(o + size_t(r) * K3, b.o + size_t(t) * K3, size_t(K3) * 4); // only p_{t+1} is needed
  }
}

} // namespace tarnn
