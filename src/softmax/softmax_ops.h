// The paper's softmax baselines on the CPU (docs/SPEC.md section 1), for the benchmark: the same
// weights, the same GEMM and the same forward (core/forward.h); only the attention op differs.
//   KvOps: a KV cache keeps every earlier key and value (memory grows with the position).
//   RecomputeOps: the whole prefix p_0..p_t runs through every layer at every step, one row per
//   position (the paper's "softmax" row: O(t) work at step t, O(L^2) per image).
// Both call kernels/softmax_attention.h on the same keys and values, so they agree to the bit.
#pragma once

#include <cstdint>
#include <vector>

#include "../cpu/cpu_ops.h"
#include "../cpu/decoder.h"

namespace tarnn {

// Keys and values of positions 0..capacity-1 for `images` images, fp32. Per image, layer and
// head: the keys transposed [d_head, capacity] (see kernels/softmax_attention.h), then the values
// [capacity, d_head]. Allocated (and touched) whole, so a step never waits on a page fault.
class KvCache {
public:
  KvCache(const Config &c, int images, int capacity);
  float *keys(int image, int layer, int head) {
    return data_.data() + ((int64_t(image) * layers_ + layer) * heads_ + head) * block_;
  }
  float *values(int image, int layer, int head) {
    return keys(image, layer, head) + int64_t(d_head_) * capacity_;
  }
  int capacity() const { return capacity_; }
  int64_t bytes() const { return int64_t(data_.size()) * 4; }
  // K and V of every layer and head for all L positions: what one image holds at its last step.
  static int64_t bytes_per_image(const Config &c) {
    return 2 * int64_t(c.positions()) * c.n_layers * c.d_attn() * 4;
  }

private:
  int layers_, heads_, d_head_, capacity_;
  int64_t block_;
  std::vector<float> data_;
};

// Rows are images first, first + 1, ... of the cache; the step's position is params->t. Appends
// position t's keys and values and attends over 0..t: whatever the cache holds at 0..t-1 is used,
// so a benchmark may step at t without steps 0..t-1 first (the time does not depend on values).
class KvOps : public CpuLinearOps<KvOps> {
public:
  KvOps(const Config &c, const ModelView<CpuLinear> &w, const StepBuffers &b, KvCache &cache,
        int first);
  void attention(int layer, int rows);

private:
  KvCache &cache_;
  int first_;
  std::vector<float> scores_;
};

// Rows are the positions 0..rows-1 of one image: the embedding takes each row's own position,
// and the attention is causal over the rows.
class RecomputeOps : public CpuLinearOps<RecomputeOps> {
public:
  RecomputeOps(const Config &c, const ModelView<CpuLinear> &w, const StepBuffers &b);
  void embed(const ModelView<CpuLinear> &w, int rows);
  void attention(int layer, int rows);

private:
  std::vector<float> keys_, values_, scores_; // one layer's keys (transposed) and values
};

// The paper's baseline as a decoder: keeps nothing between steps but the bytes the caller holds.
class RecomputeDecoder {
public:
  RecomputeDecoder(const Config &c, const ModelView<CpuLinear> &w, int rows);
  // images: `rows` images of `stride` bytes. Runs p_0..p_t of each through every layer and
  // writes the mixture parameters of p_{t+1} to o ([rows, 3K]).
  void step(int t, const uint8_t *images, int stride, float *o);
  int rows() const { return rows_; }
  // The activations of a full-length prefix, which one step of one image holds at t = L - 1.
  static int64_t bytes_per_image(const Config &c);

private:
  const Config &c_;
  int rows_;
  Decoder<RecomputeOps> prefix_; // L rows: one image's prefix at a time
};

} // namespace tarnn
