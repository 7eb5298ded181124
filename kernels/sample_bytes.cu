// p_{t+1} of every row on the device (sample_bytes.h): one thread per row.
#include <cmath>

#include "cuda_util.h"
#include "launch.h"
#include "sample_bytes.h"

namespace tarnn {

namespace {

__global__ void sample_bytes_kernel(const float *o, int K, const uint8_t *given,
                                    const uint8_t *known, int T, uint8_t *cur, uint8_t *out,
                                    double *log_prob, const StepParams *params, int rows) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows)
    sample_row(r, o, K, given, known, T, cur, out, log_prob, *params);
}

} // namespace

void launch_sample_bytes(const float *o, int K, const uint8_t *given, const uint8_t *known, int T,
                         uint8_t *cur, uint8_t *out, double *log_prob, const StepParams *p,
                         int rows, cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const int threads = 128;
  TARNN_LAUNCH(sample_bytes_kernel, (rows + threads - 1) / threads, threads, 0, s)
  (o, K, given, known, T, cur, out, log_prob, p, rows);
  launch_check("sample_bytes_kernel");
}

} // namespace tarnn
