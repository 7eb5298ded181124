// The last node of every step's graph: t += 1 in device memory (step_params.h).
#include "../src/cuda_backend.h"
#include "cuda_util.h"
#include "launch.h"

namespace tarnn {

namespace {

__global__ void advance_position_kernel(StepParams *p) { advance_position(p); }

} // namespace

void launch_advance_position(StepParams *p, cudaStream_t s) {
  advance_position_kernel<<<1, 1, 0, s>>>(p);
  launch_check("advance_position_kernel");
}

KernelCheck check_advance_position_kernel() {
  StepParams p;
  p.t = 41;
  p.seed = 7;
  DeviceArray<StepParams> dp(std::vector<StepParams>{p});
  for (int i = 0; i < 3; ++i)
    launch_advance_position(dp.get(), nullptr);
  const StepParams got = dp.download()[0];
  KernelCheck k{"advance_position", 0, 0, 1, "41 + 3 steps"};
  k.max_error = got.t == 44 && got.seed == 7 ? 0 : 1;
  return k;
}

} // namespace tarnn
