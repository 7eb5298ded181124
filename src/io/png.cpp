// stb_image and stb_image_write, compiled here once, behind files.h. stb's code is not ours to
// warn about (CMakeLists.txt quietens it for this file).
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "files.h"
#include "tarnn/error.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#define STBI_MAX_DIMENSIONS (1 << 16)
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>

namespace tarnn {

namespace {

// stb says why only sometimes: a NULL reason (a reserved deflate block type, say) is not a crash.
std::string reason() {
  const char *r = stbi_failure_reason();
  return r ? r : "corrupt image data";
}

uint32_t be32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

constexpr int64_t kMaxPixels = int64_t(1) << 26;

// What stb trusts and should not: it allocates what a chunk's length field claims before reading
// it (a 100-byte file asked for 2 GB, found by fuzzing), and inflates IDAT data without a bound
// (a deflate bomb). So, before stb sees the file: every chunk lies inside it, IHDR comes first
// with sizes in range, and the image data inflates to no more than such an image can hold.
void precheck(const std::string &path, const std::vector<uint8_t> &raw) {
  auto bad = [&](const std::string &why) {
    throw Error(path + ": not a readable PNG (" + why + ")");
  };
  if (raw.size() < 8 + 25)
    bad("too short");
  size_t at = 8;
  std::vector<uint8_t> idat;
  uint64_t bound = 0;
  bool ihdr = false, ended = false;
  while (at + 12 <= raw.size()) {
    const uint32_t length = be32(&raw[at]);
    const uint8_t *type = &raw[at + 4], *data = &raw[at + 8];
    if (length > raw.size() - at - 12)
      bad("a chunk runs past the end of the file");
    if (!ihdr) {
      if (std::memcmp(type, "IHDR", 4) != 0 || length != 13)
        bad("no IHDR chunk first");
      const int64_t w = be32(data), h = be32(data + 4);
      const int depth = data[8], colour = data[9];
      const int samples = colour == 2 ? 3 : colour == 4 ? 2 : colour == 6 ? 4 : 1;
      if (w < 1 || h < 1 || w > (1 << 16) || h > (1 << 16) || w * h > kMaxPixels || depth < 1 ||
          depth > 16)
        bad("image size or depth out of range");
      // every row with its filter byte, twice over for interlacing's passes
      bound = 2 * uint64_t(h) * (uint64_t(w) * samples * depth / 8 + 2) + 1024;
      ihdr = true;
    } else if (std::memcmp(type, "IDAT", 4) == 0) {
      idat.insert(idat.end(), data, data + length);
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      ended = true;
      break;
    }
    at += 12 + size_t(length);
  }
  // a last chunk too short for its header and CRC: stb would still read its length and allocate
  // it (a 207-byte file whose 11 last bytes claimed 1.9 GB, found by fuzzing the mask reader)
  if (!ended && at < raw.size())
    bad("a chunk runs past the end of the file");
  if (!ihdr || idat.empty())
    return; // stb says what is missing
  // deflate expands at most 1032-fold: no need to hold more than the data could ever become
  bound = std::min<uint64_t>(bound, 1032 * uint64_t(idat.size()) + 1024);
  std::vector<char> out(static_cast<size_t>(bound));
  if (idat.size() > size_t(INT_MAX) ||
      stbi_zlib_decode_buffer(out.data(), int(out.size()),
                              reinterpret_cast<const char *>(idat.data()), int(idat.size())) < 0)
    throw Error(path + ": cannot decode PNG (its image data is corrupt, or larger than an image "
                       "of its size)");
}

} // namespace

Png png_info(const std::string &path, const std::vector<uint8_t> &raw) {
  precheck(path, raw);
  Png p;
  if (raw.size() > size_t(INT_MAX) ||
      !stbi_info_from_memory(raw.data(), int(raw.size()), &p.width, &p.height, &p.channels))
    throw Error(path + ": not a readable PNG (" + reason() + ")");
  return p;
}

Png decode_png(const std::string &path, const std::vector<uint8_t> &raw, int channels) {
  Png p = png_info(path, raw);
  int w = 0, h = 0, n = 0;
  std::unique_ptr<uint8_t, void (*)(void *)> px(
      stbi_load_from_memory(raw.data(), int(raw.size()), &w, &h, &n, channels), stbi_image_free);
  if (!px)
    throw Error(path + ": cannot decode PNG (" + reason() + ")");
  const int c = channels ? channels : n;
  p.pixels.assign(px.get(), px.get() + size_t(w) * size_t(h) * size_t(c));
  return p;
}

std::vector<uint8_t> encode_png(int width, int height, int channels, const uint8_t *data) {
  if (width < 1 || height < 1 || channels < 1 || channels > 4)
    throw Error("cannot encode a PNG of " + std::to_string(width) + "x" + std::to_string(height) +
                "x" + std::to_string(channels) +
                " (a PNG has at least 1x1 pixels, of 1 to 4 channels)");
  if (int64_t(width) * channels > INT_MAX / 2 || int64_t(width) * height * channels > INT_MAX / 2)
    throw Error("cannot encode a PNG of " + std::to_string(width) + "x" + std::to_string(height) +
                "x" + std::to_string(channels) + " (too large for one file)");
  std::vector<uint8_t> out;
  auto append = [](void *ctx, void *bytes, int n) {
    auto *o = static_cast<std::vector<uint8_t> *>(ctx);
    o->insert(o->end(), static_cast<uint8_t *>(bytes), static_cast<uint8_t *>(bytes) + n);
  };
  if (!stbi_write_png_to_func(append, &out, width, height, channels, data, width * channels))
    throw Error("cannot encode a PNG of " + std::to_string(width) + "x" + std::to_string(height));
  return out;
}

} // namespace tarnn
