// The last node of every step's graph: t += 1 in device memory (step_params.h).
#include "cuda_util.h"
#include "launch.h"

namespace tarnn {

namespace {

__global__ void advance_position_kernel(StepParams *p) { advance_position(p); }

} // namespace

void launch_advance_position(StepParams *p, cudaStream_t s) {
  TARNN_LAUNCH(advance_position_kernel, 1, 1, 0, s)(p);
  launch_check("advance_position_kernel");
}

} // namespace tarnn
