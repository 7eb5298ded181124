// The known leading run of a chunk's images computed in the parallel form (issue: completion that
// starts fast): p_0 .. p_{P-1} of an image run through every layer as P rows at once, so the GEMMs
// see P rows instead of one, and an image whose K copies share that run (completion's samples)
// computes it once and copies its state K times. The attention walks the rows in order through the
// image's state with the very recurrence of a step, and every other op is row by row, so the state,
// the log-likelihoods and the images are the sequential rollout's, bit for bit.
//
// Pre is a forward.h Ops whose rows are consecutive positions of ONE image: its embed takes row r
// at position params->t + r, its attention walks the rows in order through buffers().state (one
// image's state). Its buffers are reached through its upload, download and zero (host memory on
// the CPU, device memory on CUDA); ops.upload copies Pre's state into the batch.
// pre.worth_prefilling(distinct, n) says whether a chunk of n images with `distinct` different
// leading runs goes this way or through the ordinary steps (the same bytes either way): on the
// CPU always; on a GPU, whose steps run the whole batch at once while a prefill walks one image's
// rows after another, only for a few distinct runs (a completion's samples, a served request).
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "../../kernels/sample_bytes.h"
#include "forward.h"
#include "tarnn/run.h"

namespace tarnn {

// Row i's key in a job that gives each image its own (job.seeds and job.images; its temperature
// from job.temperatures where given, else the job's).
inline DrawKey draw_key(const Rollout &job, int64_t i) {
  return DrawKey{job.seeds[i], job.images[i],
                 job.temperatures ? job.temperatures[i] : job.temperature};
}

// Positions of one image a prefill runs at once, on every backend: each GEMM then reads its
// weights once for up to 512 rows (the first sampled pixel of Figure 3 on the CPU: 0.035 s with
// 128, 0.028-0.031 s with 400 or more; 5 MB of activations).
constexpr int kPrefillRows = 512;

// The positions every image of rows [first, first + n) can prefill: p_0 (given or 0) and the known
// bytes after it, up to the first unknown one; at most L. 0 when nothing is given.
inline int leading_run(const Config &c, const Rollout &job, int64_t first, int n) {
  if (!job.given)
    return 0;
  const int T = c.bytes_per_image(), L = c.positions();
  int run = L;
  for (int r = 0; r < n && run > 1; ++r) {
    const uint8_t *known = job.known ? job.known + size_t(first + r) * T : nullptr;
    int t = 1; // p_0 is always determined
    while (t < run && (!known || known[t]))
      ++t;
    run = t;
  }
  return run;
}

// Whether rows `a` and `a + 1` of the job (their p_0 given apart) differ in their first P bytes.
inline bool leading_bytes_differ(const Rollout &job, int T, int P, int64_t a, uint8_t p0_a,
                                 uint8_t p0_b) {
  const uint8_t *x = job.given + size_t(a) * T, *y = x + T;
  return p0_a != p0_b || std::memcmp(x + 1, y + 1, size_t(P - 1)) != 0;
}

// Feeds p_0 .. p_{P-1} of row `r` through `pre` and leaves its state in pre.buffers().state; the
// log-likelihood of the known p_1 .. p_{P-1}, and o_{P-1} (the mixture of p_P) in `last`.
template <class Pre>
double prefill_one(Pre &pre, const Config &c, const uint8_t *bytes, int P,
                   std::vector<float> &last) {
  const StepBuffers &b = pre.buffers();
  const int K3 = c.d_out();
  pre.zero(b.state, b.state_row_bytes);
  std::vector<float> o(size_t(b.rows) * K3);
  double lp = 0;
  for (int t0 = 0; t0 < P; t0 += b.rows) {
    const int m = std::min(b.rows, P - t0);
    StepParams at;
    at.t = t0;
    pre.upload(b.cur, bytes + t0, size_t(m));
    pre.upload(b.params, &at, sizeof at);
    forward(pre, c, pre.view(), m);
    pre.download(o.data(), b.o, size_t(m) * K3 * sizeof(float));
    for (int r = 0; r < m; ++r) {
      const int t = t0 + r;
      if (t + 1 < P) { // the same floats, added in the same order as the steps add them
        lp += double(mixture_log_prob(&o[size_t(r) * K3], c.mixtures, bytes[t + 1]));
        lp += double(overflow_mark(&o[size_t(r) * K3], K3));
      } else
        last.assign(&o[size_t(r) * K3], &o[size_t(r) * K3] + K3);
    }
  }
  return lp;
}

// Prefills rows [0, n) of the chunk starting at job row image0 (their p_0 in p0) and sets them up
// in the batch at position P: the state, the log-likelihoods so far, p_1 .. p_P in the images and
// p_P in cur, as the first P steps would have. Returns P (< 2: nothing done, the steps start at 0).
// `done`, where given, is told the positions prefilled so far, (r + 1) P, after each row: it may
// throw to stop there (a whole chunk's rows are a whole batch's prefill, 9.6 s for 256 MNIST
// images on one thread: Ctrl-C waited for it).
template <class Ops, class Pre>
int prefill(Ops &ops, Pre &pre, const Config &c, const Rollout &job, int64_t image0, int n,
            const uint8_t *p0, StepParams &params, int steps,
            const std::function<void(int64_t)> &done = nullptr) {
  const int P = std::min(leading_run(c, job, image0, n), steps); // a job may stop early
  if (P < 2)
    return 0;
  const int T = c.bytes_per_image();
  int distinct = 0; // runs to prefill: a row whose run is the previous row's copies its state
  for (int r = 0; r < n; ++r)
    distinct += r == 0 || leading_bytes_differ(job, T, P, image0 + r - 1, p0[r - 1], p0[r]);
  if (!pre.worth_prefilling(distinct, n))
    return 0; // the steps take the whole chunk, as many images at once as the batch holds
  const StepBuffers &b = ops.buffers();
  const size_t state = b.state_row_bytes;
  std::vector<uint8_t> row(static_cast<size_t>(T)), cur(static_cast<size_t>(n)),
      out(static_cast<size_t>(n) * T);
  std::vector<double> lp(static_cast<size_t>(n));
  std::vector<float> last;
  double shared_lp = 0;
  for (int r = 0; r < n; ++r) {
    const uint8_t *given = job.given + size_t(image0 + r) * T;
    std::memcpy(row.data(), given, size_t(T));
    row[0] = p0[r];
    // a row whose run equals the previous row's (a completion's next sample) copies its state
    const bool same = r > 0 && std::memcmp(row.data(), out.data() + size_t(r - 1) * T, P) == 0;
    if (!same)
      shared_lp = prefill_one(pre, c, row.data(), P, last);
    ops.upload(reinterpret_cast<char *>(b.state) + size_t(r) * state, pre.buffers().state, state);
    lp[r] = shared_lp;
    std::memcpy(out.data() + size_t(r) * T, row.data(), size_t(P));
    // p_P from o_{P-1}, as the step at P - 1 would: the given byte where known, else a draw
    StepParams at = params;
    at.t = P - 1;
    at.image_base = params.image_base + uint64_t(r);
    const DrawKey key = job.seeds ? draw_key(job, image0 + r) : DrawKey{};
    at.keys = job.seeds ? &key : nullptr; // row 0 of sample_row's view is this row
    sample_row(0, last.data(), c.mixtures, given,
               job.known ? job.known + size_t(image0 + r) * T : nullptr, T, &cur[size_t(r)],
               out.data() + size_t(r) * T, &lp[size_t(r)], at);
    if (done)
      done(int64_t(r + 1) * P);
  }
  ops.upload(b.out, out.data(), out.size());
  ops.upload(b.cur, cur.data(), cur.size());
  ops.upload(b.log_prob, lp.data(), lp.size() * sizeof(double));
  params.t = P;
  return P;
}

} // namespace tarnn
