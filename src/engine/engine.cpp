// Engine (include/tarnn/run.h): every run option resolved and checked in one place, against the
// registry's row of the device asked for, then that device's backend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "../cpu/cores.h"
#include "registry.h"
#include "tarnn/error.h"
#include "testing.h"

namespace tarnn {

namespace {

template <class E> bool has(const std::vector<E> &v, E e) {
  return std::find(v.begin(), v.end(), e) != v.end();
}

template <class E> std::string names(const std::vector<E> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + name(v[i]);
  return s;
}

std::string upper(std::string s) {
  for (char &ch : s)
    ch = char(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// "precision tf32 runs on cuda only (...); the CPU has fp32, bf16 and int8"
Message lacking(const char *field, const std::string &value, const std::string &why,
                std::vector<Device> where, Device d, const std::string &it_has) {
  std::string on;
  for (Device e : where)
    on += (on.empty() ? "" : ", ") + std::string(name(e));
  return {param(field, value), " runs on " + on + " only" + (why.empty() ? "" : " (" + why + ")") +
                                   "; the " + upper(name(d)) + " has " + it_has};
}

// The environment's engine switches (docs/ENVIRONMENT.md), CUDA's paths for comparisons:
// TARNN_GEMM, the knob "gemm"; TARNN_BF16_INPUTS, the knob "bf16_inputs"; TARNN_LAYERNORM, the knob
// "layernorm"; TARNN_BF16_OUTPUTS, the knob "bf16_outputs", read by the CPU and CUDA backends alike
// (the bits differ); TARNN_FEED_FORWARD, the knob "feed_forward" (the backend that reads each
// checks its value).
Knobs knobs_from_environment() {
  Knobs k;
  if (const char *gemm = std::getenv("TARNN_GEMM"); gemm && *gemm)
    k.set("gemm", gemm);
  if (const char *inputs = std::getenv("TARNN_BF16_INPUTS"); inputs && *inputs)
    k.set("bf16_inputs", inputs);
  if (const char *norm = std::getenv("TARNN_LAYERNORM"); norm && *norm)
    k.set("layernorm", norm);
  if (const char *outputs = std::getenv("TARNN_BF16_OUTPUTS"); outputs && *outputs)
    k.set("bf16_outputs", outputs);
  if (const char *ff = std::getenv("TARNN_FEED_FORWARD"); ff && *ff)
    k.set("feed_forward", ff);
  return k;
}

// Every knob is one some row reads (a misspelt name is a test that checks nothing).
void check_knobs(const Knobs &knobs) {
  for (const auto &[knob, value] : knobs.values) {
    bool known = false;
    for (Device d : all_devices())
      for (const char *k : backend_entry(d).knobs)
        known = known || knob == k;
    if (!known)
      throw Error("a knob no backend reads: " + knob + "=" + value);
  }
}

// A softmax model (config.json "attention": "softmax") runs its jobs through a KV cache: on the
// devices whose backend has one (the registry's forms), and in fp32 only (a KV cache is not the
// linear state --state describes; fp32 is the default, so a run that leaves --state out passes).
void check_softmax_options(const RunOptions &o, const BackendRow &device) {
  if (!has(device.forms, AttentionForm::Softmax))
    throw Error({param("device", name(o.device)),
                 " runs linear attention only, and this model's config.json says attention "
                 "\"softmax\": run it with ",
                 param("device", devices_with(AttentionForm::Softmax)), " (a KV cache)"});
  if (o.state != StateFormat::Fp32)
    throw Error({param("state", name(o.state)),
                 " stores linear attention's state S; this model's attention is softmax, whose "
                 "KV cache is fp32: leave ",
                 param("state"), " out (or ", param("state", "fp32"), ")"});
}

} // namespace

void check_run_options(const RunOptions &o) {
  const BackendRow &device = backend_entry(o.device);
  if (o.batch < 0 || o.batch > kMaxBatch)
    throw Error({param("batch"), " must be in [0, " + std::to_string(kMaxBatch) +
                                     "] (0: the device's default) (got " + std::to_string(o.batch) +
                                     ")"});
  if (o.threads < 0 || o.threads > kMaxThreads)
    throw Error({param("threads"), " must be in [0, " + std::to_string(kMaxThreads) +
                                       "] (0: every core) (got " + std::to_string(o.threads) +
                                       ")"});
  if (!has(device.precisions, o.precision)) {
    std::vector<Device> where;
    for (Device d : all_devices())
      if (has(backend_entry(d).precisions, o.precision))
        where.push_back(d);
    const char *why = "";
    for (const Refusal &r : device.refused)
      if (r.precision == o.precision)
        why = r.why;
    throw Error(
        lacking("precision", name(o.precision), why, where, o.device, names(device.precisions)));
  }
  if (const char *why = refusal(o.state))
    throw Error({param("state", name(o.state)), std::string(": refused: ") + why});
  if (!has(device.states, o.state)) {
    std::vector<Device> where;
    for (Device d : all_devices())
      if (has(backend_entry(d).states, o.state))
        where.push_back(d);
    throw Error(lacking("state", name(o.state), "", where, o.device, names(device.states)));
  }
}

float sampling_temperature(double t) {
  const float f = static_cast<float>(t);
  if (std::isfinite(f) && f > 0.0f && t > 0)
    return f;
  char got[64];
  std::snprintf(got, sizeof got, "%.9g", t);
  throw Error({param("temperature"),
               std::string(" must be a finite number above 0 (got ") + got +
                   (std::isfinite(t) && t > 0
                        ? ", which is " + std::string(f > 0 ? "infinite" : "0") + " as a float"
                        : std::string()) +
                   ")"});
}

RunOptions resolve_run_options(const Config &c, RunOptions o) {
  check_run_options(o);
  const BackendRow &device = backend_entry(o.device);
  if (keeps_kv_cache(c))
    check_softmax_options(o, device);
  if (o.threads == 0) {
    const UsableCores cores = usable_cores();
    o.threads = std::min(cores.count, kMaxThreads);
    o.threads_from = cores.from;
  } else {
    o.threads_from = "--threads";
  }
  if (const int most = state_max_positions(o.state); most > 0 && c.positions() > most)
    throw Error({param("state", name(o.state)),
                 " is measured up to " + std::to_string(most) +
                     " positions (docs/STATE.md), this model has " + std::to_string(c.positions()) +
                     ": use ",
                 param("state", "fp32")});
  if (o.batch == 0)
    o.batch = device.default_batch; // 0 stays 0: as many as fit, known when a job runs
  if (device.host_state)
    check_memory(double(o.batch) * double(memory_bytes_per_image(c, o.state)),
                 {param("batch", std::to_string(o.batch)),
                  keeps_kv_cache(c) ? " (the KV cache of every image, at the last position)"
                                    : " (the state S and z of every image)"});
  return o;
}

Engine::Engine(Model model, const RunOptions &options)
    : Engine(std::move(model), options, knobs_from_environment()) {}

struct Engine::Notes {
  std::mutex mutex;
  std::vector<Message> said;
};

Engine::Engine(Model model, const RunOptions &options, const Knobs &knobs)
    : model_(std::make_unique<const Model>(std::move(model))),
      options_(resolve_run_options(model_->config, options)), notes_(std::make_unique<Notes>()) {
  check_knobs(knobs);
  backend_ = make_backend(backend_entry(options_.device), *model_, options_, knobs);
}

std::vector<Message> Engine::warnings() const {
  std::lock_guard<std::mutex> lock(notes_->mutex);
  return notes_->said;
}

Engine engine_with(Model model, const RunOptions &options, const Knobs &knobs) {
  return Engine(std::move(model), options, knobs);
}

Engine::~Engine() = default;
Engine::Engine(Engine &&) noexcept = default;
Engine &Engine::operator=(Engine &&) noexcept = default;

std::string Engine::device() const { return backend_->device(); }

int64_t Engine::batch_for(int64_t count) const { return backend_->batch_for(count); }

double Engine::host_state_bytes(int64_t count) const {
  return backend_entry(options_.device).host_state
             ? double(batch_for(count)) * double(memory_bytes_per_image(config(), options_.state))
             : 0.0;
}

namespace {

// Image i of `job` alone (the same bytes as in any batch), over its first `positions`: whether
// its log-probability is still finite.
bool finite_over(Backend &backend, const Rollout &job, int64_t i, int positions, int T) {
  std::vector<uint8_t> given, known, out(static_cast<size_t>(T));
  Rollout one;
  one.count = 1;
  one.seed = job.seed;
  one.first_index = job.first_index + i;
  if (job.given) {
    given.assign(job.given + i * T, job.given + (i + 1) * T);
    one.given = given.data();
  }
  if (job.known) {
    known.assign(job.known + i * T, job.known + (i + 1) * T);
    one.known = known.data();
  }
  if (job.seeds) {
    one.seeds = job.seeds + i;
    one.images = job.images + i;
  }
  one.temperature = job.temperature;
  one.temperatures = job.temperatures ? job.temperatures + i : nullptr;
  one.out = out.data();
  double log_prob = 0;
  one.log_prob = &log_prob;
  one.positions = positions;
  backend.run(one, Progress{});
  return std::isfinite(log_prob);
}

// An image's log-probability is a sum of logs of probabilities: finite and at most 0. Anything
// else is an overflow in the forward pass (sample_row's overflow_mark), and its bytes are noise:
// an error naming the first such image and, for a non-finite one, the position where it began
// (found by bisecting that image's rollout, a dozen short runs).
void check_log_probs(Backend &backend, const Rollout &job, const double *log_prob, int L, int T,
                     const RunOptions &o) {
  for (int64_t i = 0; i < job.count; ++i) {
    if (std::isfinite(log_prob[i]) && log_prob[i] <= 0)
      continue;
    std::string where;
    if (!std::isfinite(log_prob[i])) {
      int good = 0, bad = job.positions < 0 ? L : std::min(job.positions, L);
      while (bad - good > 1) {
        const int mid = good + (bad - good) / 2;
        (finite_over(backend, job, i, mid, T) ? good : bad) = mid;
      }
      where = " at position " + std::to_string(bad - 1);
    }
    // what would help: a narrower state has a way out; fp32 is the widest range the engine has
    Message m("image " + std::to_string(i) + ": the model's outputs overflowed" + where +
              " (non-finite mixture parameters): nothing of it is a result; ");
    if (o.state != StateFormat::Fp32)
      m.append(
          {"try ", param("state", "fp32"), " (", param("state", name(o.state)), " overflowed)"});
    else
      m += "the state and the GEMMs were " + std::string(name(o.precision)) +
           ", whose range is fp32's: check the model's weights";
    throw Error(m);
  }
}

} // namespace

RunInfo Engine::run(const Rollout &job, const Progress &progress) {
  if (job.count < 0 || (job.count > 0 && !job.out))
    throw Error("a rollout needs a count >= 0 and an output buffer");
  if (!job.seeds != !job.images)
    throw Error("a rollout's per-image RNG keys need both seeds and images");
  if (job.temperatures && !job.seeds)
    throw Error("a rollout's per-image temperatures go with per-image seeds and images");
  sampling_temperature(job.temperature);
  for (int64_t i = 0; job.temperatures && i < job.count; ++i)
    sampling_temperature(job.temperatures[i]);
  if (job.batch != 0) { // this job's own batch: checked as the Engine's was
    RunOptions o = options_;
    o.batch = job.batch;
    resolve_run_options(model_->config, o);
  }
  // Every run keeps its log-probabilities, which tell an overflow from a result.
  std::vector<double> own;
  Rollout checked = job;
  if (!checked.log_prob) {
    own.assign(size_t(job.count), 0.0);
    checked.log_prob = own.data();
  }
  const RunInfo info = backend_->run(checked, progress);
  check_log_probs(*backend_, job, checked.log_prob, model_->config.positions(),
                  model_->config.bytes_per_image(), options_);
  note_state_range(info);
  return info;
}

void Engine::note_state_range(const RunInfo &info) {
  // The fp16 state was measured on the magnitudes of docs/STATE.md's study (its largest |S|, just
  // under 2^14). Its rounding is 2^-11 of S whatever S's size, but a model whose S runs far larger
  // (large weights) is one whose outputs move more for it: an all-255 digit's bits/dim doubled,
  // with no word (issue 42). Beyond 2^14 the run is outside what was measured: said once.
  constexpr float kMeasured = 16384.0f;
  if (options_.state != StateFormat::Fp16 || !(info.largest_state > kMeasured))
    return;
  std::lock_guard<std::mutex> lock(notes_->mutex);
  for (const Message &w : notes_->said)
    if (w.text().rfind("state fp16:", 0) == 0)
      return;
  char text[400];
  std::snprintf(text, sizeof text,
                ": this model's state reached |S| = %.3g, beyond the %.0f its fp16 storage was "
                "measured for (docs/STATE.md): its rounding may move these results; ",
                double(info.largest_state), double(kMeasured));
  notes_->said.push_back(
      {param("state", "fp16"), text, param("state", "fp32"), " gives the reference"});
}

} // namespace tarnn
