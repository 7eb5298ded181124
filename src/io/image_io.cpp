// Images in (IDX and PNG) and grids out (include/tarnn/io.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "files.h"
#include "npy.h"
#include "tarnn/error.h"
#include "tarnn/io.h"

namespace tarnn {

namespace {

std::string dims(int h, int w, int c) {
  return std::to_string(h) + "x" + std::to_string(w) + " with " + std::to_string(c) +
         (c == 1 ? " channel" : " channels");
}

void check_fits(const std::string &path, const ImageSet &s, const Config &c) {
  if (s.height != c.height || s.width != c.width || s.channels != c.channels)
    throw Error(path + ": images are " + dims(s.height, s.width, s.channels) +
                ", the model wants " + dims(c.height, c.width, c.channels) +
                " (images are not resized)");
}

ImageSet read_idx(const std::string &path, const std::vector<uint8_t> &raw) {
  const int ndim = raw[3];
  if (raw[0] || raw[1] || raw[2] != 0x08 || ndim < 3 || ndim > 4)
    throw Error(path + ": not an IDX file of unsigned-byte images ([n, h, w] or [n, h, w, c])");
  if (raw.size() < size_t(4 + 4 * ndim))
    throw Error(path + ": truncated IDX header");
  uint64_t d[4] = {1, 1, 1, 1};
  for (int i = 0; i < ndim; ++i)
    d[i] = uint64_t(raw[4 + 4 * i]) << 24 | raw[5 + 4 * i] << 16 | raw[6 + 4 * i] << 8 |
           raw[7 + 4 * i];
  if (d[1] > 65536 || d[2] > 65536 || d[3] > 4)
    throw Error(path + ": image dimensions out of range");
  // 128 bits: four 32-bit dimensions of a hostile header would overflow 64
  const unsigned __int128 want = (unsigned __int128)d[0] * d[1] * d[2] * d[3];
  const uint64_t have = raw.size() - 4 - 4 * ndim;
  if (have != want)
    throw Error(path + ": " + (have < want ? "truncated" : "trailing bytes") + ": header says " +
                std::to_string(d[0]) + " images of " + std::to_string(d[1] * d[2] * d[3]) +
                " bytes, the file holds " + std::to_string(have) + " bytes of images");
  ImageSet s;
  s.count = int64_t(d[0]);
  s.height = int(d[1]);
  s.width = int(d[2]);
  s.channels = int(d[3]);
  s.bytes.assign(raw.begin() + 4 + 4 * ndim, raw.end());
  return s;
}

// `c` null: the PNG's channels as stored.
ImageSet read_png(const std::string &path, const std::vector<uint8_t> &raw, const Config *c) {
  const Png info = png_info(path, raw);
  if (!c) {
    ImageSet s{1, info.height, info.width, info.channels, {}};
    s.bytes = decode_png(path, raw, info.channels).pixels;
    return s;
  }
  // The model's channels when the PNG stores exactly those (tarnn's own outputs, 1 to 4 channels),
  // else its colour without alpha; a gray image for an RGB model, or RGB for a gray one, is an
  // error.
  const int colour = info.channels == c->channels ? c->channels : info.channels >= 3 ? 3 : 1;
  static const char *const kinds[] = {"", " (gray)", " (gray and alpha)", " (RGB)",
                                      " (RGB and alpha)"};
  if (colour != c->channels)
    throw Error(path + ": PNG has " + std::to_string(info.channels) +
                (info.channels == 1 ? " channel" : " channels") + kinds[info.channels] +
                ", the model wants " + std::to_string(c->channels));
  ImageSet s{1, info.height, info.width, colour, {}};
  check_fits(path, s, *c);
  s.bytes = decode_png(path, raw, colour).pixels;
  return s;
}

ImageSet read_any(const std::string &path, const Config *c) {
  const std::vector<uint8_t> raw = read_file(path);
  static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  ImageSet s;
  if (raw.size() >= 8 && std::memcmp(raw.data(), png_magic, 8) == 0)
    s = read_png(path, raw, c);
  else if (is_npy(raw))
    s = read_npy(path, raw, c);
  else if (raw.size() >= 4 && std::memcmp(raw.data(), "PK\x03\x04", 4) == 0) // numpy.savez
    throw Error(path + ": a .npz (a zip of arrays, numpy.savez) is not read: save one array with "
                       "numpy.save as .npy");
  else if (raw.size() >= 4)
    s = read_idx(path, raw);
  else
    throw Error(path + ": neither a PNG, an IDX nor a .npy file (" + std::to_string(raw.size()) +
                " bytes)");
  if (c)
    check_fits(path, s, *c);
  if (s.count == 0)
    throw Error(path + ": holds no images");
  return s;
}

} // namespace

ImageSet read_images(const std::string &path, const Config &c) { return read_any(path, &c); }

ImageSet read_images(const std::string &path) { return read_any(path, nullptr); }

int grid_scale(int width, int height) {
  return std::clamp(600 / std::max({width, height, 1}), 1, 8);
}

ImageSet scale_image(const ImageSet &in, int scale) {
  if (scale <= 1)
    return in;
  ImageSet out{in.count, in.height * scale, in.width * scale, in.channels, {}};
  out.bytes.resize(size_t(out.count) * out.bytes_per_image());
  const size_t C = size_t(in.channels);
  for (int64_t i = 0; i < in.count; ++i)
    for (int y = 0; y < out.height; ++y)
      for (int x = 0; x < out.width; ++x)
        std::memcpy(&out.bytes[size_t(i) * out.bytes_per_image() + (size_t(y) * out.width + x) * C],
                    in.image(i) + (size_t(y / scale) * in.width + size_t(x / scale)) * C, C);
  return out;
}

int grid_columns(int64_t count) {
  int cols = int(std::ceil(std::sqrt(double(std::max<int64_t>(count, 1)))));
  while (int64_t(cols) * cols < count) // sqrt's rounding
    ++cols;
  return cols;
}

int64_t check_grid(int64_t count, int height, int width, int channels, int cols, int pad) {
  if (count > kMaxGridImages)
    throw Error({"a grid of " + std::to_string(count) + " images is over the " +
                     std::to_string(kMaxGridImages) + " a grid holds: write one PNG per image (",
                 param("out_dir"), ") instead"});
  cols = std::max(1, int(std::min<int64_t>(cols, count)));
  const int64_t rows = (count + cols - 1) / cols;
  const int64_t bytes =
      (rows * height + (rows + 1) * pad) * (int64_t(cols) * width + (cols + 1) * pad) * channels;
  if (bytes > kMaxGridBytes)
    throw Error({"a grid of " + std::to_string(count) + " images of " + std::to_string(height) +
                     "x" + std::to_string(width) + " is " + std::to_string(bytes / 1000000) +
                     " MB, over the " + std::to_string(kMaxGridBytes / 1000000) +
                     " MB a grid PNG holds: write one PNG per image (",
                 param("out_dir"), ") instead"});
  return bytes;
}

ImageSet make_grid(const ImageSet &in, int cols, int pad, uint8_t pad_value) {
  const int n = int(in.count), C = in.channels;
  cols = std::max(1, std::min(cols, n));
  const int rows = (n + cols - 1) / cols;
  ImageSet g{1, rows * in.height + (rows + 1) * pad, cols * in.width + (cols + 1) * pad, C, {}};
  g.bytes.assign(size_t(g.height) * g.width * C, pad_value);
  const size_t per = size_t(in.height) * in.width * C;
  for (int i = 0; i < n; ++i) {
    const int y0 = pad + (i / cols) * (in.height + pad), x0 = pad + (i % cols) * (in.width + pad);
    for (int y = 0; y < in.height; ++y)
      std::memcpy(&g.bytes[(size_t(y0 + y) * g.width + x0) * C],
                  &in.bytes[i * per + size_t(y) * in.width * C], size_t(in.width) * C);
  }
  return g;
}

} // namespace tarnn
