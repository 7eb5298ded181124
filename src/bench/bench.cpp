// run_bench (include/tarnn/bench.h): checks, then the job users run (Engine::run) timed on
// whichever device it runs, per position where it needs it (Rollout::stepped), extrapolated to full
// length where asked.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>

#include "../../kernels/cpu_features.h"
#include "../base/util.h"
#include "../engine/registry.h"
#include "../softmax/softmax_ops.h"
#include "forms.h"
#include "tarnn/error.h"

namespace tarnn {

AttentionForm form_of(const std::string &attention) {
  for (AttentionForm f : {AttentionForm::Linear, AttentionForm::Softmax, AttentionForm::Recompute})
    if (attention == attention_name(f))
      return f;
  throw Error({param("attention", attention), " is not one of linear, softmax, softmax-recompute"});
}

const char *attention_name(AttentionForm f) {
  switch (f) {
  case AttentionForm::Linear:
    return "linear";
  case AttentionForm::Softmax:
    return "softmax";
  case AttentionForm::Recompute:
    return "softmax-recompute";
  }
  return "";
}

const char *describe(AttentionForm f) {
  switch (f) {
  case AttentionForm::Linear:
    return "linear attention in RNN mode";
  case AttentionForm::Softmax:
    return "softmax attention with a KV cache";
  case AttentionForm::Recompute:
    return "softmax attention recomputing the whole prefix every step";
  }
  return "";
}

double flops_at(const Config &c, AttentionForm f, int t) {
  const double D = c.d_model, A = c.d_attn(), F = c.d_ff, dh = c.d_head;
  const double heads = double(c.n_layers) * c.n_heads, n = t + 1.0;
  const double gemm = c.n_layers * 2 * (D * 3 * A + A * D + D * F + F * D);
  const double head = 2 * D * c.d_out(); // the predictor, on the newest position only
  switch (f) {
  case AttentionForm::Linear:
    return gemm + heads * (4 * dh * dh + 4 * dh) + head;
  case AttentionForm::Softmax:
    return gemm + heads * 4 * dh * n + head;
  case AttentionForm::Recompute:
    return n * gemm + heads * 4 * dh * n * (n + 1) / 2 + head;
  }
  return 0;
}

double flops_per_step(const Config &c) { return flops_at(c, AttentionForm::Linear, 0); }

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

Model bench_model(const BenchOptions &o) {
  if (!o.model.empty())
    return load_model(o.model);
  if (o.shape != "mnist" && o.shape != "cifar10")
    throw Error({param("shape", o.shape), " is not one of mnist, cifar10"});
  return random_model(o.shape == "mnist" ? Config::mnist() : Config::cifar10(), 1);
}

namespace {

// Linear attention: the first `steps` positions (every position costs the same). Softmax: `steps`
// positions spread evenly over the image (the cost grows with the position).
std::vector<int> positions_to_measure(AttentionForm f, int L, int steps) {
  std::vector<int> pos;
  if (steps >= L || f == AttentionForm::Linear) {
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

// The measured steps: (position, seconds) each, and their sum.
struct Timed {
  std::vector<std::pair<int, double>> at;
  double seconds = 0;
  RunInfo info; // of the (last) run timed
};

// The time of all L positions from the measured ones: their sum where all were measured, the mean
// step x L for linear attention, else the step time interpolated linearly between the measured
// positions and summed.
double full_length_seconds(AttentionForm f, int L, const std::vector<int> &positions,
                           const Timed &t) {
  const std::vector<std::pair<int, double>> &st = t.at;
  if (int(positions.size()) == L)
    return t.seconds;
  if (f == AttentionForm::Linear || st.size() == 1)
    return t.seconds / double(positions.size()) * L;
  double total = 0;
  size_t i = 0;
  for (int p = 0; p < L; ++p) {
    while (i + 2 < st.size() && st[i + 1].first <= p)
      ++i;
    const auto [t0, s0] = st[i];
    const auto [t1, s1] = st[i + 1];
    total += s0 + (s1 - s0) * double(p - t0) / double(t1 - t0);
  }
  return total;
}

// Each step's time as a run reports it (Rollout::stepped): per position the slowest of the
// threads that ran it, as a step of the whole batch ends when its last image's does.
class StepClock {
public:
  void operator()(int t, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    double &s = at_[t];
    s = std::max(s, seconds);
  }
  double at(int t) {
    std::lock_guard<std::mutex> lock(mutex_);
    return at_[t];
  }
  double total() {
    std::lock_guard<std::mutex> lock(mutex_);
    double s = 0;
    for (const auto &[t, seconds] : at_)
      s += seconds;
    return s;
  }

private:
  std::mutex mutex_;
  std::map<int, double> at_;
};

// The job users run (Engine::run): `batch` images sampled over positions [0, n), the first
// `known` bytes of each given (a prefill's: p_0 the image's index, the rest 0, so that no image's
// prefix is its neighbour's, whose state the prefill would copy), each step timed by `clock`.
RunInfo run_positions(Engine &engine, int64_t batch, int n, int known, StepClock *clock,
                      const Progress &progress) {
  const size_t T = size_t(engine.config().bytes_per_image());
  std::vector<uint8_t> out(size_t(batch) * T), given, mask;
  Rollout r;
  r.count = batch;
  r.out = out.data();
  r.positions = n; // r.batch 0: the engine's, which planned `batch`
  if (known > 0) {
    given.assign(out.size(), 0);
    mask.assign(out.size(), 0);
    for (int64_t i = 0; i < batch; ++i) {
      std::fill_n(mask.begin() + i * T, known, 1);
      given[size_t(i) * T] = uint8_t(i);
    }
    r.given = given.data();
    r.known = mask.data();
  }
  if (clock)
    r.stepped = [clock](int t, double s) { (*clock)(t, s); };
  return engine.run(r, progress);
}

// Linear attention, or softmax's KV cache: one run of the positions from 0 where they are the
// first ones (each step timed where `per_step`: the device's steps run on this machine, and
// waiting for each costs nothing; else the run's steps in all), or one run per position, its
// prefix given (a prefill fills the cache) and its last step timed.
Timed time_steps(Engine &engine, int64_t B, const std::vector<int> &positions, bool per_step,
                 const Progress &progress) {
  Timed r;
  const int n = int(positions.size());
  const bool first = positions.back() == n - 1;
  StepClock clock;
  if (per_step) // first touches of the code and the memory, untimed
    run_positions(engine, B, 1, 0, nullptr, nullptr);
  if (first) {
    r.info = run_positions(engine, B, n, 0, per_step ? &clock : nullptr, progress);
    for (int t : positions)
      r.at.emplace_back(t, per_step ? clock.at(t) : 0.0);
  } else {
    for (int t : positions) {
      r.info = run_positions(engine, B, t + 1, t, &clock, nullptr);
      r.at.emplace_back(t, clock.at(t));
      if (progress) // outside the timing
        progress(int64_t(r.at.size()) * B, int64_t(n) * B);
    }
  }
  for (const auto &[t, s] : r.at)
    r.seconds += s;
  if (!per_step) { // one figure for the whole run
    r.at.clear();
    r.seconds = r.info.seconds_steps;
  }
  return r;
}

// The paper's recomputing baseline: at position t the whole prefix p_0..p_t runs through every
// layer, which is what a softmax model's run does with the first t bytes given (the prefill's t
// rows) and one step at t: one run per position, its prefill and step timed (not its memory's
// allocation).
Timed time_recompute(Engine &engine, int64_t B, const std::vector<int> &positions,
                     const Progress &progress) {
  Timed r;
  run_positions(engine, B, 1, 0, nullptr, nullptr); // untimed, as time_steps
  for (int t : positions) {
    StepClock clock;
    r.info = run_positions(engine, B, t + 1, t, &clock, nullptr);
    const double s = clock.total();
    r.at.emplace_back(t, s);
    r.seconds += s;
    if (progress)
      progress(int64_t(r.at.size()) * B, int64_t(positions.size()) * B);
  }
  return r;
}

int64_t memory_of(const Config &c, AttentionForm form, StateFormat state) {
  switch (form) {
  case AttentionForm::Linear:
    return state_bytes_per_image(c, state);
  case AttentionForm::Softmax:
    return kv_cache_bytes_per_image(c);
  case AttentionForm::Recompute:
    return recompute_bytes_per_image(c);
  }
  return 0;
}

const char *memory_kind(AttentionForm form) {
  switch (form) {
  case AttentionForm::Linear:
    return "state S and z, constant in the position";
  case AttentionForm::Softmax:
    return "KV cache at full length, grows with the position";
  case AttentionForm::Recompute:
    return "activations of the full-length prefix during one step, grows with the position";
  }
  return "";
}

std::string extrapolation(AttentionForm form, int measured, int L) {
  return "extrapolated from " + std::to_string(measured) + " of " + std::to_string(L) +
         " positions: " +
         (form == AttentionForm::Linear
              ? "linear attention costs the same at every position, so the mean step time x " +
                    std::to_string(L)
              : "the step time interpolated linearly between the measured positions and summed "
                "over all " +
                    std::to_string(L));
}

// The figures of a device that keeps the state in its own memory: the state read and written
// once per step, against its bandwidth, and what its kernels moved.
void device_figures(BenchResult &r, const RunInfo &info, const Timed &t) {
  const double state = double(r.state_bytes_per_image);
  r.gpu = info.device;
  r.state_traffic = 2 * state * double(r.batch) * r.steps_measured / t.seconds;
  r.peak_bandwidth = info.peak_bandwidth;
  r.state_bound_images_per_second =
      info.peak_bandwidth > 0 ? info.peak_bandwidth / (2 * state * r.positions) : 0;
  r.device_bytes = info.memory_bytes;
  r.kernels_per_step = info.kernels_per_step;
}

// What ran: the model, the form timed, the engine's options and the batch of B images.
void describe_run(BenchResult &r, const BenchOptions &o, const Engine &engine,
                  const BackendRow &row, AttentionForm form, int64_t B) {
  const RunOptions &run = engine.options();
  r.model = o.model.empty() ? "random:" + o.shape : o.model;
  r.attention = o.attention;
  r.attention_form = describe(form);
  r.device = run.device;
  r.host = row.host_state;
  r.precision = run.precision;
  r.state = run.state;
  r.cpu = cpu_model_name();
  r.batch = B;
  r.threads = row.host_state ? int(std::min<int64_t>(run.threads, std::max<int64_t>(B, 1))) : 0;
  r.threads_from = r.threads < run.threads ? "--batch" : run.threads_from;
  r.positions = engine.config().positions();
  r.memory_bytes_per_image = memory_of(engine.config(), form, run.state);
  r.memory_kind = memory_kind(form);
  r.state_bytes_per_image = state_bytes_per_image(engine.config(), run.state);
  r.device_name = engine.device();
}

// The rates of the timed positions t of B images each, extrapolated to every position, against
// the work they did and this engine's GEMM peak.
void rate_figures(BenchResult &r, const Config &c, AttentionForm form, int64_t B,
                  const std::vector<int> &positions, const Timed &t, const GemmPeak &peak) {
  const int L = c.positions();
  double flops = 0;
  for (int p : positions)
    flops += flops_at(c, form, p) * double(B);
  for (int p = 0; p < L; ++p)
    r.gflop_per_image += flops_at(c, form, p) / 1e9;
  r.steps_measured = int(positions.size());
  r.extrapolated = r.steps_measured < L;
  r.step_times = t.at;
  r.seconds_measured = t.seconds;
  r.seconds_full_length = full_length_seconds(form, L, positions, t);
  r.images_per_second = double(B) / r.seconds_full_length;
  r.gflops_achieved = flops / r.seconds_measured / 1e9;
  r.peak_gflops = peak.gflops;
  r.peak_rows = peak.rows, r.peak_in = peak.in, r.peak_out = peak.out;
  if (r.extrapolated)
    r.extrapolation = extrapolation(form, r.steps_measured, L);
  r.seconds_setup = t.info.seconds_setup;
}

BenchResult measure(const BenchOptions &o) {
  const AttentionForm form = form_of(o.attention);
  Model model = bench_model(o);
  // the form timed is --attention's, whatever attention the weights were trained with: the
  // baselines run them as a softmax model (its KV cache), linear attention as a linear one
  model.config.attention = form == AttentionForm::Linear ? Attention::Linear : Attention::Softmax;
  Engine engine(std::move(model), o.run);
  const Config &c = engine.config();
  const RunOptions &run = engine.options();
  const BackendRow &row = backend_entry(run.device);
  const int L = c.positions();
  // the CPU's batch is its option; a GPU's is what fits (capped by --batch)
  const int64_t B = engine.batch_for(run.batch > 0 ? run.batch : int64_t(1) << 30);
  const std::vector<int> positions = positions_to_measure(form, L, o.steps == 0 ? L : o.steps);
  BenchResult r;
  r.load_average = load_average();
  const GemmPeak peak = engine.backend().gemm_peak(B);
  engine.backend().bytes_moved(1, 1); // the counts start here
  const Timed t = form == AttentionForm::Recompute
                      ? time_recompute(engine, B, positions, o.progress)
                      : time_steps(engine, B, positions, row.host_state, o.progress);
  r.emulated_bytes =
      engine.backend().bytes_moved(double(B) * double(positions.size()), double(positions.size()));
  describe_run(r, o, engine, row, form, B);
  rate_figures(r, c, form, B, positions, t, peak);
  if (!r.host)
    device_figures(r, t.info, t);
  return r;
}

} // namespace

void check_bench_options(const BenchOptions &o) {
  check_run_options(o.run);
  if (o.steps < 0)
    throw Error({param("steps"), " must be >= 0 (0: every position)"});
  if (o.complete && (o.images < 1 || o.samples < 1 || o.samples > kMaxSamples))
    throw Error("bench --complete needs at least one image and 1 to 64 samples");
  const AttentionForm form = form_of(o.attention); // --complete times linear attention
  const std::vector<AttentionForm> &forms = backend_entry(o.run.device).forms;
  if (!o.complete && std::find(forms.begin(), forms.end(), form) == forms.end()) {
    std::string runs;
    for (AttentionForm f : forms)
      runs += (runs.empty() ? "" : ", ") + std::string(attention_name(f));
    throw Error({param("device", name(o.run.device)),
                 " runs " + runs + " attention only: ", param("attention", o.attention),
                 " (the paper's softmax baselines) runs on " + devices_with(form)});
  }
}

BenchResult run_bench(const BenchOptions &o) {
  check_bench_options(o); // before any work
  return o.complete ? measure_complete(o) : measure(o);
}

} // namespace tarnn
