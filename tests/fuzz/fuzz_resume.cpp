// libFuzzer harness: `sample --resume` over any record and any partial .npy. The input is a
// record's length (2 bytes, little-endian; 0: no record), the record's text, then the bytes of the
// .npy.partial it describes. Whatever they hold, a resume either refuses with one Error, touching
// nothing, or goes on: then the array it finishes holds the images its record vouched for,
// unchanged, and the new ones after them, and nothing else.
#include <filesystem>

#include "fuzz_util.h"
#include "tarnn/io.h"
#include "tarnn/outputs.h"

namespace {

constexpr int64_t kN = 10, kH = 5, kW = 4, kC = 2, kImage = kH * kW * kC;
const char kRun[] = R"({"n": 10, "seed": 1, "shape": [5, 4, 2]})";

// Image i of the run as this harness writes it (any fixed bytes do).
tarnn::ImageSet image(int64_t i) {
  tarnn::ImageSet s{1, int(kH), int(kW), int(kC), std::vector<uint8_t>(kImage)};
  for (int64_t b = 0; b < kImage; ++b)
    s.bytes[size_t(b)] = uint8_t(i * 37 + b * 11);
  return s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string dir = fuzz::scratch("resume");
  static const std::string npy = dir + "/a.npy", record = npy + ".partial.json";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const size_t length = size >= 2 ? std::min<size_t>(size - 2, data[0] | data[1] << 8) : 0;
  if (length > 0) // (a length of 0: no record, as before a run's first batch)
    fuzz::write(record, data + 2, length);
  const size_t partial = std::min<size_t>(size, 2 + length);
  fuzz::write(npy + ".partial", data + partial, size - partial);
  const std::vector<uint8_t> before(data + partial, data + size);
  int64_t done = -1;
  fuzz::expect_only_errors([&] {
    tarnn::ResumeRecord r(record, kRun);
    done = r.load();
    auto out = tarnn::npy_sink(npy, kN, kH, kW, kC, done);
    r.verify(*out);
    if (done < 0 || done > kN)
      __builtin_trap(); // a count no run could have written, trusted
    const tarnn::ImageSet vouched = out->read_back(done);
    for (int64_t i = done; i < kN; ++i)
      out->add(image(i)), r.add(image(i));
    out->finish();
    r.finish();
    const tarnn::ImageSet all = tarnn::read_images(npy);
    if (all.count != kN ||
        !std::equal(vouched.bytes.begin(), vouched.bytes.end(), all.bytes.begin()))
      __builtin_trap(); // the images written before were not kept as they were
    for (int64_t i = done; i < kN; ++i)
      if (!std::equal(all.image(i), all.image(i) + kImage, image(i).bytes.begin()))
        __builtin_trap();
    done = -2; // finished
  });
  // refused after the record was read: the partial is as it was (nothing truncated or written)
  if (done >= 0 && std::filesystem::exists(npy + ".partial")) {
    const std::vector<uint8_t> after = [&] {
      std::vector<uint8_t> b(std::filesystem::file_size(npy + ".partial"));
      FILE *f = std::fopen((npy + ".partial").c_str(), "rb");
      if (!f || (b.size() && std::fread(b.data(), 1, b.size(), f) != b.size()))
        __builtin_trap();
      std::fclose(f);
      return b;
    }();
    if (done > 0 && after != before)
      __builtin_trap();
  }
  return 0;
}
