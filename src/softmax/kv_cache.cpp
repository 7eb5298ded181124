#include <cstring>

#include "../../kernels/cpu_features.h"
#include "../../kernels/softmax_attention.h"
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
    : images_(images), layers_(c.n_layers), heads_(c.n_heads), d_head_(c.d_head),
      capacity_(capacity), block_(2 * int64_t(c.d_head) * capacity),
      own_(size_t(images) * layers_ * heads_ * block_, 0.0f), data_(own_.data()) {}

KvCache::KvCache(const Config &c, void *memory, int images, int capacity)
    : images_(images), layers_(c.n_layers), heads_(c.n_heads), d_head_(c.d_head),
      capacity_(capacity), block_(2 * int64_t(c.d_head) * capacity),
      data_(static_cast<float *>(memory)) {}

void check_kv_rows(const Config &c, const StepBuffers &b) {
  if (!keeps_kv_cache(c) || b.state_row_bytes != size_t(kv_cache_bytes_per_image(c)))
    throw Error("a KV cache in a batch needs a softmax model's layout (a full-length cache a row)");
}

void kv_attention(const Config &c, const StepBuffers &b, KvCache &cache, int first, int layer,
                  int rows, float *scores) {
  const int A = c.d_attn(), dh = c.d_head, cap = cache.capacity(), t = b.params->t;
  if (t < 0 || t >= cap)
    throw Error("KV cache holds " + std::to_string(cap) + " positions, asked for position " +
                std::to_string(t));
  const AttendFn f = attend();
  for (int r = 0; r < rows; ++r) {
    const float *q = b.qkv + size_t(r) * 3 * A;
    for (int h = 0; h < c.n_heads; ++h) {
      float *KT = cache.keys(first + r, layer, h), *V = cache.values(first + r, layer, h);
      const float *k = q + A + h * dh, *v = q + 2 * A + h * dh;
      for (int i = 0; i < dh; ++i)
        KT[size_t(i) * cap + t] = k[i];
      std::memcpy(V + size_t(t) * dh, v, dh * 4);
      f(q + h * dh, KT, cap, V, t + 1, dh, scores, b.att + size_t(r) * A + h * dh);
    }
  }
}

void kv_attention_positions(const Config &c, const StepBuffers &b, KvCache &cache, int layer,
                            int rows, float *scores) {
  const int A = c.d_attn(), dh = c.d_head, cap = cache.capacity(), t = b.params->t;
  if (t < 0 || t + rows > cap)
    throw Error("KV cache holds " + std::to_string(cap) + " positions, asked for positions " +
                std::to_string(t) + ".." + std::to_string(t + rows - 1));
  const AttendFn f = attend();
  for (int h = 0; h < c.n_heads; ++h) {
    float *KT = cache.keys(0, layer, h), *V = cache.values(0, layer, h);
    for (int r = 0; r < rows; ++r) { // every row's key and value first: row r reads 0..t+r
      const float *qkv = b.qkv + size_t(r) * 3 * A;
      for (int i = 0; i < dh; ++i)
        KT[size_t(i) * cap + t + r] = qkv[A + h * dh + i];
      std::memcpy(V + size_t(t + r) * dh, qkv + 2 * A + h * dh, dh * 4);
    }
    for (int r = 0; r < rows; ++r) // causal: position t + r attends to 0..t+r
      f(b.qkv + size_t(r) * 3 * A + h * dh, KT, cap, V, t + r + 1, dh, scores,
        b.att + size_t(r) * A + h * dh);
  }
}

void prefix_attention(const Config &c, const StepBuffers &b, int rows, float *keys, float *values,
                      float *scores) {
  const int A = c.d_attn(), dh = c.d_head, L = c.positions();
  const AttendFn f = attend();
  for (int h = 0; h < c.n_heads; ++h) {
    float *KT = keys + size_t(h) * dh * L, *V = values + size_t(h) * L * dh;
    for (int p = 0; p < rows; ++p) {
      const float *qkv = b.qkv + size_t(p) * 3 * A;
      for (int i = 0; i < dh; ++i)
        KT[size_t(i) * L + p] = qkv[A + h * dh + i];
      std::memcpy(V + size_t(p) * dh, qkv + 2 * A + h * dh, dh * 4);
    }
    for (int p = 0; p < rows; ++p) // causal: position p attends to 0..p
      f(b.qkv + size_t(p) * 3 * A + h * dh, KT, L, V, p + 1, dh, scores,
        b.att + size_t(p) * A + h * dh);
  }
}

int64_t recompute_bytes_per_image(const Config &c) {
  const int64_t per_row = 2 * c.d_model + 6 * c.d_attn() + c.d_ff + 1; // x y qkv att K V hid score
  return int64_t(c.positions()) * per_row * 4;
}

} // namespace tarnn
