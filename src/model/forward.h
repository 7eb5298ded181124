// The model at one position, written once (docs/SPEC.md section 1, the paper's equations 2 and
// 16-20) over an `Ops` policy that each backend implements:
//
//   ops.embed(view, rows)               x = [E[p_t] | P[t]] from the bytes b.cur at b.params->t
//   ops.linear(w, in, out, rows, act)   out = act(in W^T + b)
//   ops.attention(layer, rows)          att from qkv: the attention form and its memory (the RNN
//                                       state S, z; a KV cache; the whole prefix)
//   ops.add_norm(x, y, norm, rows, then) x = LayerNorm(x + y); y null: x = LayerNorm(x); then
//                                       not null: x = then(LayerNorm(x + y)), the last layer's
//                                       second norm and the final norm as one op
//   ops.feed_forward(w, rows, act, then) x = then(LayerNorm2(x + W2 act(W1 x + b1) + b2)): the
//                                       layer's feed-forward block and its norm, as
//                                       feed_forward_unfused composes it, or one op of its own
//   ops.after_attention(w, rows, act, then) the layer's sublayers after the attention: x =
//                                       LayerNorm1(x + att W_o^T + b_o), then ops.feed_forward's,
//                                       as after_attention_unfused composes them, or one op
//   ops.sample(rows)                    p_{t+1}: the given byte where known, else a draw
//   ops.advance()                       t += 1
//
// ops.buffers() is the batch's memory (model/batch.h). The order of the arithmetic inside an op is
// the backend's; it is shared with the op's CPU twin in kernels/.
#pragma once

#include <string>
#include <vector>

#include "batch.h"
#include "tarnn/error.h"
#include "tarnn/model.h"
#include "tarnn/numerics.h"

