// The CPU backend in RNN mode: per image only S and z of every layer and head (SPEC section 1),
// stepped one position at a time for a slice of images, with the projections and the
// feed-forward as GEMMs over the slice.
#pragma once

#include <cstdint>
#include <vector>

#include "gemm.h"
#include "model.h"

namespace tarnn {

// The weights in the CPU backend's layout: linear layers packed for the GEMM kernel.
struct CpuWeights {
  struct Layer {
    PackedLinear qkv, out, ff1, ff2;
  };
  explicit CpuWeights(const Model &m);
  const Model &model;
  std::vector<Layer> layers;
  PackedLinear predictor;
};

// S and z for `images` images, fp32, zero at position 0. Per image and per (layer, head) a block
// of (d_head + 1) x d_head floats: rows 0..d_head-1 are S, the last row is z. Its size depends on
// the batch only, never on the position.
class CpuStatePool {
public:
  CpuStatePool(const Config &c, int images);
  float *block(int image, int layer, int head) {
    return data_.data() +
           (int64_t(image) * per_layer_heads_ + int64_t(layer) * heads_ + head) * block_floats_;
  }
  void zero(int first, int count);
  int64_t bytes() const { return int64_t(data_.size()) * 4; }
  int images() const { return images_; }

private:
  int images_, heads_, per_layer_heads_;
  int64_t block_floats_;
  std::vector<float> data_;
};

class CpuDecoder {
public:
  // Steps images [first, first + rows) of `pool`. `reference` takes the plain GEMM path.
  CpuDecoder(const CpuWeights &w, CpuStatePool &pool, int first, int rows, bool reference = false);

  // Feeds byte p_t of every image of the slice at position t and writes the mixture parameters
  // for p_{t+1} to o ([rows, 3K]).
  void step(int t, const uint8_t *bytes, float *o);
  int rows() const { return rows_; }

private:
  void linear(const PackedLinear &pl, const Linear &l, const float *x, float *y, Epilogue e);

  const CpuWeights &w_;
  const Config &c_;
  CpuStatePool &pool_;
  int first_, rows_;
  bool reference_;
  std::vector<float> x_, qkv_, att_, y_, hid_;
};

} // namespace tarnn
