// Which bytes of an image are known when completing it: the occlusion of the paper's Figure 3.
// A mask is [T] bytes in the model's raster order (channels interleaved), nonzero = known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config.h"

namespace tarnn {

// Exactly one way of saying what is kept; with none set, the top half of the rows (Figure 3).
struct MaskSpec {
  std::optional<int64_t> keep_rows; // keep the first R pixel rows
  std::optional<int64_t> keep;      // keep the first N bytes in raster order
  std::string png; // a height x width PNG: nonzero (white) = known, zero (black) = generate
};

// Builds the mask; throws Error when the spec is ambiguous, out of range, the PNG is not the
// image's size, or nothing is left to generate (every byte from p_1 on known).
std::vector<uint8_t> make_mask(const MaskSpec &spec, const Config &c);

// Known bytes in raster order, a word for messages: "392 of 784 bytes known".
std::string describe_mask(const std::vector<uint8_t> &known);

} // namespace tarnn
