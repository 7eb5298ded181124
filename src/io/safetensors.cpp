#include "safetensors.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
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

namespace {

// One header entry as a TensorInfo (its offset in the file: `base` plus data_offsets' begin);
// Error naming what is wrong with it.
TensorInfo tensor_of(const std::string &where, const json &info, uint64_t base,
                     uint64_t data_size) {
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
    throw Error(where + "data_offsets span " + std::to_string(e - b) + " bytes, shape and " + ds +
                " need " + std::to_string(elements * dtype_size(dtype)));
  return TensorInfo{dtype, shape, base + b, int64_t(e - b)};
}

} // namespace

SafeTensors::SafeTensors(const std::string &path) : path_(path) {
  fd_ = open_regular_file(path);
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))
      throw Error(path + ": not a regular file", Error::Kind::File);
    stamp_ = stamp_of(st);
    const uint64_t size = uint64_t(st.st_size);
    if (size < 8)
      throw Error(path + ": truncated: " + std::to_string(size) +
                  " bytes, too short for the 8-byte header length");
    header_.resize(8);
    read_at(0, header_.data(), 8);
    const uint64_t n = read_le64(reinterpret_cast<const unsigned char *>(header_.data()));
    if (n > kMaxHeader)
      throw Error(path + ": header length " + std::to_string(n) + " is over the 100 MB limit");
    if (n > size - 8)
      throw Error(path + ": header length " + std::to_string(n) + " runs past the end of the " +
                  std::to_string(size) + "-byte file (truncated?)");
    header_.resize(8 + n);
    read_at(8, header_.data() + 8, n);
    parse_header(n, size - 8 - n);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

void SafeTensors::parse_header(uint64_t n, uint64_t data_size) {
  const char *text = header_.data() + 8;
  const json header = parse_json(path_ + ": header", text, size_t(n), kMaxDepth);
  if (header.is_discarded())
    throw Error(path_ + ": header is not valid JSON");
  if (!header.is_object())
    throw Error(path_ + ": header is not a JSON object");
  std::vector<std::pair<uint64_t, std::string>> spans; // (begin, name), to find overlaps
  for (const auto &[name, info] : header.items()) {
    if (name == "__metadata__")
      continue;
    const TensorInfo t =
        tensor_of(path_ + ": tensor " + short_text(name) + ": ", info, 8 + n, data_size);
    tensors_[name] = t;
    if (t.bytes > 0) // an empty tensor occupies no bytes and overlaps nothing
      spans.emplace_back(t.offset, name);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const TensorInfo &prev = tensors_.at(spans[i - 1].second);
    if (spans[i].first < prev.offset + uint64_t(prev.bytes))
      throw Error(path_ + ": tensors " + short_text(spans[i - 1].second) + " and " +
                  short_text(spans[i].second) + " overlap in the data");
  }
}

SafeTensors::~SafeTensors() { ::close(fd_); }

void SafeTensors::read_at(uint64_t offset, void *out, size_t bytes) const {
  auto *p = static_cast<char *>(out);
  for (size_t got = 0; got < bytes;) {
    const ssize_t r = ::pread(fd_, p + got, bytes - got, off_t(offset + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      throw Error(path_ + ": cannot read: " + std::strerror(errno), Error::Kind::File);
    if (r == 0) // the end of the file, before the end its size said: truncated since
      throw Error(changed_while_read(path_), Error::Kind::File);
    got += size_t(r);
  }
}

std::vector<float> SafeTensors::to_float(const std::string &name) const {
  const TensorInfo &t = tensors_.at(name);
  std::vector<float> out(size_t(t.elements()));
  if (t.dtype == DType::F32) {
    read_at(t.offset, out.data(), out.size() * 4);
  } else { // 2-byte values, converted a chunk at a time
    constexpr size_t kChunk = 1 << 16;
    std::vector<uint8_t> raw(std::min(out.size(), kChunk) * 2);
    for (size_t i0 = 0; i0 < out.size(); i0 += kChunk) {
      const size_t n = std::min(kChunk, out.size() - i0);
      read_at(t.offset + 2 * i0, raw.data(), 2 * n);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = uint16_t(raw[2 * i] | raw[2 * i + 1] << 8);
        out[i0 + i] = t.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
    }
  }
  if (!unchanged(fd_, stamp_)) // written since the header was read: not the header's tensor
    throw Error(changed_while_read(path_), Error::Kind::File);
  return out;
}

void SafeTensors::check_unchanged() const {
  std::string again(header_.size(), '\0');
  read_at(0, again.data(), again.size());
  if (!unchanged(fd_, stamp_) || again != header_)
    throw Error(changed_while_read(path_), Error::Kind::File);
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0 || stamp_of(st).dev != stamp_.dev ||
      stamp_of(st).ino != stamp_.ino)
    throw Error(path_ + ": replaced while it was read (a model being copied in?): run again " +
                    "once it is complete",
                Error::Kind::File);
}

} // namespace tarnn
