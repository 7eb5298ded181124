// Each thread steps its slice of the batch with the form being measured, all threads together at
// each measured position, timed per position. Generation is real (sampled bytes fed back); where
// positions are skipped, the KV cache holds zeros for them and the prefix holds p = 0: time does
// not depend on values.
#include "timed_steps.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "../../kernels/tarnn_math.h"
#include "../base/util.h"
#include "../model/decoder.h"
#include "../softmax/softmax_ops.h"

namespace tarnn {

namespace {

using Clock = std::chrono::steady_clock;

// The matrix-multiply peak of this machine as the engine reaches it: its own GEMM kernel on a
// compute-bound shape, rows split over the threads as a run splits the batch. Best of 10.
constexpr int kPeakRows = 512, kPeakIn = 1024, kPeakOut = 1024;

double gemm_peak_gflops(WorkerTeam &team) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.03f, 0.03f);
  Linear l{kPeakOut, kPeakIn, std::vector<float>(size_t(kPeakOut) * kPeakIn), {}};
  for (float &v : l.w)
    v = u(rng);
  l.b.assign(kPeakOut, 0.0f);
  const PackedLinear p = pack(l);
  std::vector<float> x(size_t(kPeakRows) * kPeakIn), y(size_t(kPeakRows) * kPeakOut);
  for (float &v : x)
    v = u(rng);
  const int n = std::min(team.size(), kPeakRows);
  auto once = [&] {
    team.run([&](int i) {
      if (i >= n)
        return;
      const int first = kPeakRows * i / n, rows = kPeakRows * (i + 1) / n - first;
      linear_forward(p, &x[size_t(first) * kPeakIn], kPeakIn, rows, &y[size_t(first) * kPeakOut],
                     kPeakOut, Act::None);
    });
  };
  once(); // warm the caches and the pages
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    const auto t0 = Clock::now();
    once();
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * kPeakRows * kPeakIn * kPeakOut / best / 1e9;
}

// One thread's slice of the batch, stepped by the form being measured.
struct Slice {
  virtual ~Slice() = default;
  // images: this slice's images, T bytes apart; writes the mixture parameters at t to o.
  virtual void step(int t, const uint8_t *images, int T, float *o) = 0;
  virtual void reset() {}
};

// A stateful decoder (RNN state or KV cache) fed the slice's byte at t.
template <class Ops> struct StatefulSlice : Slice {
  template <class... Extra>
  StatefulSlice(const Config &c, const ModelView &w, int rows, std::optional<StateFormat> state,
                Extra &&...extra)
      : dec(c, w, rows, state, std::forward<Extra>(extra)...), cur(size_t(rows)) {}
  void step(int t, const uint8_t *images, int T, float *o) override {
    for (size_t r = 0; r < cur.size(); ++r)
      cur[r] = images[r * T + t];
    dec.step(t, cur.data(), o);
  }
  void reset() override { dec.reset_state(); }
  Decoder<Ops> dec;
  std::vector<uint8_t> cur;
};

struct RecomputeSlice : Slice {
  RecomputeSlice(const Config &c, const ModelView &w, int rows, CpuKernels k)
      : dec(c, w, rows, k) {}
  void step(int t, const uint8_t *images, int T, float *o) override { dec.step(t, images, T, o); }
  RecomputeDecoder<CpuKernels> dec;
};

} // namespace

StepTimes time_cpu_steps(const Config &c, const ModelView &w, const RunOptions &o, CpuKernels k,
                         TeamPool &teams, const TimedSteps &job) {
  const AttentionForm form = job.form;
  const int T = c.bytes_per_image(), B = int(job.batch);
  const int threads = std::min(o.threads, std::max(B, 1));
  StepTimes r;
  r.threads = threads;
  r.memory_bytes_per_image = form == AttentionForm::Linear    ? state_bytes_per_image(c, o.state)
                             : form == AttentionForm::Softmax ? KvCache::bytes_per_image(c)
                                                              : recompute_bytes_per_image(c);
  if (form == AttentionForm::Softmax)
    check_memory(double(B) * double(r.memory_bytes_per_image),
                 "--batch " + std::to_string(B) + " of KV cache");
  if (form == AttentionForm::Recompute)
    check_memory(double(threads) * double(r.memory_bytes_per_image),
                 count_of(threads, "thread's prefix", "threads' prefixes"));
  // one team for the whole run, as the engine keeps its threads for a whole job
  const std::shared_ptr<WorkerTeam> team = teams.lend(threads);
  r.peak_gflops = gemm_peak_gflops(*team);
  r.peak_rows = kPeakRows, r.peak_in = kPeakIn, r.peak_out = kPeakOut;

  std::unique_ptr<KvCache> cache;
  if (form == AttentionForm::Softmax)
    cache = std::make_unique<KvCache>(c, B, c.positions());
  std::vector<std::unique_ptr<Slice>> slices;
  std::vector<int> first;
  for (int i = 0; i < threads; ++i) { // contiguous slices, as a run splits its images
    const int f = int(int64_t(B) * i / threads), rows = int(int64_t(B) * (i + 1) / threads) - f;
    first.push_back(f);
    if (form == AttentionForm::Linear)
      slices.push_back(std::make_unique<StatefulSlice<CpuOps>>(c, w, rows, o.state, k));
    else if (form == AttentionForm::Softmax)
      slices.push_back(std::make_unique<StatefulSlice<KvOps<CpuKernels>>>(c, w, rows, std::nullopt,
                                                                          k, *cache, f));
    else
      slices.push_back(std::make_unique<RecomputeSlice>(c, w, rows, k));
  }
  first.push_back(B);

  std::vector<uint8_t> images(size_t(B) * T, 0);
  std::vector<std::vector<float>> out(static_cast<size_t>(threads));
  auto run_slice = [&](int i, int t) {
    const int rows = first[i + 1] - first[i];
    out[i].resize(size_t(rows) * c.d_out());
    uint8_t *img = &images[size_t(first[i]) * T];
    slices[i]->step(t, img, T, out[i].data());
    for (int row = 0; row < rows; ++row) // p_{t+1}, sampled (seed 0) as tarnn sample would
      img[size_t(row) * T + t + 1] =
          uint8_t(sample_byte(&out[i][size_t(row) * c.d_out()], c.mixtures, 0,
                              uint64_t(first[i]) + uint64_t(row), uint32_t(t)));
  };
  auto step_all = [&](int t) {
    team->run([&](int i) {
      if (i < threads)
        run_slice(i, t);
    });
  };
  // One untimed step first (first touches of buffers and code), then start from scratch.
  step_all(0);
  for (auto &s : slices)
    s->reset();
  std::fill(images.begin(), images.end(), 0);
  for (int t : job.positions) {
    const auto t0 = Clock::now();
    step_all(t);
    const double s = seconds_since(t0);
    r.at.emplace_back(t, s);
    r.seconds += s;
    if (job.progress) // outside the timing
      job.progress(int64_t(r.at.size()) * B, int64_t(job.positions.size()) * B);
  }
  r.info.batch = B;
  r.info.state_bytes = form == AttentionForm::Linear ? int64_t(B) * r.memory_bytes_per_image : 0;
  r.info.seconds_steps = r.seconds;
  return r;
}

} // namespace tarnn
