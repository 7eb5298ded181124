// x = LayerNorm(x + y) per row (residual_layernorm.h): one warp per row, 8 rows a block.
// Lane l takes elements l, l + 32, ...; the mean and the variance are butterfly sums, so every
// lane ends with the same value. Two passes over the row as layernorm_row does: the second
// reads what the first wrote, from L1.
#include <cmath>
#include <string>

#include "cuda_util.h"
#include "launch.h"
#include "residual_layernorm.h"
#include "warp_layernorm.h"

namespace tarnn {

namespace {

constexpr int kRowsPerBlock = 8;

__global__ void residual_layernorm_kernel(float *x, const float *y, const float *w, const float *nb,
                                          int rows, int n, uint16_t *x16) {
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
  for (int i = lane; i < n; i += 32) {
    const float v = (xr[i] - mean) * rstd * w[i] + nb[i]; // layernorm_row's expression
    xr[i] = v;
    if (x16)
      x16[size_t(r) * n + i] = bf16_bits(v);
  }
}

// One warp a row, the row of x + y read once into registers (n <= 32 K), normalized, again with
// (w2, nb2) where given, written once (launch.h: launch_layernorm_rows).
template <int K>
__global__ void layernorm_rows_kernel(const float *x, const float *y, const float *w,
                                      const float *nb, const float *w2, const float *nb2, int rows,
                                      int n, float *out, uint16_t *out16) {
  const int lane = threadIdx.x % 32;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) // a whole warp leaves together, so the shuffles stay full-warp
    return;
  const size_t row = size_t(r) * n;
  layernorm_row_warp<K>([&](int i) { return residual_in(x, y, row + i); }, lane, n, w, nb, w2, nb2,
                        out ? out + row : nullptr, out16 ? out16 + row : nullptr);
}

template <int K>
void launch_rows(unsigned blocks, const float *x, const float *y, const float *w, const float *nb,
                 const float *w2, const float *nb2, int rows, int n, float *out, uint16_t *out16,
                 cudaStream_t s) {
  TARNN_LAUNCH((layernorm_rows_kernel<K>), blocks, 32 * kRowsPerBlock, 0, s)
  (x, y, w, nb, w2, nb2, rows, n, out, out16);
}

} // namespace

void launch_layernorm_rows(const float *x, const float *y, const float *w, const float *nb,
                           const float *w2, const float *nb2, int rows, int n, float *out,
                           uint16_t *out16, cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  if (n > kLayerNormRegisterWidth)
    throw Error("launch_layernorm_rows: rows of " + std::to_string(n) + " floats, over the " +
                std::to_string(kLayerNormRegisterWidth) + " its registers hold");
  const unsigned blocks = unsigned((int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock);
  auto *launch = n <= 128   ? &launch_rows<4>
                 : n <= 256 ? &launch_rows<8>
                 : n <= 512 ? &launch_rows<16>
                            : &launch_rows<32>;
  launch(blocks, x, y, w, nb, w2, nb2, rows, n, out, out16, s);
  launch_check("layernorm_rows_kernel");
}

void launch_residual_layernorm(float *x, const float *y, const float *w, const float *nb, int rows,
                               int n, cudaStream_t s, uint16_t *x16) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const unsigned blocks = unsigned((int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock);
  TARNN_LAUNCH(residual_layernorm_kernel, blocks, 32 * kRowsPerBlock, 0, s)
  (x, y, w, nb, rows, n, x16);
  launch_check("residual_layernorm_kernel");
}

} // namespace tarnn
