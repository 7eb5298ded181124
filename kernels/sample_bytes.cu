// p_{t+1} of every row on the device (sample_bytes.h): one thread per row.
#include <cmath>

#include "../src/cuda_backend.h"
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
  sample_bytes_kernel<<<(rows + threads - 1) / threads, threads, 0, s>>>(o, K, given, known, T, cur,
                                                                         out, log_prob, p, rows);
  launch_check("sample_bytes_kernel");
}

// 300 rows over 4 positions, a mask knowing about half the bytes: the drawn and the forced bytes
// must match the twin's (a draw may differ only where expf or logf rounds differently right at a
// bin's edge: none is allowed here), the log-likelihoods to float rounding.
KernelCheck check_sample_bytes_kernel() {
  const int rows = 300, K = 10, T = 6;
  const std::vector<uint8_t> given = random_bytes(size_t(rows) * T, 50);
  std::vector<uint8_t> known = random_bytes(size_t(rows) * T, 51);
  for (uint8_t &m : known)
    m = m & 1;
  StepParams p;
  p.has_given = 1;
  p.has_known = 1;
  p.seed = 12345;
  p.image_base = 1000;
  std::vector<uint8_t> cur(rows, 0), out(size_t(rows) * T, 0);
  std::vector<double> lp(rows, 0.0);
  DeviceArray<uint8_t> dgiven(given), dknown(known), dcur(cur), dout(out);
  DeviceArray<double> dlp(lp);
  KernelCheck k{"sample_bytes", 0, 1e-5, 0,
                "300 rows, K 10, 4 positions, half known; max_error: log-likelihood difference, "
                "or 1 for any differing byte"};
  for (int t = 0; t < 4; ++t) {
    p.t = t;
    std::vector<float> o = random_floats(size_t(rows) * 3 * K, 52 + t, -1, 1);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < K; ++i) {
        o[size_t(r) * 3 * K + i] *= 3.0f;                                                  // logits
        o[size_t(r) * 3 * K + 2 * K + i] = o[size_t(r) * 3 * K + 2 * K + i] * 2.5f - 3.5f; // log s
      }
    DeviceArray<float> dO(o);
    DeviceArray<StepParams> dp(std::vector<StepParams>{p});
    launch_sample_bytes(dO.get(), K, dgiven.get(), dknown.get(), T, dcur.get(), dout.get(),
                        dlp.get(), dp.get(), rows, nullptr);
    sample_bytes_cpu(o.data(), K, given.data(), known.data(), T, cur.data(), out.data(), lp.data(),
                     &p, rows);
  }
  const std::vector<uint8_t> got_out = dout.download(), got_cur = dcur.download();
  const std::vector<double> got_lp = dlp.download();
  k.max_error = got_out == out && got_cur == cur ? 0.0 : 1.0;
  for (int r = 0; r < rows; ++r)
    k.max_error =
        std::max(k.max_error, std::fabs(got_lp[r] - lp[r]) / std::max(1.0, std::fabs(lp[r])));
  k.compared = int64_t(out.size()) + rows;
  return k;
}

} // namespace tarnn
