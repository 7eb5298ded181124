// The benchmark on the CPU: each thread steps its slice of the batch with the form being
// measured, all threads together at each measured position, timed per position. Generation is
// real (sampled bytes fed back); where positions are skipped, the KV cache holds zeros for them
// and the prefix holds p = 0: time does not depend on values.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <thread>

#include "../../kernels/tarnn_math.h"
#include "../cpu/cpu_features.h"
#include "../cpu/decoder.h"
#include "../cpu/threads.h"
#include "../softmax/softmax_ops.h"
#include "forms.h"
#include "tarnn/error.h"

namespace tarnn {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The matrix-multiply peak of this machine as the engine reaches it: its own GEMM kernel on a
// compute-bound shape, rows split over the threads as a run splits the batch. Best of 10.
constexpr int kPeakRows = 512, kPeakIn = 1024, kPeakOut = 1024;

double gemm_peak_gflops(int threads) {
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
  const int n = std::min(threads, kPeakRows);
  WorkerTeam team(n);
  auto once = [&] {
    team.run([&](int i) {
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
  StatefulSlice(const Config &c, const ModelView<CpuLinear> &w, int rows, bool with_state,
                Extra &&...extra)
      : dec(c, w, rows, with_state, std::forward<Extra>(extra)...), cur(size_t(rows)) {}
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
  RecomputeSlice(const Config &c, const ModelView<CpuLinear> &w, int rows) : dec(c, w, rows) {}
  void step(int t, const uint8_t *images, int T, float *o) override { dec.step(t, images, T, o); }
  RecomputeDecoder dec;
};

std::vector<int> positions_to_measure(Form k, int L, int steps) {
  std::vector<int> pos;
  if (steps >= L || k == Form::Linear) {
    for (int t = 0; t < std::min(steps, L); ++t)
      pos.push_back(t);
  } else if (steps == 1) {
    pos.push_back((L - 1) / 2);
  } else {
    for (int i = 0; i < steps; ++i)
      pos.push_back(int(std::lround(double(i) * (L - 1) / (steps - 1))));
  }
  return pos;
}
double full_length_seconds(Form k, int L, const std::vector<std::pair<int, double>> &st) {
  double sum = 0;
  for (const auto &[t, s] : st)
    sum += s;
  if (int(st.size()) == L)
    return sum;
  if (k == Form::Linear || st.size() == 1)
    return sum / double(st.size()) * L;
  double total = 0;
  size_t i = 0;
  for (int t = 0; t < L; ++t) {
    while (i + 2 < st.size() && st[i + 1].first <= t)
      ++i;
    const auto [t0, s0] = st[i];
    const auto [t1, s1] = st[i + 1];
    total += s0 + (s1 - s0) * double(t - t0) / double(t1 - t0);
  }
  return total;
}

} // namespace

BenchResult measure_cpu(const BenchOptions &o) {
  const Form form = form_of(o.attention);
  const Model m = bench_model(o);
  const Config &c = m.config;
  const RunOptions run = resolve_run_options(c, o.run);
  const int L = c.positions(), T = c.bytes_per_image(), B = int(run.batch);
  const int threads = std::min(run.threads, std::max(B, 1));
  const int64_t memory = form == Form::Linear    ? c.state_bytes_per_image()
                         : form == Form::Softmax ? KvCache::bytes_per_image(c)
                                                 : RecomputeDecoder::bytes_per_image(c);
  if (form == Form::Softmax)
    check_memory(double(B) * memory, "--batch " + std::to_string(B) + " of KV cache");
  if (form == Form::Recompute)
    check_memory(double(threads) * memory, std::to_string(threads) + " threads' prefixes");

  BenchResult r;
  r.load_average = load_average();
  r.peak_gflops = gemm_peak_gflops(threads);
  r.peak_rows = kPeakRows, r.peak_in = kPeakIn, r.peak_out = kPeakOut;
  r.precision = run.precision;
  const CpuWeights w(m, run.precision == "bf16");
  std::unique_ptr<KvCache> cache;
  if (form == Form::Softmax)
    cache = std::make_unique<KvCache>(c, B, L);
  std::vector<std::unique_ptr<Slice>> slices;
  std::vector<int> first;
  for (int i = 0; i < threads; ++i) { // contiguous slices, as a run splits its images
    const int f = int(int64_t(B) * i / threads), rows = int(int64_t(B) * (i + 1) / threads) - f;
    first.push_back(f);
    if (form == Form::Linear)
      slices.push_back(std::make_unique<StatefulSlice<CpuOps>>(c, w.view(), rows, true, false));
    else if (form == Form::Softmax)
      slices.push_back(std::make_unique<StatefulSlice<KvOps>>(c, w.view(), rows, false, *cache, f));
    else
      slices.push_back(std::make_unique<RecomputeSlice>(c, w.view(), rows));
  }
  first.push_back(B);

  std::vector<uint8_t> images(size_t(B) * T, 0);
  std::vector<std::vector<float>> out(static_cast<size_t>(threads));
  const std::vector<int> positions = positions_to_measure(form, L, o.steps == 0 ? L : o.steps);
  auto run_slice = [&](int i, int t) {
    const int rows = first[i + 1] - first[i];
    out[i].resize(size_t(rows) * c.d_out());
    uint8_t *img = &images[size_t(first[i]) * T];
    slices[i]->step(t, img, T, out[i].data());
    for (int row = 0; row < rows; ++row) // p_{t+1}, sampled (seed 0) as tarnn sample would
      img[size_t(row) * T + t + 1] = uint8_t(sample_byte(
          &out[i][size_t(row) * c.d_out()], c.mixtures, 0, uint64_t(first[i] + row), uint32_t(t)));
  };
  // one team for the whole run, as the engine keeps its threads for a whole job
  WorkerTeam team(threads);
  auto step_all = [&](int t) { team.run([&](int i) { run_slice(i, t); }); };
  // One untimed step first (first touches of buffers and code), then start from scratch.
  step_all(0);
  for (auto &s : slices)
    s->reset();
  std::fill(images.begin(), images.end(), 0);
  for (int t : positions) {
    const auto t0 = Clock::now();
    step_all(t);
    r.step_times.emplace_back(t, seconds_since(t0));
    if (o.progress) // outside the timing
      o.progress(int64_t(r.step_times.size()) * B, int64_t(positions.size()) * B);
  }

  double flops = 0;
  for (const auto &[t, s] : r.step_times) {
    r.seconds_measured += s;
    flops += flops_at(c, form, t) * B;
  }
  for (int t = 0; t < L; ++t)
    r.gflop_per_image += flops_at(c, form, t) / 1e9;
  r.model = o.model.empty() ? "random:" + o.shape : o.model;
  r.attention = o.attention;
  r.attention_form = describe(form);
  r.device = "cpu";
  r.cpu = cpu_model_name();
  r.batch = B;
  r.threads = threads;
  r.positions = L;
  r.steps_measured = int(positions.size());
  r.extrapolated = r.steps_measured < L;
  r.seconds_full_length = full_length_seconds(form, L, r.step_times);
  r.images_per_second = B / r.seconds_full_length;
  r.gflops_achieved = flops / r.seconds_measured / 1e9;
  if (r.extrapolated)
    r.extrapolation =
        "extrapolated from " + std::to_string(r.steps_measured) + " of " + std::to_string(L) +
        " positions: " +
        (form == Form::Linear
             ? "linear attention costs the same at every position, so the mean step time x " +
                   std::to_string(L)
             : "the step time interpolated linearly between the measured positions and summed "
               "over all " +
                   std::to_string(L));
  r.memory_bytes_per_image = memory;
  r.memory_kind =
      form == Form::Linear ? "state S and z, constant in the position"
      : form == Form::Softmax
          ? "KV cache at full length, grows with the position"
          : "activations of the full-length prefix during one step, grows with the position";
  r.state_bytes_per_image = c.state_bytes_per_image();
  return r;
}

} // namespace tarnn
