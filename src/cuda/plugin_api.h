// The contract between the library and its CUDA backend, which lives in its own shared library
// (libtarnn_cuda.so) loaded on the first --device cuda: a CPU run never maps CUDA's libraries
// (cuBLAS alone is hundreds of MB and seconds of start-up). Built from the same tree as the
// library; the loader (core/cuda_loader.cpp) refuses a plugin of another version.
#pragma once

#include <memory>
#include <string>

#include "../core/backend.h"

namespace tarnn {

constexpr int kCudaPluginAbi = 2; // 2: Rollout gained per-image RNG keys and `grown`

struct CudaPluginApi {
  int abi;
  const char *version;     // TARNN_VERSION and git commit it was built from
  std::string (*device)(); // the device to run on, or Error "no CUDA device: ..."
  std::unique_ptr<Backend> (*make_backend)(const Model &, const RunOptions &);
};

} // namespace tarnn

extern "C" const tarnn::CudaPluginApi *tarnn_cuda_plugin();
