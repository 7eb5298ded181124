#include "engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <unistd.h>
#include <vector>

#include "../kernels/tarnn_math.h"
#include "error.h"

namespace tarnn {

void check_run_options(const Config &c, const RunOptions &o) {
  if (o.batch < 1)
    throw Error("--batch must be at least 1 (got " + std::to_string(o.batch) + ")");
  if (o.threads < 1 || o.threads > 1024)
    throw Error("--threads must be in [1, 1024] (got " + std::to_string(o.threads) + ")");
  const double need = double(o.batch) * c.state_floats_per_image() * 4;
  const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (need > 0.75 * have)
    throw Error("--batch " + std::to_string(o.batch) + " needs " +
                std::to_string(int64_t(need / 1e6)) + " MB of state, more than 3/4 of this " +
                "machine's " + std::to_string(int64_t(have / 1e6)) + " MB");
}

namespace {

// Steps rows [first, first + rows) of the chunk through all positions.
void run_slice(const CpuWeights &w, CpuStatePool &pool, const Rollout &job, int64_t image0,
               int first, int rows, bool reference, std::atomic<int64_t> &done) {
  const Config &c = w.model.config;
  const int T = c.bytes_per_image(), K = c.mixtures;
  CpuDecoder dec(w, pool, first, rows, reference);
  std::vector<uint8_t> cur(rows);
  std::vector<float> o(size_t(rows) * c.d_out());
  auto known = [&](int r, int t) {
    const size_t at = size_t(image0 + first + r) * T + t;
    return job.given && (!job.known || job.known[at]);
  };
  for (int r = 0; r < rows; ++r) {
    uint8_t *img = job.out + size_t(image0 + first + r) * T;
    img[0] = known(r, 0) ? job.given[img - job.out] : 0; // p_0: given, or 0 (black corner)
    cur[r] = img[0];
  }
  const int steps = job.positions < 0 ? T - 1 : std::min(job.positions, T - 1);
  for (int t = 0; t < steps; ++t) {
    dec.step(t, cur.data(), o.data());
    for (int r = 0; r < rows; ++r) {
      const int64_t image = image0 + first + r;
      const size_t at = size_t(image) * T + t + 1;
      const float *orow = &o[size_t(r) * c.d_out()];
      if (known(r, t + 1)) {
        cur[r] = job.given[at];
        if (job.log_prob)
          job.log_prob[image] += mixture_log_prob(orow, K, cur[r]);
      } else {
        cur[r] = uint8_t(sample_byte(orow, K, job.seed, uint64_t(job.first_index + image), t));
      }
      job.out[at] = cur[r];
    }
    done += rows;
  }
}

} // namespace

void run_cpu(const CpuWeights &w, const Rollout &job, const RunOptions &opt) {
  const Config &c = w.model.config;
  check_run_options(c, opt);
  if (job.log_prob)
    std::fill(job.log_prob, job.log_prob + job.count, 0.0);
  const int batch = int(std::min<int64_t>(opt.batch, std::max<int64_t>(job.count, 1)));
  CpuStatePool pool(c, batch);
  std::atomic<int64_t> done{0};
  const int steps = job.positions < 0 ? c.positions() : std::min(job.positions, c.positions());
  const int64_t total = job.count * steps;
  for (int64_t image0 = 0; image0 < job.count; image0 += batch) {
    const int n = int(std::min<int64_t>(batch, job.count - image0));
    pool.zero(0, n);
    const int threads = std::min(opt.threads, n);
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) { // contiguous slices, sizes differing by at most one
      const int first = int(int64_t(n) * i / threads), last = int(int64_t(n) * (i + 1) / threads);
      workers.emplace_back(run_slice, std::cref(w), std::ref(pool), std::cref(job), image0, first,
                           last - first, opt.reference, std::ref(done));
    }
    if (opt.progress) {
      const int64_t target = (image0 + n) * steps;
      while (done.load() < target) {
        opt.progress(done.load(), total);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    for (auto &t : workers)
      t.join();
  }
  if (opt.progress)
    opt.progress(total, total);
}

} // namespace tarnn
