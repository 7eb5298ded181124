// Reading NumPy .npy files of uint8 images (npy.cpp); writing is include/tarnn/io.h: NpyWriter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tarnn/io.h"

namespace tarnn {

bool is_npy(const std::vector<uint8_t> &raw);
ImageSet read_npy(const std::string &path, const std::vector<uint8_t> &raw);

} // namespace tarnn
