// e_t = [E[p_t] | P[t]] for every row (embedding.h): blocks walk the rows, threads the columns.
#include <cmath>

#include "cuda_util.h"
#include "embedding.h"
#include "launch.h"

namespace tarnn {

namespace {

// positions: row r at position p->t + r (a prefill's rows: consecutive positions of one image)
__global__ void embedding_kernel(float *x, const float *E, const float *P, const uint8_t *cur,
                                 const StepParams *p, int rows, int d_model, bool positions) {
  const int t = p->t;
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    for (int i = threadIdx.x; i < d_model; i += blockDim.x)
      embedding_element(x, E, P, cur, t + (positions ? r : 0), r, i, d_model);
}

} // namespace

void launch_embedding(float *x, const float *E, const float *P, const uint8_t *cur,
                      const StepParams *p, int rows, int d_model, cudaStream_t s, bool positions) {
  launch_over_rows<embedding_kernel>("embedding_kernel", rows, d_model, s, x, E, P, cur, p, rows,
                                     d_model, positions);
}

} // namespace tarnn
