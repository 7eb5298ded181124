// x = LayerNorm(x + y) per row (residual_layernorm.h): one warp per row, 8 rows a block.
// Lane l takes elements l, l + 32, ...; the mean and the variance are butterfly sums, so every
// lane ends with the same value. Two passes over the row as layernorm_row does: the second
// reads what the first wrote, from L1.
#include <cmath>

#include "cuda_util.h"
#include "launch.h"
#include "residual_layernorm.h"

namespace tarnn {

namespace {

constexpr int kRowsPerBlock = 8;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void residual_layernorm_kernel(float *x, const float *y, const float *w, const float *nb,
                                          int rows, int n) {
  const int lane = threadIdx.x % 32;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) // a whole warp leaves together, so the shuffles below stay full-warp
    return;
  float *xr = x + size_t(r) * n;
  float sum = 0.0f;
  for (int i = lane; i < n; i += 32) {
    const float v = residual_in(x, y, size_t(r) * n + i);
    xr[i] = v;
    sum += v;
  }
  const float mean = warp_sum(sum) / static_cast<float>(n);
  float sq = 0.0f;
  for (int i = lane; i < n; i += 32) {
    const float c = xr[i] - mean;
    sq += c * c;
  }
  const float var = warp_sum(sq) / static_cast<float>(n);
  const float rstd = 1.0f / sqrtf(var + kLayerNormEps);
  for (int i = lane; i < n; i += 32)
    xr[i] = (xr[i] - mean) * rstd * w[i] + nb[i]; // layernorm_row's expression
}

} // namespace

void launch_residual_layernorm(float *x, const float *y, const float *w, const float *nb, int rows,
                               int n, cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const unsigned blocks = unsigned((int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock);
  TARNN_LAUNCH(residual_layernorm_kernel, blocks, 32 * kRowsPerBlock, 0, s)(x, y, w, nb, rows, n);
  launch_check("residual_layernorm_kernel");
}

} // namespace tarnn
