// Softmax attention (docs/SPEC.md section 1) with the same weights, the same forward
// (model/forward.h) and any backend's host Kernels (model/host_ops.h: its GEMM and LayerNorm); only
// the attention op differs.
//   KvOps: a KV cache keeps every earlier key and value (memory grows with the position). The
//   engine runs a softmax model's jobs with it (the CPU backend's rollout), and the benchmark
//   times it.
//   KvPrefillOps: the known leading bytes of one image as rows of one forward (model/prefill.h),
//   filling that image's cache with causal attention: the steps' bits.
//   RecomputeOps: the whole prefix p_0..p_t runs through every layer at every step, one row per
//   position (the paper's "softmax" row: O(t) work at step t, O(L^2) per image).
// All call kernels/softmax_attention.h on the same keys and values, so they agree to the bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "../model/decoder.h"
#include "../model/host_ops.h"

namespace tarnn {

// Keys and values of positions 0..capacity-1 for `images` images, fp32. Per image, layer and
// head: the keys transposed [d_head, capacity] (see kernels/softmax_attention.h), then the values
// [capacity, d_head]; at capacity L an image's cache is memory_bytes_per_image (numerics.h) bytes.
// Either its own memory, allocated (and touched) whole, so a step never waits on a page fault, or
// a view of memory laid out so (a batch's state block, model/batch.h: one image's cache a row).
class KvCache {
public:
  KvCache(const Config &c, int images, int capacity);
  KvCache(const Config &c, void *memory, int images, int capacity); // a view
  KvCache(const KvCache &) = delete;
  KvCache &operator=(const KvCache &) = delete;
  float *keys(int image, int layer, int head) {
    return data_ + ((int64_t(image) * layers_ + layer) * heads_ + head) * block_;
  }
  float *values(int image, int layer, int head) {
    return keys(image, layer, head) + int64_t(d_head_) * capacity_;
  }
  int capacity() const { return capacity_; }
  int64_t bytes() const { return int64_t(images_) * layers_ * heads_ * block_ * 4; }
  // K and V of every layer and head for all L positions: what one image holds at its last step.
  static int64_t bytes_per_image(const Config &c) { return kv_cache_bytes_per_image(c); }

private:
  int images_, layers_, heads_, d_head_, capacity_;
  int64_t block_;
  std::vector<float> own_;
  float *data_;
};

// One layer's attention over a KV cache for `rows` rows, images first, first + 1, ... of the cache,
// at position b.params->t: appends the keys and values of t and attends over 0..t. `scores`:
// room for L floats.
void kv_attention(const Config &c, const StepBuffers &b, KvCache &cache, int first, int layer,
                  int rows, float *scores);

// One layer's attention for `rows` rows that are positions t, t + 1, ... of image 0 of the cache
// (t = b.params->t): appends their keys and values, then row r attends over 0..t+r, as the step
// at t + r does.
void kv_attention_positions(const Config &c, const StepBuffers &b, KvCache &cache, int layer,
                            int rows, float *scores);

// One layer's causal attention over `rows` rows that are positions 0..rows-1 of one image; keys
// and values: room for one layer's L x d_attn each; scores: L floats.
void prefix_attention(const Config &c, const StepBuffers &b, int rows, float *keys, float *values,
                      float *scores);

// Throws unless each state row of `b` is one image's full-length KV cache (batch_layout of a
// softmax model).
void check_kv_rows(const Config &c, const StepBuffers &b);

// Rows are images first, first + 1, ... of the cache; the step's position is params->t. Whatever
// the cache holds at 0..t-1 is used, so a benchmark may step at t without steps 0..t-1 first (the
// time does not depend on values). Without a cache the batch's state block is the cache, one image
// a row (a rollout: every image starts at position 0 and writes 0..t-1 before it reads them, so
// nothing needs zeroing between chunks).
template <class Kernels> class KvOps : public HostOps<KvOps<Kernels>, Kernels> {
public:
  KvOps(const Config &c, const ModelView &w, const StepBuffers &b, Kernels k, KvCache &cache,
        int first)
      : HostOps<KvOps, Kernels>(c, w, b, k), cache_(cache), first_(first),
        scores_(size_t(c.positions())) {}
  KvOps(const Config &c, const ModelView &w, const StepBuffers &b, Kernels k = {})
      : HostOps<KvOps, Kernels>(c, w, b, k),
        own_(std::make_unique<KvCache>(c, b.state, b.rows, c.positions())), cache_(*own_),
        first_(0), scores_(size_t(c.positions())) {
    check_kv_rows(c, b);
  }
  void attention(int layer, int rows) {
    kv_attention(this->c_, this->b_, cache_, first_, layer, rows, scores_.data());
  }

private:
  std::unique_ptr<KvCache> own_; // the view of the batch's state block, if that is the cache
  KvCache &cache_;
  int first_;
  std::vector<float> scores_;
};

// model/prefill.h's Pre for a softmax model: rows are consecutive positions of one image, whose
// cache is buffers().state (a layout with one state row). Each row's keys and values are the
// step's (the GEMM's elements do not depend on the rows beside them) and each row attends over
// the same keys as the step at its position, so the cache, the images and the log-likelihoods
// are the step-by-step rollout's, bit for bit; the GEMMs read their weights once for up to
// kPrefillRows positions.
template <class Kernels> class KvPrefillOps : public HostOps<KvPrefillOps<Kernels>, Kernels> {
public:
  KvPrefillOps(const Config &c, const ModelView &w, const StepBuffers &b, Kernels k = {})
      : HostOps<KvPrefillOps, Kernels>(c, w, b, k), cache_(c, b.state, 1, c.positions()),
        scores_(size_t(c.positions())) {
    check_kv_rows(c, b);
  }
  void embed(const ModelView &w, int rows) { this->embed_positions(w, rows); }
  void attention(int layer, int rows) {
    kv_attention_positions(this->c_, this->b_, cache_, layer, rows, scores_.data());
  }
  bool worth_prefilling(int, int) const { return true; } // on the CPU, as for linear attention

private:
  KvCache cache_;
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
