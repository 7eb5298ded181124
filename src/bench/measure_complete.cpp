// bench --complete: the paper's Figure 3 timed with the known half prefilled (model/prefill.h) and
// step by step, and the time to the first sampled pixel of one image, both ways. The images are
// noise of the model's size: the time does not depend on the values.
#include <chrono>
#include <utility>

#include "../base/util.h"
#include "forms.h"
#include "tarnn/error.h"
#include "tarnn/jobs.h"

namespace tarnn {

namespace {

double seconds_of(const std::function<void()> &f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return seconds_since(t0);
}

// --images images of the model's size, noise from a fixed LCG.
ImageSet noise_images(const BenchOptions &o, const Config &c) {
  ImageSet in{o.images, c.height, c.width, c.channels,
              std::vector<uint8_t>(size_t(o.images) * c.bytes_per_image())};
  uint32_t s = 1;
  for (auto &b : in.bytes)
    b = uint8_t((s = s * 1664525u + 1013904223u) >> 24);
  return in;
}

// The completions of every image, with and without the prefill, alternately, best of 2 (the
// machine is shared): their seconds, {with, without}.
std::pair<double, double> time_completions(const BenchOptions &o, Engine &with, Engine &without,
                                           const ImageSet &in, const std::vector<uint8_t> &known) {
  std::vector<int64_t> index(size_t(o.images));
  for (int i = 0; i < o.images; ++i)
    index[size_t(i)] = i;
  double best_fast = 1e30, best_slow = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    best_fast = std::min(best_fast, seconds_of([&] {
                           complete_images(with, in, index, known, o.samples, 0, o.progress);
                         }));
    best_slow = std::min(best_slow, seconds_of([&] {
                           complete_images(without, in, index, known, o.samples, 0, o.progress);
                         }));
  }
  return {best_fast, best_slow};
}

// The first sampled pixel of the first image: its P known positions, then one draw, best of 5
// each way: an engine's first prefill that splits its GEMMs starts their threads (a few tens of ms
// the first time and while the scheduler places them); an engine that serves keeps them.
std::pair<double, double> time_first_pixel(Engine &with, Engine &without, const ImageSet &in,
                                           const std::vector<uint8_t> &known, int P) {
  std::vector<uint8_t> out(size_t(in.bytes_per_image()));
  Rollout first;
  first.count = 1;
  first.given = in.bytes.data();
  first.known = known.data();
  first.out = out.data();
  first.positions = P; // the steps up to and including the draw of p_P
  first.batch = 1;
  double ttf_fast = 1e30, ttf_slow = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    ttf_fast = std::min(ttf_fast, seconds_of([&] { with.run(first); }));
    ttf_slow = std::min(ttf_slow, seconds_of([&] { without.run(first); }));
  }
  return {ttf_fast, ttf_slow};
}

// What ran: the model, the engine's options and the figures' setting.
void describe_run(BenchResult &r, const BenchOptions &o, const Engine &with, const Config &c,
                  int P) {
  r.model = o.model.empty() ? "random:" + o.shape : o.model;
  r.attention = "linear";
  r.attention_form = "completion (Figure 3): the top half known";
  r.device = o.run.device;
  r.precision = with.options().precision;
  r.state = with.options().state;
  r.cpu = with.device();
  r.device_name = with.device();
  r.batch = with.options().batch;
  r.threads = with.options().threads;
  r.threads_from = with.options().threads_from;
  r.positions = c.positions();
  r.images = o.images;
  r.samples = o.samples;
  r.known_bytes = P;
  r.state_bytes_per_image = state_bytes_per_image(c, with.options().state);
  r.memory_bytes_per_image = r.state_bytes_per_image;
}

} // namespace

BenchResult measure_complete(const BenchOptions &o) { // checked by run_bench
  const Model model = bench_model(o);
  const Config &c = model.config;
  const ImageSet in = noise_images(o, c);
  const std::vector<uint8_t> known = make_mask({}, c); // the top half, as Figure 3
  RunOptions fast = o.run, slow = o.run;
  fast.prefill = true;
  slow.prefill = false;
  Engine with(model, fast), without(model, slow);
  BenchResult r;
  r.load_average = load_average();
  const auto [best_fast, best_slow] = time_completions(o, with, without, in, known);
  int P = 1; // the known positions before the first to draw
  while (P < c.positions() && known[size_t(P)])
    ++P;
  const auto [ttf_fast, ttf_slow] = time_first_pixel(with, without, in, known, P);
  describe_run(r, o, with, c, P);
  const int n = o.images * o.samples;
  r.completions_per_second = n / best_fast;
  r.completions_per_second_stepwise = n / best_slow;
  r.first_pixel_seconds = ttf_fast;
  r.first_pixel_seconds_stepwise = ttf_slow;
  return r;
}

} // namespace tarnn
