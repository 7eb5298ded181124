// run_bench (include/tarnn/bench.h): checks, then the steps timed through the Engine on whichever
// device it runs (Backend::time_steps), extrapolated to full length where asked.
#include <algorithm>
#include <cmath>
#include <fstream>

#include "../../kernels/cpu_features.h"
#include "../engine/registry.h"
#include "forms.h"
#include "tarnn/error.h"

namespace tarnn {

AttentionForm form_of(const std::string &attention) {
  if (attention == "linear")
    return AttentionForm::Linear;
  if (attention == "softmax")
    return AttentionForm::Softmax;
  if (attention == "softmax-recompute")
    return AttentionForm::Recompute;
  throw Error({param("attention", attention), " is not one of linear, softmax, softmax-recompute"});
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

// The time of all L positions from the measured ones: their sum where all were measured, the mean
// step x L for linear attention, else the step time interpolated linearly between the measured
// positions and summed.
double full_length_seconds(AttentionForm f, int L, const std::vector<int> &positions,
                           const StepTimes &t) {
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

BenchResult measure(const BenchOptions &o) {
  const AttentionForm form = form_of(o.attention);
  Model model = bench_model(o);
  // the form timed is --attention's, whatever attention the weights were trained with: the
  // Engine holds them as linear (its state and memory check), and the timed steps bring the
  // form's own memory (timed_steps.cpp: a KV cache, a prefix)
  model.config.attention = Attention::Linear;
  Engine engine(std::move(model), o.run);
  const Config &c = engine.config();
  const RunOptions &run = engine.options();
  const int L = c.positions();
  TimedSteps job;
  job.form = form;
  // the CPU's batch is its option; a GPU's is what fits (capped by --batch)
  job.batch = engine.batch_for(run.batch > 0 ? run.batch : int64_t(1) << 30);
  job.positions = positions_to_measure(form, L, o.steps == 0 ? L : o.steps);
  job.progress = o.progress;
  BenchResult r;
  r.load_average = load_average();
  const StepTimes t = engine.backend().time_steps(job);

  const int64_t B = job.batch;
  double flops = 0;
  for (int p : job.positions)
    flops += flops_at(c, form, p) * double(B);
  for (int p = 0; p < L; ++p)
    r.gflop_per_image += flops_at(c, form, p) / 1e9;
  r.model = o.model.empty() ? "random:" + o.shape : o.model;
  r.attention = o.attention;
  r.attention_form = describe(form);
  r.device = run.device;
  r.precision = run.precision;
  r.state = run.state;
  r.cpu = cpu_model_name();
  r.batch = B;
  r.threads = t.threads;
  r.threads_from = t.threads < run.threads ? "--batch" : run.threads_from;
  r.positions = L;
  r.steps_measured = int(job.positions.size());
  r.extrapolated = r.steps_measured < L;
  r.step_times = t.at;
  r.seconds_setup = t.info.seconds_setup;
  r.seconds_measured = t.seconds;
  r.seconds_full_length = full_length_seconds(form, L, job.positions, t);
  r.images_per_second = double(B) / r.seconds_full_length;
  r.gflops_achieved = flops / r.seconds_measured / 1e9;
  r.peak_gflops = t.peak_gflops;
  r.peak_rows = t.peak_rows, r.peak_in = t.peak_in, r.peak_out = t.peak_out;
  if (r.extrapolated)
    r.extrapolation =
        "extrapolated from " + std::to_string(r.steps_measured) + " of " + std::to_string(L) +
        " positions: " +
        (form == AttentionForm::Linear
             ? "linear attention costs the same at every position, so the mean step time x " +
                   std::to_string(L)
             : "the step time interpolated linearly between the measured positions and summed "
               "over all " +
                   std::to_string(L));
  r.memory_bytes_per_image = t.memory_bytes_per_image;
  r.memory_kind =
      form == AttentionForm::Linear ? "state S and z, constant in the position"
      : form == AttentionForm::Softmax
          ? "KV cache at full length, grows with the position"
          : "activations of the full-length prefix during one step, grows with the position";
  r.state_bytes_per_image = state_bytes_per_image(c, run.state);
  if (r.device == Device::Cuda) {
    // a GPU: the state read and written once per step, against the device's bandwidth
    const double state = double(r.state_bytes_per_image);
    r.gpu = t.info.device;
    r.state_traffic = 2 * state * double(B) * r.steps_measured / t.seconds;
    r.peak_bandwidth = t.info.peak_bandwidth;
    r.state_bound_images_per_second =
        t.info.peak_bandwidth > 0 ? t.info.peak_bandwidth / (2 * state * L) : 0;
    r.device_bytes = t.info.memory_bytes;
    r.kernels_per_step = t.info.kernels_per_step;
    r.emulated_bytes = t.emulated_bytes;
  }
  r.device_name = engine.device();
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
  if (!o.complete && std::find(forms.begin(), forms.end(), form) == forms.end())
    throw Error({param("device", name(o.run.device)),
                 " runs linear attention only: ", param("attention", o.attention),
                 " (the paper's softmax baselines) runs on the cpu"});
}

BenchResult run_bench(const BenchOptions &o) {
  check_bench_options(o); // before any work
  return o.complete ? measure_complete(o) : measure(o);
}

} // namespace tarnn
