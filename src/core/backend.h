// What a device implements behind Engine (include/tarnn/run.h): a model made ready on it (weights
// in the device's layout, once) that runs rollouts. One folder per device: src/cpu, src/cuda.
#pragma once

#include <memory>
#include <string>

#include "tarnn/run.h"

namespace tarnn {

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string device() const = 0;
  virtual RunInfo run(const Rollout &job, const Progress &progress) = 0;
  virtual int64_t batch_for(int64_t count) const = 0; // images a run of `count` holds at once
};

// `options` are resolved (resolve_run_options). Both throw Error when the device cannot run it.
std::unique_ptr<Backend> make_cpu_backend(const Model &model, const RunOptions &options);
std::unique_ptr<Backend> make_cuda_backend(const Model &model, const RunOptions &options);

} // namespace tarnn
