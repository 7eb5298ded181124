// A BenchResult as the lines `tarnn bench` prints and as its JSON file.
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "../base/util.h"
#include "tarnn/bench.h"

namespace tarnn {

namespace {

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string line(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char *f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string host_text(const BenchResult &r) {
  const std::string threads = count_of(r.threads, "thread", "threads");
  std::string s =
      line("%s, %s, batch %lld, %s, %s, %s GEMMs, %s state (load average "
           "%.2f at the start)\n",
           r.model.c_str(), r.attention_form.c_str(), static_cast<long long>(r.batch),
           threads.c_str(), r.cpu.c_str(), name(r.precision), name(r.state), r.load_average);
  s += "  images/s          " + fmt("%.4g", r.images_per_second) +
       (r.extrapolated ? "  [" + r.extrapolation + "]" : "  [all positions measured]") + "\n";
  s += line("  full length       %.4g s for %lld images (mean %.4g ms per step)\n",
            r.seconds_full_length, static_cast<long long>(r.batch),
            r.seconds_full_length / r.positions * 1e3);
  std::string times; // at most 12 of the measured positions, evenly spread
  const int steps = int(r.step_times.size()), shown = std::min(steps, 12);
  for (int i = 0; i < shown; ++i) {
    const auto &[t, sec] = r.step_times[shown == 1 ? 0 : size_t(i) * (steps - 1) / (shown - 1)];
    times += (i ? ", " : "") + std::string("t=") + std::to_string(t) + " " + fmt("%.4g", sec * 1e3);
  }
  s += "  step time (ms)    " + times + "\n";
  s += line("  memory per image  %lld bytes (%s; linear state: %lld bytes)\n",
            static_cast<long long>(r.memory_bytes_per_image), r.memory_kind.c_str(),
            static_cast<long long>(r.state_bytes_per_image));
  s += line("  GFLOP/s           %.1f achieved, %.1f peak (this engine's GEMM, %dx%dx%d, %s): "
            "%.0f%%\n",
            r.gflops_achieved, r.peak_gflops, r.peak_rows, r.peak_in, r.peak_out, threads.c_str(),
            100 * r.gflops_achieved / r.peak_gflops);
  return s;
}

// The emulated device's bytes per image-step, in all and by kernel and GEMM.
struct Moved {
  double all = 0, state = 0, weights = 0;
};
Moved moved(const BenchResult &r) {
  Moved m;
  for (const KernelBytes &k : r.emulated_bytes) {
    m.all += k.read + k.written;
    m.state += k.state;
    m.weights += k.weights;
  }
  return m;
}

std::string emulated_text(const BenchResult &r) {
  if (r.emulated_bytes.empty())
    return "";
  const Moved m = moved(r);
  std::string s =
      line("  emulated device: %.0f bytes per image-step in device memory (state %.0f, "
           "weights %.0f at batch %lld, other %.0f)\n",
           m.all, m.state, m.weights, static_cast<long long>(r.batch), m.all - m.state - m.weights);
  for (const KernelBytes &k : r.emulated_bytes)
    s += line("    %-44s x%-4g %10.0f read %10.0f written (state %.0f)\n", k.name.c_str(),
              k.launches_per_step, k.read, k.written, k.state);
  return s;
}

std::string device_text(const BenchResult &r) {
  std::string s =
      line("%s, %s attention, batch %lld, %s, %s GEMMs, %s state: %.2f images/s (%.3f ms/step, "
           "%.1f GFLOP/s, state traffic %.1f GB/s",
           r.model.c_str(), r.attention.c_str(), static_cast<long long>(r.batch), r.gpu.c_str(),
           name(r.precision), name(r.state), r.images_per_second,
           r.seconds_measured / r.steps_measured * 1e3, r.gflops_achieved, r.state_traffic / 1e9);
  if (r.peak_bandwidth > 0)
    s += line(" = %.0f%% of the %.0f GB/s peak, which bounds it at %.0f images/s",
              100 * r.state_traffic / r.peak_bandwidth, r.peak_bandwidth / 1e9,
              r.state_bound_images_per_second);
  s += ")";
  if (r.extrapolated)
    s += " [extrapolated from " + std::to_string(r.steps_measured) + " of " +
         std::to_string(r.positions) + " positions]";
  return s + "\n" + emulated_text(r);
}

} // namespace

std::string complete_text(const BenchResult &r) {
  return line("%s, %s, %d images x %d samples, %d of %d positions known, batch %lld, %s (load "
              "average %.2f at the start)\n",
              r.model.c_str(), name(r.device), r.images, r.samples, r.known_bytes, r.positions,
              static_cast<long long>(r.batch), r.cpu.c_str(), r.load_average) +
         line("  completions/s     %.4g prefilled, %.4g step by step: %.2fx\n",
              r.completions_per_second, r.completions_per_second_stepwise,
              r.completions_per_second / r.completions_per_second_stepwise) +
         line("  first pixel       %.4g s prefilled, %.4g s step by step: %.1fx sooner (one "
              "image, batch 1)\n",
              r.first_pixel_seconds, r.first_pixel_seconds_stepwise,
              r.first_pixel_seconds_stepwise / r.first_pixel_seconds);
}

std::string bench_text(const BenchResult &r) {
  if (r.images > 0)
    return complete_text(r);
  return r.host ? host_text(r) : device_text(r);
}

namespace {

using nlohmann::json;

// The fields every run has: what ran, how long it took and what it held.
json run_json(const BenchResult &r) {
  json j = {{"device", name(r.device)},
            {"device_name", r.device_name},
            {"precision", name(r.precision)},
            {"state", name(r.state)},
            {"threads", r.threads},
            {"threads_from", r.threads_from},
            {"model", r.model},
            {"attention", r.attention},
            {"attention_form", r.attention_form},
            {"batch", r.batch},
            {"positions", r.positions},
            {"steps_measured", r.steps_measured},
            {"extrapolated", r.extrapolated},
            {"extrapolation", r.extrapolation},
            {"seconds_measured", r.seconds_measured},
            {"seconds_full_length", r.seconds_full_length},
            {"images_per_second", r.images_per_second},
            {"seconds_per_step", r.seconds_full_length / r.positions},
            {"gflop_per_image", r.gflop_per_image},
            {"gflops_achieved", r.gflops_achieved},
            {"memory_bytes_per_image", r.memory_bytes_per_image},
            {"memory_kind", r.memory_kind}};
  if (r.attention != "linear") // for comparison: what linear attention would hold
    j["linear_state_bytes_per_image"] = r.state_bytes_per_image;
  return j;
}

// bench --complete: the completions each way and the first pixel's time.
void add_complete(json &j, const BenchResult &r) {
  j["complete"] = {{"images", r.images},
                   {"samples", r.samples},
                   {"known_positions", r.known_bytes},
                   {"completions_per_second", r.completions_per_second},
                   {"completions_per_second_stepwise", r.completions_per_second_stepwise},
                   {"first_pixel_seconds", r.first_pixel_seconds},
                   {"first_pixel_seconds_stepwise", r.first_pixel_seconds_stepwise}};
  j["machine"] = {{"cpu", r.cpu}, {"threads", r.threads}, {"load_average", r.load_average}};
}

// The bytes each kernel moved per image and step on the emulated device (docs/JSON.md).
void add_emulated_bytes(json &j, const BenchResult &r) {
  const Moved m = moved(r);
  json kernels = json::array();
  for (const KernelBytes &k : r.emulated_bytes)
    kernels.push_back({{"name", k.name},
                       {"gemm", k.gemm},
                       {"launches_per_step", k.launches_per_step},
                       {"read_bytes_per_image_step", k.read},
                       {"written_bytes_per_image_step", k.written},
                       {"state_bytes_per_image_step", k.state},
                       {"weights_bytes_per_image_step", k.weights}});
  j["emulated_bytes_per_image_step"] = m.all;
  j["emulated_state_bytes_per_image_step"] = m.state;
  j["emulated_weights_bytes_per_image_step"] = m.weights;
  j["emulated_kernels"] = kernels;
}

// A device that keeps the state in its own memory: the state's traffic against its bandwidth.
void add_device(json &j, const BenchResult &r) {
  j["machine"] = {{"cpu", r.cpu}, {"gpu", r.gpu}, {"load_average", r.load_average}};
  j["tf32"] = r.precision == Precision::Tf32;
  j["seconds_setup"] = r.seconds_setup;
  j["state_traffic_bytes_per_second"] = r.state_traffic;
  j["peak_bandwidth_bytes_per_second"] = r.peak_bandwidth;
  j["state_bound_images_per_second"] = r.state_bound_images_per_second;
  j["device_bytes"] = r.device_bytes;
  j["kernels_per_step"] = r.kernels_per_step;
  if (!r.emulated_bytes.empty())
    add_emulated_bytes(j, r);
}

// The host: each measured step's time and the GEMM ceiling the achieved rate is a share of.
void add_host(json &j, const BenchResult &r) {
  json st = json::array();
  for (const auto &[t, s] : r.step_times)
    st.push_back({t, s});
  j["machine"] = {{"cpu", r.cpu}, {"threads", r.threads}, {"load_average", r.load_average}};
  j["step_times"] = st;
  j["peak_gflops"] = r.peak_gflops; // GFLOP/s, as gflops_achieved
  j["peak_fraction"] = r.gflops_achieved / r.peak_gflops;
  j["peak_gemm_shape"] = {r.peak_rows, r.peak_in, r.peak_out};
}

} // namespace

std::string bench_json(const BenchResult &r) {
  json j = run_json(r);
  if (r.images > 0)
    add_complete(j, r);
  else if (!r.host)
    add_device(j, r);
  else
    add_host(j, r);
  return j.dump(2) + "\n";
}

} // namespace tarnn
