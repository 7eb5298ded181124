// The rollout on the backend a command names (--device cpu|cuda): the one place that dispatches,
// so every command (sample, score, complete) runs on both.
#pragma once

#include <string>

#include "engine.h"

namespace tarnn {

// Throws Error before any work where the device is unknown, not built, or absent.
void check_device(const std::string &device);

// run_cpu or run_cuda; on cuda, opt.batch 0 takes as many images as fit in GPU memory and
// opt.threads is ignored.
void run_rollout(const std::string &device, bool tf32, const Model &m, const CpuWeights &w,
                 const Rollout &job, const RunOptions &opt);

} // namespace tarnn
