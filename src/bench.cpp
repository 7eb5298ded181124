#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <unistd.h>

#include "../kernels/tarnn_math.h"
#include "cli_util.h"
#include "engine.h"
#include "error.h"
#include "softmax_decoder.h"

namespace tarnn {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The 1-minute load average when the run started: other work on the machine skews the figures.
double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

// The three ways the paper's Tables 1 and 2 and Figure 1 run the same weights.
enum class Kind { Linear, Softmax, Recompute };

Kind kind_of(const std::string &attention) {
  return attention == "linear"    ? Kind::Linear
         : attention == "softmax" ? Kind::Softmax
                                  : Kind::Recompute;
}

const char *form_of(Kind k) {
  return k == Kind::Linear    ? "linear attention in RNN mode"
         : k == Kind::Softmax ? "softmax attention with a KV cache"
                              : "softmax attention recomputing the whole prefix every step";
}

// FLOPs (2 x multiply-adds) of one image at position t. The GEMMs are the same in every form;
// attention costs 4 d_head^2 per head in RNN mode (update S and read it), 4 d_head (t + 1) over a
// KV cache (scores and weighted sum), and recomputing runs all t + 1 positions of the prefix.
double flops_at(const Config &c, Kind k, int t) {
  const double D = c.d_model, A = c.d_attn(), F = c.d_ff, dh = c.d_head;
  const double heads = double(c.n_layers) * c.n_heads, n = t + 1.0;
  const double gemm = c.n_layers * 2 * (D * 3 * A + A * D + D * F + F * D);
  const double head = 2 * D * c.d_out(); // the predictor, on the newest position only
  switch (k) {
  case Kind::Linear:
    return gemm + heads * (4 * dh * dh + 4 * dh) + head;
  case Kind::Softmax:
    return gemm + heads * 4 * dh * n + head;
  case Kind::Recompute:
    return n * gemm + heads * 4 * dh * n * (n + 1) / 2 + head;
  }
  return 0;
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
  auto once = [&] {
    std::vector<std::thread> workers;
    for (int i = 0; i < n; ++i) {
      const int first = kPeakRows * i / n, rows = kPeakRows * (i + 1) / n - first;
      workers.emplace_back([&, first, rows] {
        linear_forward(p, &x[size_t(first) * kPeakIn], kPeakIn, rows, &y[size_t(first) * kPeakOut],
                       kPeakOut, Epilogue::None);
      });
    }
    for (auto &w : workers)
      w.join();
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
};

// A stateful decoder (RNN state or KV cache) fed the slice's byte at t.
template <class Decoder, class Memory> struct StatefulSlice : Slice {
  StatefulSlice(const CpuWeights &w, Memory &memory, int first, int rows)
      : dec(w, memory, first, rows), cur(rows) {}
  void step(int t, const uint8_t *images, int T, float *o) override {
    for (size_t r = 0; r < cur.size(); ++r)
      cur[r] = images[r * T + t];
    dec.step(t, cur.data(), o);
  }
  Decoder dec;
  std::vector<uint8_t> cur;
};
using LinearSlice = StatefulSlice<CpuDecoder, CpuStatePool>;
using KvSlice = StatefulSlice<KvCacheDecoder, KvCache>;

struct RecomputeSlice : Slice {
  RecomputeSlice(const CpuWeights &w, int rows) : dec(w, rows) {}
  void step(int t, const uint8_t *images, int T, float *o) override { dec.step(t, images, T, o); }
  RecomputeDecoder dec;
};

// Which positions to time. Linear attention costs the same at every position: the first N.
// Softmax costs grow with t: N spread evenly over [0, L), both ends included.
std::vector<int> positions_to_measure(Kind k, int L, int steps) {
  std::vector<int> pos;
  if (steps >= L || k == Kind::Linear) {
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

// The time of all L steps from the measured ones: their sum when every position was measured;
// for linear attention the mean times L; for softmax the step time interpolated linearly between
// measured positions and summed over every position (the cost grows with t, so mean x L is wrong).
double full_length_seconds(Kind k, int L, const std::vector<std::pair<int, double>> &st) {
  double sum = 0;
  for (const auto &[t, s] : st)
    sum += s;
  if (int(st.size()) == L)
    return sum;
  if (k == Kind::Linear || st.size() == 1)
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

void check_memory(double need, const std::string &what) {
  const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (need > 0.75 * have)
    throw Error(what + " needs " + std::to_string(int64_t(need / 1e6)) + " MB, more than 3/4 of " +
                "this machine's " + std::to_string(int64_t(have / 1e6)) + " MB");
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

} // namespace

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double flops_per_step(const Config &c) { return flops_at(c, Kind::Linear, 0); }

void add_bench_options(CLI::App *cmd, BenchArgs &a) {
  cmd->add_option("--model", a.model, "benchmark this model folder instead of --shape");
  cmd->add_option("--shape", a.shape, "the paper's model with random weights: mnist or cifar10")
      ->check(CLI::IsMember({"mnist", "cifar10"}))
      ->capture_default_str();
  cmd->add_option("--attention", a.attention,
                  "linear (RNN mode), softmax (KV cache) or softmax-recompute (the whole prefix "
                  "every step, the paper's baseline); same weights")
      ->check(CLI::IsMember({"linear", "softmax", "softmax-recompute"}))
      ->capture_default_str();
  cmd->add_option("--batch", a.batch, "images generated at once")->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--steps", a.steps,
                  "time N positions and extrapolate to all (0: all); linear: the first N, "
                  "softmax: N spread over the image, interpolated")
      ->capture_default_str();
  cmd->add_option("--json", a.json, "also write the figures as JSON here");
  cmd->add_option("--device", a.device, "backend: cpu or cuda (cuda: --batch 0 takes what fits)")
      ->capture_default_str();
  cmd->add_flag("--tf32", a.tf32, "cuda: TF32 tensor cores in the GEMMs");
}

int run_bench(const BenchArgs &a) {
  if (a.device == "cuda")
    return run_bench_cuda(a);
  if (a.device != "cpu")
    throw Error("--device " + a.device + " is not available in this build (cpu)");
  if (a.steps < 0)
    throw Error("--steps must be >= 0");
  const Kind kind = kind_of(a.attention);
  const Model m = a.model.empty()
                      ? random_model(a.shape == "mnist" ? Config::mnist() : Config::cifar10(), 1)
                      : load_model(a.model);
  const Config &c = m.config;
  const int L = c.positions(), T = c.bytes_per_image(), B = a.batch;
  const int threads = std::min(a.threads > 0 ? a.threads : default_threads(), std::max(B, 1));
  check_run_options(c, RunOptions{B, threads, false, nullptr});
  const int64_t memory = kind == Kind::Linear    ? c.state_floats_per_image() * 4
                         : kind == Kind::Softmax ? KvCache::bytes_per_image(c)
                                                 : RecomputeDecoder::bytes_per_image(c);
  const char *memory_kind =
      kind == Kind::Linear ? "state S and z, constant in the position"
      : kind == Kind::Softmax
          ? "KV cache at full length, grows with the position"
          : "activations of the full-length prefix during one step, grows with the position";
  if (kind == Kind::Softmax)
    check_memory(double(B) * memory, "--batch " + std::to_string(B) + " of KV cache");
  if (kind == Kind::Recompute)
    check_memory(double(threads) * memory, std::to_string(threads) + " threads' prefixes");

  const double load = load_average();
  const double peak = gemm_peak_gflops(threads);
  const CpuWeights w(m);
  std::unique_ptr<CpuStatePool> pool;
  std::unique_ptr<KvCache> cache;
  if (kind == Kind::Linear)
    pool = std::make_unique<CpuStatePool>(c, B);
  if (kind == Kind::Softmax)
    cache = std::make_unique<KvCache>(c, B, L);
  std::vector<std::unique_ptr<Slice>> slices;
  std::vector<int> first;
  for (int i = 0; i < threads; ++i) { // contiguous slices, as run_cpu splits a batch
    const int f = int(int64_t(B) * i / threads), rows = int(int64_t(B) * (i + 1) / threads) - f;
    first.push_back(f);
    if (kind == Kind::Linear)
      slices.push_back(std::make_unique<LinearSlice>(w, *pool, f, rows));
    else if (kind == Kind::Softmax)
      slices.push_back(std::make_unique<KvSlice>(w, *cache, f, rows));
    else
      slices.push_back(std::make_unique<RecomputeSlice>(w, rows));
  }
  first.push_back(B);

  // Generate for real (sampled bytes fed back) at the measured positions. Where positions are
  // skipped, the KV cache holds zeros for them and the prefix holds p = 0: time does not depend
  // on values.
  std::vector<uint8_t> images(size_t(B) * T, 0);
  std::vector<std::vector<float>> o(threads);
  const std::vector<int> positions = positions_to_measure(kind, L, a.steps == 0 ? L : a.steps);
  std::vector<std::pair<int, double>> step_times;
  auto run_slice = [&](int i, int t) {
    const int rows = first[i + 1] - first[i];
    o[i].resize(size_t(rows) * c.d_out());
    uint8_t *img = &images[size_t(first[i]) * T];
    slices[i]->step(t, img, T, o[i].data());
    for (int r = 0; r < rows; ++r) // p_{t+1}, sampled (seed 0) as tarnn sample would
      img[size_t(r) * T + t + 1] = uint8_t(sample_byte(&o[i][size_t(r) * c.d_out()], c.mixtures, 0,
                                                       uint64_t(first[i] + r), uint32_t(t)));
  };
  auto step_all = [&](int t) {
    if (threads == 1)
      return run_slice(0, t);
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i)
      workers.emplace_back(run_slice, i, t);
    for (auto &th : workers)
      th.join();
  };
  // One untimed step first (first touches of buffers and code), then start from scratch.
  step_all(0);
  if (pool)
    pool->zero(0, B);
  std::fill(images.begin(), images.end(), 0);
  for (int t : positions) {
    const auto t0 = Clock::now();
    step_all(t);
    step_times.emplace_back(t, seconds_since(t0));
  }

  double secs = 0, flops = 0, gflop_per_image = 0;
  for (const auto &[t, s] : step_times) {
    secs += s;
    flops += flops_at(c, kind, t) * B;
  }
  for (int t = 0; t < L; ++t)
    gflop_per_image += flops_at(c, kind, t) / 1e9;
  const int steps = int(positions.size());
  const bool extrapolated = steps < L;
  const double full = full_length_seconds(kind, L, step_times);
  const double ips = B / full, gflops = flops / secs / 1e9;

  std::string how;
  if (extrapolated) {
    how = "extrapolated from " + std::to_string(steps) + " of " + std::to_string(L) +
          " positions: " +
          (kind == Kind::Linear
               ? "linear attention costs the same at every position, so the mean step time x " +
                     std::to_string(L)
               : "the step time interpolated linearly between the measured positions and summed "
                 "over all " +
                     std::to_string(L));
  }
  const std::string name = a.model.empty() ? "random:" + a.shape : a.model;
  std::printf("%s, %s, batch %d, %d threads, %s (load average %.2f at the start)\n", name.c_str(),
              form_of(kind), B, threads, cpu_name().c_str(), load);
  std::printf("  images/s          %s%s\n", fmt("%.4g", ips).c_str(),
              extrapolated ? ("  [" + how + "]").c_str() : "  [all positions measured]");
  std::printf("  full length       %.4g s for %d images (mean %.4g ms per step)\n", full, B,
              full / L * 1e3);
  std::string line; // at most 12 of the measured positions, evenly spread
  const int shown = std::min(steps, 12);
  for (int i = 0; i < shown; ++i) {
    const auto &[t, s] = step_times[shown == 1 ? 0 : size_t(i) * (steps - 1) / (shown - 1)];
    line += (i ? ", " : "") + std::string("t=") + std::to_string(t) + " " + fmt("%.4g", s * 1e3);
  }
  std::printf("  step time (ms)    %s\n", line.c_str());
  std::printf("  memory per image  %lld bytes (%s; linear state: %lld bytes)\n",
              static_cast<long long>(memory), memory_kind,
              static_cast<long long>(c.state_floats_per_image() * 4));
  std::printf("  GFLOP/s           %.1f achieved, %.1f peak (this engine's GEMM, %dx%dx%d, %d "
              "threads): %.0f%%\n",
              gflops, peak, kPeakRows, kPeakIn, kPeakOut, threads, 100 * gflops / peak);

  if (!a.json.empty()) {
    nlohmann::json st = nlohmann::json::array();
    for (const auto &[t, s] : step_times)
      st.push_back({t, s});
    const nlohmann::json j = {
        {"machine", {{"cpu", cpu_name()}, {"threads", threads}, {"load_average", load}}},
        {"device", a.device},
        {"model", name},
        {"attention", a.attention},
        {"attention_form", form_of(kind)},
        {"batch", B},
        {"positions", L},
        {"steps_measured", steps},
        {"extrapolated", extrapolated},
        {"extrapolation", how},
        {"seconds_measured", secs},
        {"seconds_full_length", full},
        {"images_per_second", ips},
        {"ms_per_step", full / L * 1e3},
        {"step_times", st},
        {"gflop_per_image", gflop_per_image},
        {"gflops_achieved", gflops},
        {"peak_gflops", peak},
        {"peak_fraction", gflops / peak},
        {"peak_gemm_shape", {kPeakRows, kPeakIn, kPeakOut}},
        {"memory_bytes_per_image", memory},
        {"memory_kind", memory_kind},
        {"state_bytes_per_image", c.state_floats_per_image() * 4}};
    write_text_file(a.json, j.dump(2) + "\n");
  }
  return 0;
}

} // namespace tarnn
