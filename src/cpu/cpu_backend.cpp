// The CPU backend: the images of a job split into one contiguous share per thread, each share a
// rollout (model/rollout.h) of CpuOps over its own batch memory. Images are independent and every
// element's arithmetic does not depend on the rows beside it, so the bytes do not depend on the
// thread count or the batch.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <random>
#include <vector>

#include "../../kernels/cpu_features.h"
#include "../base/util.h"
#include "../model/rollout.h"
#include "../softmax/softmax_ops.h"
#include "cores.h"
#include "cpu_backend.h"
#include "cpu_ops.h"
#include "tarnn/error.h"
#include "threads.h"

namespace tarnn {

CpuWeights::CpuWeights(const Model &m, const std::function<Precision(const Linear &)> &of,
                       Bf16Outputs outputs)
    : view_(make_view(
          m.weights, [](const std::vector<float> &v) { return v.data(); },
          [this, &of](const Linear &l) {
            const Precision p = of(l);
            return LinearWeights{p, l.out, l.in, packed(l, p), l.b.data(), l.w.data()};
          })) {
  mark_bf16_outputs(view_, m.config, outputs);
}

const void *CpuWeights::packed(const Linear &l, Precision precision) {
  switch (precision) {
  case Precision::Fp32:
    return &packed_.emplace_back(pack(l));
  case Precision::Bf16:
    return &packed_bf16_.emplace_back(pack_bf16(l));
  case Precision::Int8:
    return &packed_int8_.emplace_back(pack_int8(l));
  case Precision::Tf32: // kCpuPrecisions leaves it out: the engine refuses it before this
    break;
  }
  throw Error(std::string("the CPU has no ") + name(precision) + " GEMM");
}

namespace {

using Clock = std::chrono::steady_clock;

struct Stopped {}; // thrown into a worker's rollout when another worker failed

// The matrix-multiply peak of this machine as the engine reaches it: its own GEMM kernel on a
// compute-bound shape, rows split over the threads as a run splits the batch. Best of 10.
GemmPeak gemm_peak_on(WorkerTeam &team) {
  constexpr int kRows = 512, kIn = 1024, kOut = 1024;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.03f, 0.03f);
  Linear l{kOut, kIn, std::vector<float>(size_t(kOut) * kIn), {}};
  for (float &v : l.w)
    v = u(rng);
  l.b.assign(kOut, 0.0f);
  const PackedLinear p = pack(l);
  std::vector<float> x(size_t(kRows) * kIn), y(size_t(kRows) * kOut);
  for (float &v : x)
    v = u(rng);
  const int n = std::min(team.size(), kRows);
  auto once = [&] {
    team.run(n, [&](int i) {
      const int first = kRows * i / n, rows = kRows * (i + 1) / n - first;
      linear_forward(p, &x[size_t(first) * kIn], kIn, rows, &y[size_t(first) * kOut], kOut,
                     Act::None);
    });
  };
  once(); // warm the caches and the pages
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    const auto t0 = Clock::now();
    once();
    best = std::min(best, seconds_since(t0));
  }
  return {2.0 * kRows * kIn * kOut / best / 1e9, kRows, kIn, kOut};
}

class CpuBackend : public Backend {
public:
  // The teams spin where the engine's threads, all at work, fit in the cores it may use.
  CpuBackend(const Model &m, const RunOptions &o, const Knobs &k)
      : model_(m), options_(o), weights_(m, o.precision, bf16_outputs_path(k.get("bf16_outputs"))),
        kernels_{k.get("reference_gemm") == "on"}, teams_(o.threads <= usable_cores().count) {}

  std::string device() const override {
    return "cpu: " + cpu_model_name() + ", " + count_of(options_.threads, "thread", "threads") +
           ", " + cpu_path_name() + gemm_path();
  }

  std::string gemm_path() const { // which instructions a reduced precision's GEMMs run
    switch (options_.precision) {
    case Precision::Bf16:
      return cpu_has_avx512_bf16() ? ", bf16 GEMMs (AVX512_BF16)"
                                   : ", bf16 GEMMs (emulated: no AVX512_BF16)";
    case Precision::Int8:
      return std::string(", int8 GEMMs (") + name(int8_paths().front()) + ")";
    case Precision::Fp32:
    case Precision::Tf32:
      break;
    }
    return "";
  }

  int64_t batch_for(int64_t count) const override {
    return std::min<int64_t>(options_.batch, std::max<int64_t>(count, 1));
  }

  RunInfo run(const Rollout &job, const Progress &progress) override {
    const Config &c = model_.config;
    const auto t0 = Clock::now();
    const int threads = threads_for(job.count);
    // Each thread's share of the batch: the whole batch's state is in memory at once.
    const int64_t batch = job.batch > 0 ? job.batch : options_.batch;
    const int64_t rows = std::max<int64_t>(1, (batch + threads - 1) / threads);
    const int steps = rollout_steps(c, job);
    std::vector<std::atomic<int64_t>> done(static_cast<size_t>(threads));
    std::vector<float> largest(static_cast<size_t>(threads), 0.0f); // |S| at the end (fp16)
    FirstError error;
    const int64_t total = job.count * steps;
    auto sum = [&] {
      int64_t s = 0;
      for (const auto &d : done)
        s += d.load();
      return s;
    };
    // One helper of a team per share; the calling thread reports progress about 5 times a second
    // until they are done, and a progress callback that throws (an interrupt) stops them at their
    // next report.
    teams_.lend(threads + 1)
        ->run_watched(
            threads,
            [&](int i) {
              const int64_t first = job.count * i / threads, last = job.count * (i + 1) / threads;
              try {
                largest[size_t(i)] = share(job, first, last - first, rows,
                                           std::max(1, options_.threads / threads), [&](int64_t d) {
                                             done[size_t(i)] = d;
                                             if (error.failed())
                                               throw Stopped{};
                                           });
              } catch (const Stopped &) {
              } catch (...) {
                error.keep(std::current_exception());
              }
            },
            [&] {
              if (progress && !error.failed()) {
                try {
                  progress(sum(), total);
                } catch (...) {
                  error.keep(std::current_exception());
                }
              }
            });
    error.rethrow();
    if (progress)
      progress(total, total);
    return info_of(rows, threads, seconds_since(t0),
                   *std::max_element(largest.begin(), largest.end()));
  }

