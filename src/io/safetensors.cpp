#include "safetensors.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "json_limits.h"
#include "tarnn/error.h"

namespace tarnn {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;          // safetensors' own limit
constexpr uint64_t kMaxElements = uint64_t(1) << 40; // far above any model, far below overflow
// A safetensors header nests 3 deep ({name: {"shape": [...]}}); metadata may add a little.
constexpr int kMaxDepth = 8;

int dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }

uint64_t read_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d; // the header check bounded the product (kMaxElements)
  return n;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { // subnormal: renormalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while (!(m & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

SafeTensors::SafeTensors(const std::string &path) : path_(path) {
  const int fd = open_regular_file(path);
  struct stat st {};
  ::fstat(fd, &st);
  size_ = size_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw Error(path + ": truncated: " + std::to_string(size_) +
                " bytes, too short for the 8-byte header length");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error(path + ": cannot map: " + std::strerror(errno), Error::Kind::File);
  }
  try {
    const auto *bytes = static_cast<const unsigned char *>(map_);
    const uint64_t n = read_le64(bytes);
    if (n > kMaxHeader)
      throw Error(path + ": header length " + std::to_string(n) + " is over the 100 MB limit");
    if (n > size_ - 8)
      throw Error(path + ": header length " + std::to_string(n) + " runs past the end of the " +
                  std::to_string(size_) + "-byte file (truncated?)");
    const char *text = reinterpret_cast<const char *>(bytes + 8);
    const json header = parse_json(path + ": header", text, size_t(n), kMaxDepth);
    if (header.is_discarded())
      throw Error(path + ": header is not valid JSON");
    if (!header.is_object())
      throw Error(path + ": header is not a JSON object");
    const unsigned char *data = bytes + 8 + n;
    const uint64_t data_size = size_ - 8 - n;
    std::vector<std::pair<uint64_t, std::string>> spans; // (begin, name), to find overlaps
    std::map<std::string, uint64_t> ends;
    for (const auto &[name, info] : header.items()) {
      if (name == "__metadata__")
        continue;
      const std::string where = path + ": tensor " + short_text(name) + ": ";
      if (!info.is_object())
        throw Error(where + "entry is not an object");
      if (!info.contains("dtype") || !info["dtype"].is_string())
        throw Error(where + "no dtype");
      const std::string ds = info["dtype"].get<std::string>();
      DType dtype;
      if (ds == "F32")
        dtype = DType::F32;
      else if (ds == "F16")
        dtype = DType::F16;
      else if (ds == "BF16")
        dtype = DType::BF16;
      else
        throw Error(where + "dtype " + short_text(ds) + " is not supported (F32, F16 or BF16)");
      if (!info.contains("shape") || !info["shape"].is_array() || info["shape"].size() > 8)
        throw Error(where + "shape is not an array of at most 8 sizes");
      std::vector<int64_t> shape;
      uint64_t elements = 1;
      for (const auto &d : info["shape"]) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 32))
          throw Error(where + "shape holds " + short_json(d) + ", not a size");
        const uint64_t size = d.get<uint64_t>();
        shape.push_back(int64_t(size));
        // checked before multiplying: [2^32, 2^32] must not wrap to 0 and pass as empty
        if (size != 0 && elements > kMaxElements / size)
          throw Error(where + "shape " + short_json(info["shape"]) + " is absurdly large");
        elements *= size;
      }
      const auto &off = info.contains("data_offsets") ? info["data_offsets"] : json();
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
          !off[1].is_number_unsigned())
        throw Error(where + "data_offsets is not [begin, end]");
      const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
      if (b > e)
        throw Error(where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                    "] ends before it begins");
      if (e > data_size)
        throw Error(where + "data_offsets end " + std::to_string(e) + " is past the " +
                    std::to_string(data_size) + " bytes of data (truncated file?)");
      if (e - b != elements * dtype_size(dtype)) // elements <= 2^40: no overflow
        throw Error(where + "data_offsets span " + std::to_string(e - b) + " bytes, shape and " +
                    ds + " need " + std::to_string(elements * dtype_size(dtype)));
      tensors_[name] = TensorInfo{dtype, shape, data + b, int64_t(e - b)};
      if (e > b) // an empty tensor occupies no bytes and overlaps nothing
        spans.emplace_back(b, name);
      ends[name] = e;
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      const auto &prev = spans[i - 1];
      if (spans[i].first < ends[prev.second])
        throw Error(path + ": tensors " + short_text(prev.second) + " and " +
                    short_text(spans[i].second) + " overlap in the data");
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafeTensors::~SafeTensors() {
  if (map_)
    ::munmap(map_, size_);
}

std::vector<float> SafeTensors::to_float(const std::string &name) const {
  const TensorInfo &t = tensors_.at(name);
  std::vector<float> out(size_t(t.elements()));
  if (out.empty()) // no memcpy to or from a null pointer
    return out;
  if (t.dtype == DType::F32) {
    std::memcpy(out.data(), t.data, out.size() * 4); // the data need not be 4-byte aligned
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const uint16_t h = uint16_t(t.data[2 * i] | t.data[2 * i + 1] << 8);
    out[i] = t.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
  }
  return out;
}

} // namespace tarnn
