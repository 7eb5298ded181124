// int8_rows.h on the GPU. Quantizing: one warp a row, its largest |x| an integer max of the bits
// across the lanes (any order gives the same), then each lane its elements. Finishing: as
// bias_act, blocks walk the rows and threads the columns.
#include <algorithm>

#include "cuda_util.h"
#include "int8_rows.h"
#include "launch.h"

namespace tarnn {

namespace {

constexpr int kWarp = 32, kRowsPerBlock = 8;

__global__ void quantize_rows_int8_kernel(const float *x, int rows, int in, int ldq, int8_t *q,
                                          float *sx) {
  const int lane = int(threadIdx.x) % kWarp;
  for (int r = int(blockIdx.x) * kRowsPerBlock + int(threadIdx.x) / kWarp; r < rows;
       r += int(gridDim.x) * kRowsPerBlock) { // the same r for every lane of a warp
    const float *v = x + size_t(r) * in;
    uint32_t amax = 0;
    for (int k = lane; k < in; k += kWarp)
      amax = abs_bits(v[k]) > amax ? abs_bits(v[k]) : amax;
    for (int m = kWarp / 2; m > 0; m /= 2) {
      const uint32_t other = __shfl_xor_sync(0xffffffffu, amax, m);
      amax = other > amax ? other : amax;
    }
    const Int8Scale s = int8_scale(amax);
    int8_t *qr = q + size_t(r) * ldq;
    for (int k = lane; k < ldq; k += kWarp) // the padding after `in`: zeros
      qr[k] = s.inv == 0.0f || k >= in ? int8_t(0) : int8_quantize(v[k], s.inv);
    if (lane == 0)
      sx[r] = s.scale;
  }
}

__global__ void finish_int8_kernel(const int32_t *acc, int ldacc, const float *sx, const float *sw,
                                   const float *b, int rows, int out, Act act, float *y) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    for (int j = threadIdx.x; j < out; j += blockDim.x)
      y[size_t(r) * out + j] = int8_finish(acc[size_t(r) * ldacc + j], sx[r], sw[j], b, j, act);
}

} // namespace

void launch_quantize_rows_int8(const float *x, int rows, int in, int ldq, int8_t *q, float *sx,
                               cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const int blocks = std::min((rows + kRowsPerBlock - 1) / kRowsPerBlock, 65536);
  TARNN_LAUNCH(quantize_rows_int8_kernel, blocks, kWarp * kRowsPerBlock, 0, s)
  (x, rows, in, ldq, q, sx);
  launch_check("quantize_rows_int8_kernel");
}

void launch_finish_int8(const int32_t *acc, int ldacc, const float *sx, const float *sw,
                        const float *b, int rows, int out, Act act, float *y, cudaStream_t s) {
  launch_over_rows<finish_int8_kernel>("finish_int8_kernel", rows, out, s, acc, ldacc, sx, sw, b,
                                       rows, out, act, y);
}

} // namespace tarnn
