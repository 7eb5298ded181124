// libFuzzer harness: read_images on any bytes, as an IDX file, a PNG or a NumPy .npy (by the
// file's first bytes, as the reader decides; the corpus seeds each), for models of three shapes:
// 28x28x1, 5x4x2 and 8x8x3.
#include "fuzz_util.h"
#include "tarnn/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = fuzz::scratch("images");
  fuzz::write(path, data, size);
  static const int shapes[3][3] = {{28, 28, 1}, {5, 4, 2}, {8, 8, 3}};
  for (const auto &shape : shapes) {
    tarnn::Config c;
    c.height = shape[0], c.width = shape[1], c.channels = shape[2];
    fuzz::expect_only_errors([&] {
      const tarnn::ImageSet s = tarnn::read_images(path, c);
      if (s.bytes.size() != size_t(s.count) * c.bytes_per_image()) // what the reader promises
        __builtin_trap();
    });
  }
  return 0;
}
