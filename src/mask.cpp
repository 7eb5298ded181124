#include "mask.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "error.h"

// stb's implementation is compiled once, in image_io.cpp; this file only calls it.
#define STBI_NO_STDIO
#include <stb/stb_image.h>

namespace tarnn {

namespace {

// A mask PNG as [height, width] known flags: a pixel is known when any colour channel is
// nonzero (alpha is ignored), so a white-on-black drawing in any PNG flavour works.
std::vector<uint8_t> read_mask_png(const std::string &path, const Config &c) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  const std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
  int w = 0, h = 0, n = 0;
  if (raw.size() > INT32_MAX || !stbi_info_from_memory(raw.data(), int(raw.size()), &w, &h, &n))
    throw Error(path + ": not a readable PNG mask (" + stbi_failure_reason() + ")");
  if (h != c.height || w != c.width)
    throw Error(path + ": mask is " + std::to_string(h) + "x" + std::to_string(w) +
                ", the images are " + std::to_string(c.height) + "x" + std::to_string(c.width) +
                " (masks are not resized)");
  std::unique_ptr<uint8_t, void (*)(void *)> px(
      stbi_load_from_memory(raw.data(), int(raw.size()), &w, &h, &n, 0), stbi_image_free);
  if (!px)
    throw Error(path + ": cannot decode PNG mask (" + stbi_failure_reason() + ")");
  const int colour = n >= 3 ? 3 : 1;
  std::vector<uint8_t> pixel(size_t(w) * h);
  for (size_t i = 0; i < pixel.size(); ++i)
    for (int j = 0; j < colour; ++j)
      pixel[i] |= px.get()[i * n + j] != 0;
  return pixel;
}

} // namespace

std::vector<uint8_t> make_mask(const MaskSpec &spec, const Config &c) {
  const int T = c.bytes_per_image(), row = c.width * c.channels;
  const int given = spec.keep_rows.has_value() + spec.keep.has_value() + !spec.png.empty();
  if (given > 1)
    throw Error("give at most one of --keep-rows, --keep and --mask");
  std::vector<uint8_t> known(T, 0);
  if (!spec.png.empty()) {
    const std::vector<uint8_t> pixel = read_mask_png(spec.png, c);
    for (int i = 0; i < T; ++i)
      known[i] = pixel[i / c.channels]; // a pixel's mask covers all its channels
  } else if (spec.keep) {
    if (*spec.keep < 0 || *spec.keep > T)
      throw Error("--keep must be in [0, " + std::to_string(T) + "] (bytes of an image; got " +
                  std::to_string(*spec.keep) + ")");
    std::fill(known.begin(), known.begin() + *spec.keep, 1);
  } else {
    const int64_t rows = spec.keep_rows.value_or(c.height / 2);
    if (rows < 0 || rows > c.height)
      throw Error("--keep-rows must be in [0, " + std::to_string(c.height) + "] (got " +
                  std::to_string(rows) + ")");
    std::fill(known.begin(), known.begin() + rows * row, 1);
  }
  // p_0 is never generated (SPEC section 1), so only p_1 .. p_{T-1} count as work to do.
  if (std::all_of(known.begin() + 1, known.end(), [](uint8_t k) { return k != 0; }))
    throw Error("the mask keeps every pixel: nothing to complete");
  return known;
}

std::string describe_mask(const std::vector<uint8_t> &known) {
  const auto n = std::count_if(known.begin(), known.end(), [](uint8_t k) { return k != 0; });
  return std::to_string(n) + " of " + std::to_string(known.size()) + " bytes known";
}

} // namespace tarnn
