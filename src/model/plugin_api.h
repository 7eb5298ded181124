// The contract between the library and its CUDA backend, which lives in its own shared library
// (libtarnn_cuda.so) loaded on the first --device cuda: a CPU run never maps CUDA's libraries
// (cuBLAS alone is hundreds of MB and seconds of start-up). Built from the same tree as the
// library; the loader (engine/cuda_loader.cpp) refuses a plugin of another version.
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace tarnn {

// 2: Rollout gained per-image RNG keys and `grown`; 3: numerics as enums, Knobs, time_steps;
// 4: Rollout and StepParams gained the sampler's temperature (DrawKey: per image);
// 5: StepTimes::emulated_bytes
constexpr int kCudaPluginAbi = 5;

struct CudaPluginApi {
  int abi;
  const char *version;     // TARNN_VERSION and git commit it was built from
  std::string (*device)(); // the device to run on, or Error "no CUDA device: ..."
  // `options` are resolved (resolve_run_options)
  std::unique_ptr<Backend> (*make_backend)(const Model &, const RunOptions &options, const Knobs &);
};

} // namespace tarnn

extern "C" const tarnn::CudaPluginApi *tarnn_cuda_plugin();
