// The softmax baselines on the CPU (SPEC section 1), with the same weights and GEMM kernel as the
// RNN-mode decoder: a KV-cache decoder that keeps every earlier key and value (memory grows with
// the position), and a decoder that recomputes the whole prefix at every step (the paper's
// "softmax" row: O(t) work at step t, O(L^2) per image).
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_decoder.h"

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

// Activations of one step's rows, sized for `rows` rows.
struct CpuWorkspace {
  CpuWorkspace(const Config &c, int rows);
  std::vector<float> x, qkv, att, y, hid, scores;
};

class KvCacheDecoder {
public:
  // Steps images [first, first + rows) of `cache`.
  KvCacheDecoder(const CpuWeights &w, KvCache &cache, int first, int rows);
  // As CpuDecoder::step: appends position t's keys and values to the cache and attends over
  // positions 0..t. Whatever is in the cache at 0..t-1 is used, so a benchmark may step at t
  // without steps 0..t-1 first (the time does not depend on the values).
  void step(int t, const uint8_t *bytes, float *o);
  int rows() const { return rows_; }

private:
  const CpuWeights &w_;
  KvCache &cache_;
  int first_, rows_;
  CpuWorkspace s_;
};

class RecomputeDecoder {
public:
  // Steps `rows` images; keeps nothing between steps but the bytes the caller holds.
  RecomputeDecoder(const CpuWeights &w, int rows);
  // images: `rows` images of `stride` bytes. Runs p_0..p_t of each image through every layer
  // (causal softmax attention over the prefix) and writes the mixture parameters for p_{t+1}
  // to o ([rows, 3K]).
  void step(int t, const uint8_t *images, int stride, float *o);
  int rows() const { return rows_; }
  // The activations of a full-length prefix, which one step of one image holds at t = L - 1.
  static int64_t bytes_per_image(const Config &c);

private:
  const CpuWeights &w_;
  int rows_;
  CpuWorkspace s_;            // L rows: one image's prefix at a time
  std::vector<float> kt_, v_; // one layer's keys (transposed) and values, every head
};

} // namespace tarnn
