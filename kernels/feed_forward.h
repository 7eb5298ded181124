// The feed-forward block and its LayerNorm as one kernel (feed_forward.cu,
// TARNN_FEED_FORWARD=fused):
//   x = LayerNorm2(x + W2 act(W1 x16 + b1) + b2)
// for bf16 GEMMs, the hidden row never leaving the SM. A block owns kFeedForwardRows rows and all
// d_model columns (the LayerNorm needs the whole row): their x16 in shared memory; the hidden
// layer in chunks of kFeedForwardHidden columns, each act(x16 W1_c^T + b1_c) rounded to bf16
// (round_bf16.h's rule, as the unfused path's bf16 epilogue or its bias_act and pass) into shared
// memory; the output's tiles summed over the hidden layer's k in ascending order into one
// accumulator each (so on the emulated device, whose tensor-core products are a fused multiply-add
// chain over k ascending, the unfused GEMM's sums to the bit); then y + b2 beside x, and the row
// LayerNorm of residual_layernorm.cu (warp_layernorm.h) with its second norm where given, writing x
// in fp32 and its bf16 copy as launch_layernorm_rows does. Its CPU twin is the unfused sequence
// (model/forward.h: feed_forward_unfused): the two linears, then add_norm.
//
// With the out-projection (launch_after_attention, TARNN_FEED_FORWARD=layer) the same kernel
// first takes the block's rows of att16, the attention's bf16 output: Wo's tiles summed over k
// ascending into the same accumulators, x1 = LayerNorm1(x + (y + bo)) kept in fp32 in shared memory
// (the residual of LayerNorm2, never written to device memory) and in bf16 as the feed-forward's
// input; then the phases above, LayerNorm2 reading x1. Its CPU twin is model/forward.h's
// after_attention_unfused: the out linear, add_norm, then the feed-forward.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tarnn/config.h"

namespace tarnn {

constexpr int kFeedForwardRows = 32;                       // images a block
constexpr int kFeedForwardWarps = 8;                       // 256 threads
constexpr int kFeedForwardHidden = 16 * kFeedForwardWarps; // hidden columns a chunk: a tile a warp
constexpr int kFeedForwardWidest = 512;                    // d_model at most (registers: 4 tiles
                                                           // of 16 output columns a warp)

// One layer's block as the kernel reads it, in device memory: W1 [d_ff, d_model] and W2 [d_model,
// d_ff] in bf16 bits (row-major, PyTorch's), their fp32 biases (bf16 values, bias_block), the
// LayerNorm's weights, and where not null a second norm's (the final norm after the last layer).
struct FeedForwardNorm {
  const uint16_t *w1 = nullptr, *w2 = nullptr;
  const float *b1 = nullptr, *b2 = nullptr;
  int d_model = 0, d_ff = 0;
  Act act = Act::Relu;
  const float *norm_w = nullptr, *norm_b = nullptr, *then_w = nullptr, *then_b = nullptr;
  // the out-projection Wo [d_model, d_model] (bf16 bits), its bias and LayerNorm1 before the
  // feed-forward: launch_after_attention's, else unused
  const uint16_t *wo = nullptr;
  const float *bo = nullptr, *norm1_w = nullptr, *norm1_b = nullptr;
};

// Why the fused kernel cannot take d_model x d_ff, or "" where it can: the tensor cores' 16 x 16
// tiles, and rows no wider than its accumulators hold.
inline std::string feed_forward_refusal(int d_model, int d_ff) {
  if (d_model % 16 || d_ff % 16)
    return "d_model and d_ff multiples of 16 (the tensor cores' tiles); this model's are " +
           std::to_string(d_model) + " and " + std::to_string(d_ff);
  if (d_model > kFeedForwardWidest)
    return "d_model at most " + std::to_string(kFeedForwardWidest) + "; this model's is " +
           std::to_string(d_model);
  return "";
}

constexpr int kAfterAttentionWidest = 384; // d_model at most with the out-projection: x1's fp32
                                           // rows beside the feed-forward's shared memory

// Why the kernel with the out-projection cannot take the model, or "": the feed-forward's tiles,
// the attention as wide as the model (att16 is read where x16 is written, row for row) and rows
// whose x1 fits in shared memory.
inline std::string after_attention_refusal(int d_model, int d_ff, int d_attn) {
  if (d_model % 16 || d_ff % 16) // the tiles
    return feed_forward_refusal(d_model, d_ff);
  if (d_attn != d_model)
    return "n_heads x d_head equal to d_model; this model's are " + std::to_string(d_attn) +
           " and " + std::to_string(d_model);
  if (d_model > kAfterAttentionWidest)
    return "d_model at most " + std::to_string(kAfterAttentionWidest) +
           " (x1's rows in shared memory); this model's is " + std::to_string(d_model);
  return "";
}

// The dynamic shared memory of a block, for a model it takes: x16's rows, the hidden chunk in
// bf16 and its fp32 sums, and then (in the same bytes, once the GEMMs are done) the output's
// rows in fp32.
constexpr size_t feed_forward_shared_bytes(int d_model) {
  const size_t M = kFeedForwardRows, H = kFeedForwardHidden, d = size_t(d_model);
  return std::max(M * d * 2 + M * H * 2 + M * H * 4, M * d * 4);
}

// What every device of this build (sm_80 and newer) lets a block ask for (sm_86's and sm_89's 99
// KB; sm_80's 163, sm_90's 227): so no model the kernel takes needs a device check. Past CUDA's 48
// KB default it asks with cudaFuncSetAttribute.
constexpr size_t kSharedMemoryEveryDevice = 99 * 1024;
static_assert(feed_forward_shared_bytes(kFeedForwardWidest) <= kSharedMemoryEveryDevice,
              "the widest model the fused feed-forward takes fits every device's shared memory");

// With the out-projection: x1's rows in fp32, then the feed-forward's bytes (phase 0's rows of
// att16, M x d_model in bf16, in them: they are done before x1's bf16 copy is written).
constexpr size_t after_attention_shared_bytes(int d_model) {
  return size_t(kFeedForwardRows) * size_t(d_model) * 4 + feed_forward_shared_bytes(d_model);
}
static_assert(after_attention_shared_bytes(kAfterAttentionWidest) <= kSharedMemoryEveryDevice,
              "the widest model the kernel with the out-projection takes fits every device's");

} // namespace tarnn
