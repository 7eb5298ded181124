// The CPU backend's Backend::time_steps (model/backend.h): the benchmark's steps of linear
// attention or of the softmax baselines (src/softmax) on the backend's packed weights.
#pragma once

#include "../model/backend.h"
#include "cpu_ops.h"
#include "threads.h"

namespace tarnn {

StepTimes time_cpu_steps(const Config &c, const ModelView &w, const RunOptions &o, CpuKernels k,
                         TeamPool &teams, const TimedSteps &job);

} // namespace tarnn
