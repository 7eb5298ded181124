// A safetensors file whose header has been checked against the file before any tensor byte is
// read: length, JSON, dtypes, shapes, offsets inside the data and not overlapping. Read, never
// mapped, from the one descriptor it was opened with: a mapped file truncated as it loaded killed
// the process (SIGBUS), and one rewritten in place gave half old and half new weights. Each read
// is checked to be of the file whose header was read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "files.h"

namespace tarnn {

enum class DType { F32, F16, BF16 };

struct TensorInfo {
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset; // in the file
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
  // The tensor's values as fp32 (F16 and BF16 converted); Error where the file changed since its
  // header was read (truncated, written), as the values would not be the header's tensor.
  std::vector<float> to_float(const std::string &name) const;
  // Error unless the path still names the file opened, unchanged: its stamp, its header read
  // again, and no other file renamed over it (a model folder being replaced while it loads).
  void check_unchanged() const;

private:
  void parse_header(uint64_t n, uint64_t data_size);
  void read_at(uint64_t offset, void *out, size_t bytes) const;

  std::string path_;
  int fd_ = -1;
  FileStamp stamp_;
  std::string header_; // the 8-byte length and the JSON, as read
  std::map<std::string, TensorInfo> tensors_;
};

float half_to_float(uint16_t h);
float bf16_to_float(uint16_t h);

} // namespace tarnn
