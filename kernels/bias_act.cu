// y = act(y + b) in place (bias_act.h): blocks walk the rows, threads the columns (no 64-bit
// division per element, which would cost as much as the memory traffic).
#include <cmath>

#include "bias_act.h"
#include "cuda_util.h"
#include "launch.h"

namespace tarnn {

namespace {

__global__ void bias_act_kernel(float *y, const float *b, int rows, int n, Act a) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    for (int j = threadIdx.x; j < n; j += blockDim.x)
      bias_act_element(y, b, n, r, j, a);
}

} // namespace

void launch_bias_act(float *y, const float *b, int rows, int n, Act a, cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const RowsGrid g = rows_grid(rows, n);
  TARNN_LAUNCH(bias_act_kernel, g.blocks, g.threads, 0, s)(y, b, rows, n, a);
  launch_check("bias_act_kernel");
}

} // namespace tarnn
