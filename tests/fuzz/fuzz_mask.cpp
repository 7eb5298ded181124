// libFuzzer harness: make_mask on any bytes as a mask PNG, for a 28 x 28 and a 5 x 4 x 2 model.
#include "fuzz_util.h"
#include "tarnn/jobs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = fuzz::scratch("mask.png");
  fuzz::write(path, data, size);
  tarnn::MaskSpec spec;
  spec.png = path;
  for (int small : {0, 1}) {
    tarnn::Config c;
    if (small)
      c.height = 5, c.width = 4, c.channels = 2;
    fuzz::expect_only_errors([&] {
      if (tarnn::make_mask(spec, c).size() != size_t(c.bytes_per_image()))
        __builtin_trap();
    });
  }
  return 0;
}
