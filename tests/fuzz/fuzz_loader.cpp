// libFuzzer harness: a model folder (config.json + model.safetensors) from one input. The input
// is the config's length (2 bytes, little-endian), the config, then the safetensors file; the
// seed corpus holds the small golden model so mutations start from a valid one.
#include <sys/stat.h>

#include "fuzz_util.h"
#include "tarnn/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string dir = [] {
    const std::string d = fuzz::scratch("model");
    mkdir(d.c_str(), 0700);
    return d;
  }();
  if (size < 2)
    return 0;
  const size_t n = std::min<size_t>(size - 2, data[0] | size_t(data[1]) << 8);
  fuzz::write(dir + "/config.json", data + 2, n);
  fuzz::write(dir + "/model.safetensors", data + 2 + n, size - 2 - n);
  fuzz::expect_only_errors([&] { tarnn::load_model(dir); });
  return 0;
}