namespace tarnn {

// A linear layer as every backend holds it: one description, whatever the precision. W is in the
// precision's storage and the layout the backend's GEMM reads (the CPU: packed panels of fp32 or
// of bf16 pairs; CUDA: device memory, [out, in], fp32 or bf16 bits); its bias is fp32.
struct LinearWeights {
  Precision precision = Precision::Fp32;
  int out = 0, in = 0;
  const void *w = nullptr;      // the backend's own form of W, in `precision`
  const float *b = nullptr;     // [out], in the backend's memory
  const float *w_ref = nullptr; // W [out, in] fp32 as loaded, in host memory: the reference GEMMs
                                // (null where the backend has none)
  bool bf16_output = false;     // bf16 only: y rounded to bf16 (bf16_bits) where its reader allows
                                // (mark_bf16_outputs); the CPU keeps the rounded values in fp32
};

struct NormView {
  const float *w, *b;
};

struct LayerView {
  LinearWeights qkv, out, ff1, ff2; // q, k and v are one stacked linear: one GEMM
  NormView norm1, norm2;
  const float *omega; // the feature map's [d_head, columns] (random-feature maps), else unused
};

// The weights as one backend sees them: tables and norms as pointers into its memory, linear
// layers in its form.
struct ModelView {
  const float *value_embedding, *pos;
  std::vector<LayerView> layers;
  NormView final_norm;
  LinearWeights predictor;
};

// The view of `W`: place(vector) says where a table lives in the backend's memory, linear(Linear)
// makes the backend's form of a layer.
template <class Place, class MakeLinear>
ModelView make_view(const Weights &W, Place &&place, MakeLinear &&linear) {
  auto norm = [&](const Norm &n) { return NormView{place(n.w), place(n.b)}; };
  ModelView v{place(W.value_embedding), place(W.pos), {}, norm(W.final_norm), linear(W.predictor)};
  for (const LayerWeights &l : W.layers)
    v.layers.push_back(LayerView{linear(l.qkv), linear(l.out), linear(l.ff1), linear(l.ff2),
                                 norm(l.norm1), norm(l.norm2), place(l.omega)});
  return v;
}

// Which bf16 layers write their output in bf16 (docs/SPEC.md, "bf16 GEMM outputs"): q, k and v,
// which only the attention reads (the engine's, issue 41), or none, every output in fp32 (the path
// before; the knob "bf16_outputs": TARNN_BF16_OUTPUTS=fp32). The bits differ, so every backend
// reads the knob: bf16_outputs_path.
enum class Bf16Outputs { Qkv, Fp32 };

inline Bf16Outputs bf16_outputs_path(const std::string &knob) {
  static constexpr struct {
    const char *value;
    Bf16Outputs path;
  } kPaths[] = {{"fp32", Bf16Outputs::Fp32}};
  if (knob.empty())
    return Bf16Outputs::Qkv;
  for (const auto &p : kPaths)
    if (knob == p.value)
      return p.path;
  throw Error("TARNN_BF16_OUTPUTS=" + knob +
              ": not a path for bf16 GEMMs' outputs (fp32; unset: the engine's)");
}

// Sets LinearWeights::bf16_output on the layers `o` names, where they are bf16 and the model's
// attention is linear (the softmax baselines keep fp32 q, k and v).
inline void mark_bf16_outputs(ModelView &v, const Config &c, Bf16Outputs o) {
  for (LayerView &l : v.layers)
    l.qkv.bf16_output = o == Bf16Outputs::Qkv && l.qkv.precision == Precision::Bf16 &&
                        c.attention == Attention::Linear;
}

// The feed-forward block and its LayerNorm from the ops above: hid = act(x W1^T + b1),
// y = hid W2^T + b2, x = LayerNorm2(x + y) (then `then`, where not null). Every backend's
// ops.feed_forward, and the CPU twin of the CUDA backend's fused kernel (kernels/feed_forward.h).
template <class Ops>
void feed_forward_unfused(Ops &ops, const LayerView &w, int rows, Act act, const NormView *then) {
  const StepBuffers &b = ops.buffers();
  ops.linear(w.ff1, b.x, b.hid, rows, act);
  ops.linear(w.ff2, b.hid, b.y, rows, Act::None);
  ops.add_norm(b.x, b.y, w.norm2, rows, then);
}

// What follows the attention in a layer, from the ops above: the out linear, x = LayerNorm1(x +
// att W_o^T + b_o), then the feed-forward block and its norm (then `then`, where not null). Every
// host backend's ops.after_attention, and the CPU twin of the CUDA kernel that does all of it
// (kernels/feed_forward.h: launch_after_attention).
template <class Ops>
void after_attention_unfused(Ops &ops, const LayerView &w, int rows, Act act,
                             const NormView *then) {
  const StepBuffers &b = ops.buffers();
  ops.linear(w.out, b.att, b.y, rows, Act::None);
  ops.add_norm(b.x, b.y, w.norm1, rows); // x = LayerNorm1(x + a)
  ops.feed_forward(w, rows, act, then);  // x = LayerNorm2(x + W2 act(W1 x + b1) + b2)
}

// One post-norm layer (SPEC section 1) over `rows` rows of b.x, in place; then, where not null, a
// LayerNorm after the layer's last (the final norm), in the same op.
template <class Ops>
void layer_forward(Ops &ops, const Config &c, const LayerView &w, int layer, int rows,
                   const NormView *then = nullptr) {
  const StepBuffers &b = ops.buffers();
  ops.linear(w.qkv, b.x, b.qkv, rows, Act::None);
  ops.attention(layer, rows);
  ops.after_attention(w, rows, c.activation, then);
}

// Feeds b.cur (p_t, t = b.params->t) through the network: b.o = the mixture parameters of
// p_{t+1} ([rows, 3K]: logits | means | log scales).
template <class Ops> void forward(Ops &ops, const Config &c, const ModelView &w, int rows) {
  const StepBuffers &b = ops.buffers();
  ops.embed(w, rows);
  for (int l = 0; l < c.n_layers; ++l) // n_layers >= 1 (Config::validate)
    layer_forward(ops, c, w.layers[l], l, rows, l + 1 == c.n_layers ? &w.final_norm : nullptr);
  ops.linear(w.predictor, b.x, b.o, rows, Act::None);
}

// One whole step: forward, then p_{t+1} of every row, then the next position. The sequence a
// CUDA graph captures.
template <class Ops> void step(Ops &ops, const Config &c, const ModelView &w, int rows) {
  forward(ops, c, w, rows);
  ops.sample(rows);
  ops.advance();
}

} // namespace tarnn
