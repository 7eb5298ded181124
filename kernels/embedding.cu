// e_t = [E[p_t] | P[t]] for every row (embedding.h): blocks walk the rows, threads the columns.
#include <cmath>

#include "../src/cuda_backend.h"
#include "cuda_util.h"
#include "embedding.h"
#include "launch.h"

namespace tarnn {

namespace {

__global__ void embedding_kernel(float *x, const float *E, const float *P, const uint8_t *cur,
                                 const StepParams *p, int rows, int d_model) {
  const int t = p->t;
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    for (int i = threadIdx.x; i < d_model; i += blockDim.x)
      embedding_element(x, E, P, cur, t, r, i, d_model);
}

} // namespace

void launch_embedding(float *x, const float *E, const float *P, const uint8_t *cur,
                      const StepParams *p, int rows, int d_model, cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const int threads = d_model >= 256 ? 256 : (d_model + 31) / 32 * 32;
  embedding_kernel<<<std::min(rows, 65536), threads, 0, s>>>(x, E, P, cur, p, rows, d_model);
  launch_check("embedding_kernel");
}

KernelCheck check_embedding_kernel() {
  const int rows = 37, D = 64, H = D / 2, L = 50;
  const std::vector<float> E = random_floats(256 * H, 1, -1, 1), P = random_floats(L * H, 2, -1, 1);
  const std::vector<uint8_t> cur = random_bytes(rows, 3);
  StepParams p;
  p.t = L - 1; // the last row of the positional table
  DeviceArray<float> dE(E), dP(P), dx(size_t(rows) * D);
  DeviceArray<uint8_t> dcur(cur);
  DeviceArray<StepParams> dp(std::vector<StepParams>{p});
  launch_embedding(dx.get(), dE.get(), dP.get(), dcur.get(), dp.get(), rows, D, nullptr);
  const std::vector<float> got = dx.download();
  std::vector<float> want(got.size());
  embedding_cpu(want.data(), E.data(), P.data(), cur.data(), &p, rows, D);
  KernelCheck k{"embedding", 0, 0, int64_t(got.size()), "rows 37, d_model 64, t 49"};
  for (size_t i = 0; i < got.size(); ++i)
    k.max_error = std::max(k.max_error, double(std::fabs(got[i] - want[i])));
  return k;
}

} // namespace tarnn
