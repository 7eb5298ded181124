// y = act(y + b) in place (bias_act.h): blocks walk the rows, threads the columns (no 64-bit
// division per element, which would cost as much as the memory traffic).
#include <cmath>

#include "../src/cuda_backend.h"
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
  const int threads = n >= 256 ? 256 : (n + 31) / 32 * 32;
  bias_act_kernel<<<std::min(rows, 65536), threads, 0, s>>>(y, b, rows, n, a);
  launch_check("bias_act_kernel");
}

KernelCheck check_bias_act_kernel() {
  const int rows = 13, n = 70;
  const std::vector<float> b = random_floats(n, 30, -1, 1);
  KernelCheck k{"bias_act", 0, 1e-6, 0, "none, relu, gelu over [13, 70]"};
  for (Act a : {Act::None, Act::Relu, Act::Gelu}) {
    std::vector<float> y = random_floats(size_t(rows) * n, 31 + int(a), -4, 4);
    DeviceArray<float> dy(y), db(b);
    launch_bias_act(dy.get(), db.get(), rows, n, a, nullptr);
    const std::vector<float> got = dy.download();
    bias_act_cpu(y.data(), b.data(), rows, n, a);
    for (size_t i = 0; i < y.size(); ++i)
      k.max_error = std::max(k.max_error, double(std::fabs(got[i] - y[i])));
    k.compared += int64_t(y.size());
  }
  return k;
}

} // namespace tarnn
