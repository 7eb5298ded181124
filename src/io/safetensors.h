// A memory-mapped safetensors file whose header has been checked against the file before any
// tensor byte is read: length, JSON, dtypes, shapes, offsets inside the data and not overlapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tarnn {

enum class DType { F32, F16, BF16 };

struct TensorInfo {
  DType dtype;
  std::vector<int64_t> shape;
  const unsigned char *data; // inside the mapping, not aligned
  int64_t bytes;
  int64_t elements() const;
};

class SafeTensors {
public:
  explicit SafeTensors(const std::string &path); // throws Error naming path (and tensor)
  ~SafeTensors();
  SafeTensors(const SafeTensors &) = delete;
  SafeTensors &operator=(const SafeTensors &) = delete;

  const std::map<std::string, TensorInfo> &tensors() const { return tensors_; }
  const std::string &path() const { return path_; }
  // The tensor's values as fp32 (F16 and BF16 converted).
  std::vector<float> to_float(const std::string &name) const;

private:
  std::string path_;
  void *map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

float half_to_float(uint16_t h);
float bf16_to_float(uint16_t h);

} // namespace tarnn
