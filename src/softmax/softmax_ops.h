// The paper's softmax baselines (docs/SPEC.md section 1), for the benchmark: the same weights, the
// same forward (model/forward.h) and any backend's host Kernels (model/host_ops.h: its GEMM and
// LayerNorm); only the attention op differs.
//   KvOps: a KV cache keeps every earlier key and value (memory grows with the position).
//   RecomputeOps: the whole prefix p_0..p_t runs through every layer at every step, one row per
//   position (the paper's "softmax" row: O(t) work at step t, O(L^2) per image).
// Both call kernels/softmax_attention.h on the same keys and values, so they agree to the bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "../model/decoder.h"
#include "../model/host_ops.h"

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

// One layer's attention over a KV cache for `rows` rows, images first, first + 1, ... of the cache,
// at position b.params->t: appends the keys and values of t and attends over 0..t. `scores`:
// room for L floats.
void kv_attention(const Config &c, const StepBuffers &b, KvCache &cache, int first, int layer,
                  int rows, float *scores);

// One layer's causal attention over `rows` rows that are positions 0..rows-1 of one image; keys
// and values: room for one layer's L x d_attn each; scores: L floats.
void prefix_attention(const Config &c, const StepBuffers &b, int rows, float *keys, float *values,
                      float *scores);

// Rows are images first, first + 1, ... of the cache; the step's position is params->t. Whatever
// the cache holds at 0..t-1 is used, so a benchmark may step at t without steps 0..t-1 first (the
// time does not depend on values).
template <class Kernels> class KvOps : public HostOps<KvOps<Kernels>, Kernels> {
public:
  KvOps(const Config &c, const ModelView &w, const StepBuffers &b, Kernels k, KvCache &cache,
        int first)
      : HostOps<KvOps, Kernels>(c, w, b, k), cache_(cache), first_(first),
        scores_(size_t(c.positions())) {}
  void attention(int layer, int rows) {
    kv_attention(this->c_, this->b_, cache_, first_, layer, rows, scores_.data());
  }

private:
  KvCache &cache_;
  int first_;
  std::vector<float> scores_;
};

// Rows are the positions 0..rows-1 of one image: the embedding takes each row's own position,
// and the attention is causal over the rows.
template <class Kernels> class RecomputeOps : public HostOps<RecomputeOps<Kernels>, Kernels> {
public:
  RecomputeOps(const Config &c, const ModelView &w, const StepBuffers &b, Kernels k)
      : HostOps<RecomputeOps, Kernels>(c, w, b, k),
        keys_(size_t(c.positions()) * size_t(c.d_attn())), values_(keys_.size()),
        scores_(size_t(c.positions())) {}
  void embed(const ModelView &w, int rows) {
    this->b_.params->t = 0; // row p is position p: e_p = [E[p_p] | P[p]]
    this->embed_positions(w, rows);
  }
  void attention(int layer, int rows) {
    (void)layer; // keys and values are recomputed for every layer: nothing is kept
    prefix_attention(this->c_, this->b_, rows, keys_.data(), values_.data(), scores_.data());
  }

private:
  std::vector<float> keys_, values_, scores_; // one layer's keys (transposed) and values
};

// The activations of a full-length prefix, which one step of one image holds at t = L - 1.
int64_t recompute_bytes_per_image(const Config &c);

// The paper's baseline as a decoder: keeps nothing between steps but the bytes the caller holds.
template <class Kernels> class RecomputeDecoder {
public:
  RecomputeDecoder(const Config &c, const ModelView &w, int rows, Kernels k)
      : c_(c), rows_(rows), prefix_(c, w, c.positions(), std::nullopt, k) {}
  // images: `rows` images of `stride` bytes. Runs p_0..p_t of each through every layer and
  // writes the mixture parameters of p_{t+1} to o ([rows, 3K]).
  void step(int t, const uint8_t *images, int stride, float *o) {
    const int L = c_.positions(), K3 = c_.d_out();
    if (t < 0 || t >= L)
      throw Error("position " + std::to_string(t) + " is outside [0, " + std::to_string(L) + ")");
    const StepBuffers &b = prefix_.buffers();
    for (int r = 0; r < rows_; ++r) { // one image's prefix at a time: t + 1 rows, every layer
      std::memcpy(b.cur, images + size_t(r) * stride, size_t(t) + 1);
      prefix_.forward_rows(t + 1);
      std::memcpy(o + size_t(r) * K3, b.o + size_t(t) * K3, size_t(K3) * 4); // p_{t+1} only
    }
  }
  int rows() const { return rows_; }

private:
  const Config &c_;
  int rows_;
  Decoder<RecomputeOps<Kernels>> prefix_; // L rows: one image's prefix at a time
};

} // namespace tarnn
