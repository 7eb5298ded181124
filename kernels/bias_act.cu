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
  launch_over_rows<bias_act_kernel>("bias_act_kernel", rows, n, s, y, b, rows, n, a);
}

} // namespace tarnn
