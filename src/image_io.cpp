#include "image_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "error.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace tarnn {

namespace {

std::vector<uint8_t> slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw Error(path + ": read error");
  return data;
}

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

ImageSet read_png(const std::string &path, const std::vector<uint8_t> &raw, const Config &c) {
  int w = 0, h = 0, n = 0;
  if (raw.size() > INT32_MAX || !stbi_info_from_memory(raw.data(), int(raw.size()), &w, &h, &n))
    throw Error(path + ": not a readable PNG (" + stbi_failure_reason() + ")");
  // Alpha is ignored; a gray image for an RGB model, or RGB for a gray one, is an error.
  const int colour = n >= 3 ? 3 : 1;
  if (colour != c.channels)
    throw Error(path + ": PNG has " + std::to_string(colour) +
                (colour == 1 ? " channel" : " channels") + ", the model wants " +
                std::to_string(c.channels));
  ImageSet s{1, h, w, colour, {}};
  check_fits(path, s, c);
  std::unique_ptr<uint8_t, void (*)(void *)> px(
      stbi_load_from_memory(raw.data(), int(raw.size()), &w, &h, &n, colour), stbi_image_free);
  if (!px)
    throw Error(path + ": cannot decode PNG (" + stbi_failure_reason() + ")");
  s.bytes.assign(px.get(), px.get() + size_t(w) * h * colour);
  return s;
}

} // namespace

ImageSet read_images(const std::string &path, const Config &c) {
  const std::vector<uint8_t> raw = slurp(path);
  static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  ImageSet s;
  if (raw.size() >= 8 && std::memcmp(raw.data(), png_magic, 8) == 0)
    s = read_png(path, raw, c);
  else if (raw.size() >= 4)
    s = read_idx(path, raw);
  else
    throw Error(path + ": neither a PNG nor an IDX file (" + std::to_string(raw.size()) +
                " bytes)");
  check_fits(path, s, c);
  if (s.count == 0)
    throw Error(path + ": holds no images");
  return s;
}

void write_png(const std::string &path, int width, int height, int channels, const uint8_t *data) {
  const std::string tmp = path + ".tmp";
  if (!stbi_write_png(tmp.c_str(), width, height, channels, data, width * channels)) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write (does the folder exist and is it writable?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write: " + std::strerror(errno));
  }
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
