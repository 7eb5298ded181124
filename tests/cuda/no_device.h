// Why the CUDA tests skip: empty where a device (a GPU, or the emulated one) is usable, else the
// reason ("no CUDA device: ..."), asked once. For tests linked with the CUDA backend (the GPU
// suites, test_kernels' CUDA build).
#pragma once

#include <string>

#include "src/cuda/cuda_backend.h"
#include "tarnn/error.h"

namespace tarnn_test {

inline const std::string &no_device() {
  static const std::string why = [] {
    try {
      tarnn::cuda_require_device();
      return std::string();
    } catch (const tarnn::Error &e) {
      return std::string(e.what());
    }
  }();
  return why;
}

} // namespace tarnn_test
