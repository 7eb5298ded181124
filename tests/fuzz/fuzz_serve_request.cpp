// libFuzzer harness: tarnn serve's request parser (src/serve/request.h) on any bytes as the body
// of each route, for a 28 x 28 and a 5 x 4 x 2 model. Bad input may only be a RequestError with a
// 4xx status; a request it accepts is well formed (rows within limits, buffers of their size, a
// byte left to generate, a temperature the engine takes). Base64 decoding round-trips whatever it
// accepts.
#include <cmath>
#include <cstdint>
#include <string>

#include "src/serve/request.h"

using namespace tarnn::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string body(reinterpret_cast<const char *>(data), size);
  for (int small : {0, 1}) {
    tarnn::Config c;
    if (small)
      c.height = 5, c.width = 4, c.channels = 2;
    const size_t T = size_t(c.bytes_per_image());
    for (Kind kind : {Kind::Complete, Kind::Sample, Kind::Score}) {
      try {
        const Job j = parse_request(kind, body, c);
        if (j.rows < 1 || j.rows > kMaxSamples || j.given.size() != size_t(j.rows) * T ||
            j.known.size() != j.given.size() || j.images.size() != size_t(j.rows) ||
            !(std::isfinite(float(j.temperature)) && float(j.temperature) > 0.0f))
          __builtin_trap();
        if (kind == Kind::Complete) {
          bool unknown = false;
          for (size_t t = 1; t < T; ++t)
            unknown = unknown || !j.known[t];
          if (!unknown)
            __builtin_trap();
        }
      } catch (const RequestError &e) {
        if (e.status < 400 || e.status > 499)
          __builtin_trap();
      }
    }
  }
  try {
    const std::vector<uint8_t> bytes = base64_decode(body, "fuzz");
    if (base64_encode(bytes.data(), bytes.size()).size() != body.size())
      __builtin_trap();
  } catch (const RequestError &) {
  }
  return 0;
}
