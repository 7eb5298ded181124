#include "softmax_decoder.h"

#include <cstring>

#include "../kernels/softmax_attention.h"
#include "error.h"

namespace tarnn {

namespace {

// e_t = [E[p_t] | P[t]] into one row of x.
void embed(const Weights &W, int half, int t, uint8_t byte, float *x) {
  std::memcpy(x, &W.value_embedding[size_t(byte) * half], half * 4);
  std::memcpy(x + half, &W.pos[size_t(t) * half], half * 4);
}

// x = LayerNorm(x + y), row by row.
void add_norm(float *x, const float *y, const Norm &n, int rows, int D) {
  for (int r = 0; r < rows; ++r) {
    float *xr = x + size_t(r) * D;
    for (int i = 0; i < D; ++i)
      xr[i] += y[size_t(r) * D + i];
    layernorm_row(xr, n.w.data(), n.b.data(), xr, D);
  }
}

// One post-norm layer (SPEC section 1) over `rows` rows of s.x, in place. attend() fills s.att
// from s.qkv: the only part in which the two decoders differ.
template <class Attend>
void layer_forward(const CpuWeights &w, int l, int rows, CpuWorkspace &s, Attend &&attend) {
  const Config &c = w.model.config;
  const LayerWeights &lw = w.model.weights.layers[l];
  const CpuWeights::Layer &pl = w.layers[l];
  const int D = c.d_model, A = c.d_attn(), F = c.d_ff;
  const Epilogue act = c.activation == Activation::Relu ? Epilogue::Relu : Epilogue::Gelu;
  linear_forward(pl.qkv, s.x.data(), D, rows, s.qkv.data(), 3 * A, Epilogue::None);
  attend();
  linear_forward(pl.out, s.att.data(), A, rows, s.y.data(), D, Epilogue::None);
  add_norm(s.x.data(), s.y.data(), lw.norm1, rows, D);
  linear_forward(pl.ff1, s.x.data(), D, rows, s.hid.data(), F, act);
  linear_forward(pl.ff2, s.hid.data(), F, rows, s.y.data(), D, Epilogue::None);
  add_norm(s.x.data(), s.y.data(), lw.norm2, rows, D);
}

// The final LayerNorm and the output head on `rows` rows of x.
void output_head(const CpuWeights &w, float *x, int rows, float *o) {
  const Weights &W = w.model.weights;
  const int D = w.model.config.d_model;
  for (int r = 0; r < rows; ++r)
    layernorm_row(x + size_t(r) * D, W.final_norm.w.data(), W.final_norm.b.data(),
                  x + size_t(r) * D, D);
  linear_forward(w.predictor, x, D, rows, o, w.predictor.out, Epilogue::None);
}

} // namespace

KvCache::KvCache(const Config &c, int images, int capacity)
    : layers_(c.n_layers), heads_(c.n_heads), d_head_(c.d_head), capacity_(capacity),
      block_(2 * int64_t(c.d_head) * capacity),
      data_(size_t(images) * layers_ * heads_ * block_, 0.0f) {}

CpuWorkspace::CpuWorkspace(const Config &c, int rows)
    : x(size_t(rows) * c.d_model), qkv(size_t(rows) * 3 * c.d_attn()),
      att(size_t(rows) * c.d_attn()), y(size_t(rows) * c.d_model), hid(size_t(rows) * c.d_ff),
      scores(c.positions()) {}

KvCacheDecoder::KvCacheDecoder(const CpuWeights &w, KvCache &cache, int first, int rows)
    : w_(w), cache_(cache), first_(first), rows_(rows), s_(w.model.config, rows) {}

void KvCacheDecoder::step(int t, const uint8_t *bytes, float *o) {
  const Config &c = w_.model.config;
  const int D = c.d_model, A = c.d_attn(), dh = c.d_head, cap = cache_.capacity();
  if (t < 0 || t >= cap)
    throw Error("KV cache holds " + std::to_string(cap) + " positions, asked for position " +
                std::to_string(t));
  for (int r = 0; r < rows_; ++r)
    embed(w_.model.weights, c.half(), t, bytes[r], &s_.x[size_t(r) * D]);
  for (int l = 0; l < c.n_layers; ++l)
    layer_forward(w_, l, rows_, s_, [&] {
      for (int r = 0; r < rows_; ++r) {
        const float *q = &s_.qkv[size_t(r) * 3 * A];
        for (int h = 0; h < c.n_heads; ++h) {
          float *KT = cache_.keys(first_ + r, l, h), *V = cache_.values(first_ + r, l, h);
          const float *k = q + A + h * dh, *v = q + 2 * A + h * dh;
          for (int i = 0; i < dh; ++i)
            KT[size_t(i) * cap + t] = k[i];
          std::memcpy(V + size_t(t) * dh, v, dh * 4);
          softmax_attention(q + h * dh, KT, cap, V, t + 1, dh, s_.scores.data(),
                            &s_.att[size_t(r) * A + h * dh]);
        }
      }
    });
  output_head(w_, s_.x.data(), rows_, o);
}

RecomputeDecoder::RecomputeDecoder(const CpuWeights &w, int rows)
    : w_(w), rows_(rows), s_(w.model.config, w.model.config.positions()),
      kt_(size_t(w.model.config.positions()) * w.model.config.d_attn()), v_(kt_.size()) {}

int64_t RecomputeDecoder::bytes_per_image(const Config &c) {
  const int64_t per_row = 2 * c.d_model + 6 * c.d_attn() + c.d_ff + 1; // x y qkv att K V hid score
  return int64_t(c.positions()) * per_row * 4;
}

void RecomputeDecoder::step(int t, const uint8_t *images, int stride, float *o) {
  const Config &c = w_.model.config;
  const int D = c.d_model, A = c.d_attn(), dh = c.d_head, L = c.positions(), n = t + 1;
  if (t < 0 || t >= L)
    throw Error("position " + std::to_string(t) + " is outside [0, " + std::to_string(L) + ")");
  for (int r = 0; r < rows_; ++r) { // one image's prefix at a time: n rows through every layer
    for (int p = 0; p < n; ++p)
      embed(w_.model.weights, c.half(), p, images[size_t(r) * stride + p], &s_.x[size_t(p) * D]);
    for (int l = 0; l < c.n_layers; ++l)
      layer_forward(w_, l, n, s_, [&] {
        for (int h = 0; h < c.n_heads; ++h) {
          float *KT = &kt_[size_t(h) * dh * L], *V = &v_[size_t(h) * L * dh];
          for (int p = 0; p < n; ++p) {
            const float *qkv = &s_.qkv[size_t(p) * 3 * A];
            for (int i = 0; i < dh; ++i)
              KT[size_t(i) * L + p] = qkv[A + h * dh + i];
            std::memcpy(V + size_t(p) * dh, qkv + 2 * A + h * dh, dh * 4);
          }
          for (int p = 0; p < n; ++p) // causal: position p attends to 0..p
            softmax_attention(&s_.qkv[size_t(p) * 3 * A + h * dh], KT, L, V, p + 1, dh,
                              s_.scores.data(), &s_.att[size_t(p) * A + h * dh]);
        }
      });
    output_head(w_, &s_.x[size_t(t) * D], 1, o + size_t(r) * c.d_out()); // only p_{t+1} is needed
  }
}

} // namespace tarnn