  // A run's figures: `threads` shares of `rows` images each, their memory, their time and the
  // largest |S| their fp16 state held.
  RunInfo info_of(int64_t rows, int threads, double seconds, float largest_state) const {
    RunInfo info;
    info.device = device();
    info.batch = rows * threads;
    const BatchLayout layout = batch_layout(model_.config, rows, options_.state);
    info.state_bytes = info.batch * int64_t(layout.state_row_bytes);
    info.memory_bytes = int64_t(layout.total) * threads;
    info.seconds_steps = seconds;
    info.largest_state = largest_state;
    info.threads = threads;
    return info;
  }

  GemmPeak gemm_peak(int64_t batch) override {
    return gemm_peak_on(*teams_.lend(threads_for(batch))); // as many threads as such a run's
  }

private:
  // the threads a run of `count` images has: one share of them each
  int threads_for(int64_t count) const {
    return int(std::min<int64_t>(options_.threads, std::max<int64_t>(count, 1)));
  }

  // Images [first, first + count) of the job, `rows` at a time.
  // `prefill_threads`: the threads a prefill may split its GEMMs over (the engine's threads that
  // a job of fewer images than threads leaves free).
  float share(const Rollout &job, int64_t first, int64_t count, int64_t rows, int prefill_threads,
              const DoneHook &hook) {
    if (count <= 0)
      return 0.0f;
    const Config &c = model_.config;
    const BatchLayout layout = batch_layout(c, std::min(rows, count), options_.state);
    std::vector<double> memory(layout.total / sizeof(double) + 1); // 8-byte aligned, zeroed
    const StepBuffers b = step_buffers(memory.data(), layout);
    // the prefill's own rows: up to kPrefillRows positions of one image at a time, one state
    const BatchLayout pre_layout =
        batch_layout(c, std::min(kPrefillRows, c.positions()), options_.state, 1);
    std::vector<double> pre_memory(pre_layout.total / sizeof(double) + 1);
    const StepBuffers pre_b = step_buffers(pre_memory.data(), pre_layout);
    const std::shared_ptr<WorkerTeam> team =
        prefill_threads > 1 && options_.prefill && !keeps_kv_cache(c) ? teams_.lend(prefill_threads)
                                                                      : nullptr;
    const size_t T = size_t(c.bytes_per_image());
    Rollout mine = job;
    mine.count = count;
    mine.first_index = job.first_index + first;
    mine.given = job.given ? job.given + size_t(first) * T : nullptr;
    mine.known = job.known ? job.known + size_t(first) * T : nullptr;
    mine.out = job.out + size_t(first) * T;
    mine.log_prob = job.log_prob ? job.log_prob + first : nullptr;
    mine.seeds = job.seeds ? job.seeds + first : nullptr;
    mine.images = job.images ? job.images + first : nullptr;
    mine.temperatures = job.temperatures ? job.temperatures + first : nullptr;
    if (job.grown)
      mine.grown = [&job, first](int64_t image, int64_t n, int t) {
        job.grown(first + image, n, t);
      };
    // The same rollout for either attention: a softmax model's ops keep each image's KV cache in
    // its state row, and its prefill fills the cache (kv_attention_positions): the steps' bits.
    if (keeps_kv_cache(c)) {
      KvOps<CpuKernels> ops(c, weights_.view(), b, kernels_);
      KvPrefillOps<CpuKernels> pre(c, weights_.view(), pre_b, kernels_);
      return rollout(ops, c, mine, hook, 8, options_.prefill ? &pre : nullptr);
    }
    CpuOps ops(c, weights_.view(), b, kernels_);
    PrefillOps pre(c, weights_.view(), pre_b, kernels_, team.get());
    return rollout(ops, c, mine, hook, 8, options_.prefill ? &pre : nullptr);
  }

  const Model &model_;
  RunOptions options_;
  CpuWeights weights_;
  CpuKernels kernels_;
  TeamPool teams_; // the prefills' GEMM threads (and the benchmark's), kept between runs
};

std::unique_ptr<Backend> make_cpu_backend(const Model &m, const RunOptions &o, const Knobs &k) {
  return std::make_unique<CpuBackend>(m, o, k);
}

} // namespace

const BackendRow &cpu_row() {
  static const BackendRow row{
      "cpu",
      "this machine's cores",
      kCpuPrecisions,
      {{Precision::Tf32, "TF32 is a GPU tensor-core format"}},
      kCpuStates,
      {AttentionForm::Linear, AttentionForm::Softmax, AttentionForm::Recompute},
      kDefaultCpuBatch,
      "256",
      true,
      // "reference_gemm": "on", the plain reference GEMM; "bf16_outputs": fp32 (forward.h)
      {"reference_gemm", "bf16_outputs"},
      &make_cpu_backend};
  return row;
}

} // namespace tarnn
