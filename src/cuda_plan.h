// Host-side arithmetic of the CUDA backend, compiled in every build so the CPU tests cover it:
// where each buffer of a batch lives in its one device allocation, and how many images fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "config.h"

namespace tarnn {

// Byte offsets of a batch's buffers inside one allocation (each 256-byte aligned), for `rows`
// images: activations x [rows, d_model], qkv [rows, 3 d_attn], att [rows, d_attn],
// y [rows, d_model], hid [rows, d_ff], o [rows, 3K]; the state S and z of every layer and head
// [rows, state_floats_per_image]; bytes cur [rows], out/given/known [rows, T]; log_prob [rows];
// and the step parameters.
struct BatchLayout {
  int64_t rows = 0;
  size_t x = 0, qkv = 0, att = 0, y = 0, hid = 0, o = 0, state = 0, cur = 0, out = 0, given = 0,
         known = 0, log_prob = 0, params = 0, total = 0;
  size_t state_bytes = 0; // S and z of all rows: rows * state_floats_per_image * 4, no more
};

BatchLayout batch_layout(const Config &c, int64_t rows);

// Device bytes one more image adds to a batch (state, activations, bytes), alignment aside.
int64_t cuda_bytes_per_image(const Config &c);

// The most images an automatic batch holds: more gains nothing once the GPU is full, and it keeps
// every index of a launch far from 32-bit limits.
constexpr int64_t kMaxAutoBatch = 65536;
constexpr int64_t kMaxBatch = 1 << 22;

// Free memory to leave for cuBLAS, the CUDA graph and the driver.
int64_t cuda_memory_reserve(int64_t free_bytes);

// The batch for `count` images on a device with `free_bytes` free (weights already resident):
// `requested` > 0 is taken (capped at count) if it fits, else an Error saying how much it needs
// and what is free; 0 is as many as fit (capped at count and kMaxAutoBatch). An Error too when
// not even one image fits.
int plan_batch(const Config &c, int64_t requested, int64_t count, int64_t free_bytes,
               const std::string &device);

} // namespace tarnn
