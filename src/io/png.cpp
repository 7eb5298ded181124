// stb_image and stb_image_write, compiled here once, behind files.h. stb's code is not ours to
// warn about (CMakeLists.txt quietens it for this file).
#include <climits>
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

} // namespace

Png png_info(const std::string &path, const std::vector<uint8_t> &raw) {
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
  if (width < 1 || height < 1 || channels < 1 || channels > 4 ||
      int64_t(width) * channels > INT_MAX / 2 || int64_t(width) * height * channels > INT_MAX / 2)
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
