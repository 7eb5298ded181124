// Reading NumPy .npy files of uint8 images (npy.cpp); writing is include/tarnn/io.h: NpyWriter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tarnn/config.h"
#include "tarnn/io.h"

namespace tarnn {

bool is_npy(const std::vector<uint8_t> &raw);
// The images of an .npy of uint8 (n, h, w) or (n, h, w, c); an Error saying what it holds and what
// is wanted otherwise: another dtype, a channels-first batch (NCHW: the model's (n, C, H, W) where
// `model` is given, else a second axis of at most 4 and a last one of more).
ImageSet read_npy(const std::string &path, const std::vector<uint8_t> &raw,
                  const Config *model = nullptr);

} // namespace tarnn
