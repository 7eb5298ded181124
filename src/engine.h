// A rollout: step a set of images through every position, feeding a byte where it is known
// (teacher forcing) and sampling it where it is not. Sampling (nothing known), scoring (everything
// known) and completion (a mask) are the same loop.
#pragma once

#include <cstdint>
#include <functional>

#include "cpu_decoder.h"

namespace tarnn {

struct Rollout {
  int64_t count = 0;              // images
  uint64_t seed = 0;              // SPEC section 3
  int64_t first_index = 0;        // the RNG's image index of image 0
  const uint8_t *given = nullptr; // [count, T] bytes fed where known; null: nothing known
  const uint8_t *known = nullptr; // [count, T] nonzero where `given` holds; null: all of `given`
  uint8_t *out = nullptr;         // [count, T] the images (may be `given` itself)
  double *log_prob = nullptr;     // [count] sum of log p(p_{t+1}) over the known p_{t+1}
  int positions = -1;             // stop after this many positions (benchmarks); -1: all L
};

struct RunOptions {
  int batch = 256;        // images whose state is in memory at once
  int threads = 1;        // each steps its own slice of the batch
  bool reference = false; // the plain GEMM path (tests)
  // Called from the calling thread about 5 times a second: positions done over all images.
  std::function<void(int64_t done, int64_t total)> progress;
};

// Checks batch and threads (and that the batch's state fits in memory); throws Error.
void check_run_options(const Config &c, const RunOptions &o);

void run_cpu(const CpuWeights &w, const Rollout &job, const RunOptions &opt);

} // namespace tarnn
