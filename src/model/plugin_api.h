// The contract between the library and a backend that lives in a shared library of its own
// (libtarnn_NAME.so, as ggml's dynamically loaded backends), loaded the first time a job asks for
// its device: a CPU run never maps a GPU's libraries (cuBLAS alone is hundreds of MB and seconds
// of start-up). Every plugin exports one entry point, tarnn_backend_plugin, whatever its device;
// the registry's row of the device names the plugin (engine/registry.h) and the loader
// (engine/plugins.cpp) refuses one of another version or another device.
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace tarnn {

// 2: Rollout gained per-image RNG keys and `grown`; 3: numerics as enums, Knobs, time_steps;
// 4: Rollout and StepParams gained the sampler's temperature (DrawKey: per image);
// 5: StepTimes::emulated_bytes; 6: Knobs::cuda_bf16_inputs; 7: one entry point for every plugin
// (BackendPlugin), Knobs by name, Rollout::stepped and Backend::gemm_peak, bytes_moved in place
// of time_steps
constexpr int kPluginAbi = 7;

struct BackendPlugin {
  int abi;
  const char *version;     // TARNN_VERSION and git commit it was built from
  const char *name;        // the device it runs, as its registry row names it ("cuda")
  std::string (*device)(); // the device to run on, in words, or Error saying why there is none
  // `options` are resolved (resolve_run_options)
  std::unique_ptr<Backend> (*make_backend)(const Model &, const RunOptions &options, const Knobs &);
};

} // namespace tarnn

extern "C" const tarnn::BackendPlugin *tarnn_backend_plugin();
