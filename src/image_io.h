// Images in and out: MNIST IDX files and PNGs in, PNG files and grids out. Bytes are raster
// order with channels interleaved, as the model reads them (SPEC section 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

namespace tarnn {

struct ImageSet {
  int64_t count = 0;
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> bytes; // [count, height, width, channels]
};

// An IDX file ([n, h, w] or [n, h, w, c] unsigned bytes) or a PNG; throws Error on anything
// malformed, and when the images are not the model's height, width and channels (no resizing).
ImageSet read_images(const std::string &path, const Config &c);

// Writes path atomically (a temporary file renamed into place): never a half-written PNG.
void write_png(const std::string &path, int width, int height, int channels, const uint8_t *data);

// Images tiled in rows of `cols`, separated by `pad` pixels of value `pad_value`.
ImageSet make_grid(const ImageSet &images, int cols, int pad = 2, uint8_t pad_value = 64);

} // namespace tarnn
