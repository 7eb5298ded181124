#include "cpu_decoder.h"

#include <algorithm>
#include <cstring>

#include "../kernels/tarnn_math.h"

namespace tarnn {

CpuWeights::CpuWeights(const Model &m) : model(m), predictor(pack(m.weights.predictor)) {
  for (const LayerWeights &l : m.weights.layers)
    layers.push_back(Layer{pack(l.qkv), pack(l.out), pack(l.ff1), pack(l.ff2)});
}

CpuStatePool::CpuStatePool(const Config &c, int images)
    : images_(images), heads_(c.n_heads), per_layer_heads_(c.n_layers * c.n_heads),
      block_floats_(int64_t(c.d_head + 1) * c.d_head),
      data_(size_t(images) * per_layer_heads_ * block_floats_, 0.0f) {}

void CpuStatePool::zero(int first, int count) {
  const int64_t per_image = per_layer_heads_ * block_floats_;
  std::fill(data_.begin() + first * per_image, data_.begin() + (first + count) * per_image, 0.0f);
}

CpuDecoder::CpuDecoder(const CpuWeights &w, CpuStatePool &pool, int first, int rows, bool reference)
    : w_(w), c_(w.model.config), pool_(pool), first_(first), rows_(rows), reference_(reference),
      x_(size_t(rows) * c_.d_model), qkv_(size_t(rows) * 3 * c_.d_attn()),
      att_(size_t(rows) * c_.d_attn()), y_(size_t(rows) * c_.d_model),
      hid_(size_t(rows) * c_.d_ff) {}

void CpuDecoder::linear(const PackedLinear &pl, const Linear &l, const float *x, float *y,
                        Epilogue e) {
  if (reference_)
    linear_forward_ref(l, x, l.in, rows_, y, l.out, e);
  else
    linear_forward(pl, x, pl.in, rows_, y, pl.out, e);
}

void CpuDecoder::step(int t, const uint8_t *bytes, float *o) {
  const Weights &W = w_.model.weights;
  const int D = c_.d_model, H = c_.half(), A = c_.d_attn(), dh = c_.d_head;
  // e_t = [E[p_t] | P[t]]
  for (int r = 0; r < rows_; ++r) {
    std::memcpy(&x_[size_t(r) * D], &W.value_embedding[size_t(bytes[r]) * H], H * 4);
    std::memcpy(&x_[size_t(r) * D + H], &W.pos[size_t(t) * H], H * 4);
  }
  const Epilogue act = c_.activation == Activation::Relu ? Epilogue::Relu : Epilogue::Gelu;
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerWeights &lw = W.layers[l];
    const CpuWeights::Layer &pl = w_.layers[l];
    linear(pl.qkv, lw.qkv, x_.data(), qkv_.data(), Epilogue::None);
    for (int r = 0; r < rows_; ++r) {
      const float *q = &qkv_[size_t(r) * 3 * A];
      for (int h = 0; h < c_.n_heads; ++h) {
        float *S = pool_.block(first_ + r, l, h);
        linear_attention_step(q + h * dh, q + A + h * dh, q + 2 * A + h * dh, S, S + dh * dh,
                              &att_[size_t(r) * A + h * dh], dh);
      }
    }
    linear(pl.out, lw.out, att_.data(), y_.data(), Epilogue::None);
    for (int r = 0; r < rows_; ++r) { // x = LayerNorm1(x + a)
      float *x = &x_[size_t(r) * D];
      for (int i = 0; i < D; ++i)
        x[i] += y_[size_t(r) * D + i];
      layernorm_row(x, lw.norm1.w.data(), lw.norm1.b.data(), x, D);
    }
    linear(pl.ff1, lw.ff1, x_.data(), hid_.data(), act);
    linear(pl.ff2, lw.ff2, hid_.data(), y_.data(), Epilogue::None);
    for (int r = 0; r < rows_; ++r) { // x = LayerNorm2(x + W2 act(W1 x + b1) + b2)
      float *x = &x_[size_t(r) * D];
      for (int i = 0; i < D; ++i)
        x[i] += y_[size_t(r) * D + i];
      layernorm_row(x, lw.norm2.w.data(), lw.norm2.b.data(), x, D);
    }
  }
  for (int r = 0; r < rows_; ++r) {
    float *x = &x_[size_t(r) * D];
    layernorm_row(x, W.final_norm.w.data(), W.final_norm.b.data(), x, D);
  }
  linear(w_.predictor, W.predictor, x_.data(), o, Epilogue::None);
}

} // namespace tarnn
