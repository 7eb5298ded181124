// round_bf16.h on the GPU: one thread per element, grid-stride (a memory-bound pass: 6 bytes an
// element).
#include <algorithm>

#include "cuda_util.h"
#include "launch.h"
#include "round_bf16.h"

namespace tarnn {

namespace {

__global__ void round_bf16_kernel(const float *x, uint16_t *out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = bf16_bits(x[i]);
}

} // namespace

void launch_round_bf16(const float *x, uint16_t *out, size_t n, cudaStream_t s) {
  if (n == 0) // an empty grid is a launch error
    return;
  const size_t blocks = std::min<size_t>((n + 255) / 256, 65536);
  TARNN_LAUNCH(round_bf16_kernel, unsigned(blocks), 256, 0, s)(x, out, n);
  launch_check("round_bf16_kernel");
}

} // namespace tarnn
