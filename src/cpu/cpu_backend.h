// The CPU backend (engine/registry.h finds it): the images of a job split into one contiguous
// share per thread, each share a rollout of CpuOps over its own batch memory.
#pragma once

#include <memory>
#include <vector>

#include "../model/backend.h"

namespace tarnn {

// What the CPU's kernels run: its GEMMs' precisions (cpu_ops.h: CpuKernels) and state formats.
inline const std::vector<Precision> kCpuPrecisions = {Precision::Fp32, Precision::Bf16,
                                                      Precision::Int8};
inline const std::vector<StateFormat> kCpuStates = {StateFormat::Fp32, StateFormat::Fp16};

// The CPU's row in the registry (engine/registry.h): what it runs and how it is made.
const BackendRow &cpu_row();

} // namespace tarnn
