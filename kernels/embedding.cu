// e_t = [E[p_t] | P[t]] for every row: one thread per element (embedding.h).
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
  const size_t n = size_t(rows) * d_model;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += size_t(gridDim.x) * blockDim.x)
    embedding_element(x, E, P, cur, t, int(e / d_model), int(e % d_model), d_model);
}

} // namespace

void launch_embedding(float *x, const float *E, const float *P, const uint8_t *cur,
                      const StepParams *p, int rows, int d_model, cudaStream_t s) {
  const size_t n = size_t(rows) * d_model;
  const int threads = 256;
  const int blocks = int(std::min<size_t>((n + threads - 1) / threads, 65536));
  embedding_kernel<<<blocks, threads, 0, s>>>(x, E, P, cur, p, rows, d_model);
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
