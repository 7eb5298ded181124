// What a step of the CUDA backend reads that changes between steps or chunks, kept in device
// memory so that one captured CUDA graph serves every position: the graph's kernel arguments are
// fixed, and the position advances by a kernel at the end of each step.
#pragma once

#include <cstdint>

#include "tarnn_math.h"

namespace tarnn {

// How one image's bytes are drawn: its random numbers (SPEC section 3: the run's seed and the
// image's index in it) and the temperature of its sampler (SPEC section 2).
struct DrawKey {
  uint64_t seed = 0;
  uint64_t image = 0;
  float temperature = 1.0f;
};

struct StepParams {
  int32_t t = 0;            // the position the next step feeds
  int32_t has_given = 0;    // bytes are fed where known (teacher forcing) ...
  int32_t has_known = 0;    // ... and a mask says where; without one, everything given is known
  float temperature = 1.0f; // the sampler's (SPEC section 2)
  uint64_t seed = 0;        // SPEC section 3
  uint64_t image_base = 0;  // the RNG's image index of row 0 of the chunk
  // [rows] each row's own key, in the batch's memory (a server merges requests of different
  // seeds and temperatures into one batch); null: row r draws with (seed, image_base + r,
  // temperature).
  const DrawKey *keys = nullptr;
};

TARNN_HD void advance_position(StepParams *p) { p->t += 1; }

} // namespace tarnn
