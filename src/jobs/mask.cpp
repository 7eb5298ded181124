// Which bytes of an image are known when completing it (include/tarnn/jobs.h: make_mask).
#include <algorithm>

#include "../io/files.h"
#include "tarnn/error.h"
#include "tarnn/jobs.h"

namespace tarnn {

namespace {

// A mask PNG as [height, width] known flags: a pixel is known when any colour channel is
// nonzero (alpha is ignored), so a white-on-black drawing in any PNG flavour works.
std::vector<uint8_t> read_mask_png(const std::string &path, const Config &c) {
  const std::vector<uint8_t> raw = read_file(path);
  const Png info = png_info(path, raw);
  if (info.height != c.height || info.width != c.width)
    throw Error(path + ": mask is " + std::to_string(info.height) + "x" +
                std::to_string(info.width) + ", the images are " + std::to_string(c.height) + "x" +
                std::to_string(c.width) + " (masks are not resized)");
  const Png png = decode_png(path, raw, 0);
  const int n = png.channels;
  const int colour = n >= 3 ? 3 : 1;
  std::vector<uint8_t> pixel(size_t(png.width) * png.height);
  for (size_t i = 0; i < pixel.size(); ++i)
    for (int j = 0; j < colour; ++j)
      pixel[i] |= png.pixels[i * n + j] != 0;
  return pixel;
}

} // namespace

std::vector<uint8_t> make_mask(const MaskSpec &spec, const Config &c) {
  const int T = c.bytes_per_image(), row = c.width * c.channels;
  const int given = spec.keep_rows.has_value() + spec.keep.has_value() + !spec.png.empty();
  if (given > 1)
    throw Error(
        {"give at most one of ", param("keep_rows"), ", ", param("keep"), " and ", param("mask")});
  std::vector<uint8_t> known(T, 0);
  if (!spec.png.empty()) {
    const std::vector<uint8_t> pixel = read_mask_png(spec.png, c);
    for (int i = 0; i < T; ++i)
      known[i] = pixel[i / c.channels]; // a pixel's mask covers all its channels
  } else if (spec.keep) {
    if (*spec.keep < 0 || *spec.keep > T)
      throw Error({param("keep"), " must be in [0, " + std::to_string(T) +
                                      "] (bytes of an image; got " + std::to_string(*spec.keep) +
                                      ")"});
    std::fill(known.begin(), known.begin() + *spec.keep, 1);
  } else {
    const int64_t rows = spec.keep_rows.value_or(c.height / 2);
    if (rows < 0 || rows > c.height)
      throw Error({param("keep_rows"), " must be in [0, " + std::to_string(c.height) + "] (got " +
                                           std::to_string(rows) + ")"});
    std::fill(known.begin(), known.begin() + rows * row, 1);
  }
  check_leaves_work(known.data(), known.size());
  return known;
}

void check_leaves_work(const uint8_t *known, size_t T) {
  // p_0 is never generated (SPEC section 1), so only p_1 .. p_{T-1} count as work to do.
  if (T > 0 && std::all_of(known + 1, known + T, [](uint8_t k) { return k != 0; }))
    throw Error("the mask keeps every pixel: nothing to complete");
}

std::string describe_mask(const std::vector<uint8_t> &known) {
  const auto n = std::count_if(known.begin(), known.end(), [](uint8_t k) { return k != 0; });
  return std::to_string(n) + " of " + std::to_string(known.size()) + " bytes known";
}

} // namespace tarnn
