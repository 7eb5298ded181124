// tarnn bench --device cuda: images/s of full-length generation on the GPU, with the state
// traffic (S and z of every layer and head read and written once per step) against the device's
// peak bandwidth, the bound docs/CUDA.md derives.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench.h"
#include "cli_util.h"
#include "cuda_backend.h"
#include "cuda_plan.h"
#include "error.h"

namespace tarnn {

int run_bench_cuda(const BenchArgs &a) {
  if (a.steps < 0)
    throw Error("--steps must be >= 0");
  if (a.batch < 0)
    throw Error("--batch must be >= 0 (0: as many as fit in GPU memory)");
  cuda_require_device(); // before making a model: no GPU is a one-line error at once
  const Model m = a.model.empty()
                      ? random_model(a.shape == "mnist" ? Config::mnist() : Config::cifar10(), 1)
                      : load_model(a.model);
  const Config &c = m.config;
  const int L = c.positions();
  const int steps = a.steps > 0 && a.steps < L ? a.steps : L;
  const int64_t batch = a.batch > 0 ? a.batch : cuda_auto_batch(m, kMaxAutoBatch);
  std::vector<uint8_t> out(size_t(batch) * c.bytes_per_image());
  Rollout job;
  job.count = batch;
  job.out = out.data();
  job.positions = steps;
  CudaOptions opt;
  opt.batch = batch;
  opt.tf32 = a.tf32;
  opt.progress = progress_bar(steps);
  const CudaRunInfo info = run_cuda(m, job, opt);
  const double secs = info.seconds_steps;
  const double full = secs / steps * L; // constant cost per position, as on the CPU
  const double ips = double(batch) / full;
  const double gflops = flops_per_step(c) * double(batch) * steps / secs / 1e9;
  const double state = double(c.state_floats_per_image()) * 4;
  const double state_bw = 2 * state * double(batch) * steps / secs; // read + written per step
  const double bound_ips = info.peak_bandwidth > 0 ? info.peak_bandwidth / (2 * state * L) : 0;
  const bool extrapolated = steps < L;
  std::printf("%s, %s attention, batch %lld, %s%s: %.2f images/s (%.3f ms/step, %.1f GFLOP/s, "
              "state traffic %.1f GB/s",
              a.model.empty() ? a.shape.c_str() : a.model.c_str(), a.attention.c_str(),
              static_cast<long long>(batch), info.device.c_str(), a.tf32 ? ", TF32" : "", ips,
              secs / steps * 1e3, gflops, state_bw / 1e9);
  if (info.peak_bandwidth > 0)
    std::printf(" = %.0f%% of the %.0f GB/s peak, which bounds it at %.0f images/s",
                100 * state_bw / info.peak_bandwidth, info.peak_bandwidth / 1e9, bound_ips);
  std::printf(")%s\n", extrapolated ? (" [extrapolated from " + std::to_string(steps) + " of " +
                                       std::to_string(L) + " positions]")
                                          .c_str()
                                    : "");
  if (!a.json.empty()) {
    const nlohmann::json j = {{"machine", {{"cpu", cpu_name()}, {"gpu", info.device}}},
                              {"device", a.device},
                              {"tf32", a.tf32},
                              {"model", a.model.empty() ? "random:" + a.shape : a.model},
                              {"attention", a.attention},
                              {"batch", batch},
                              {"positions", L},
                              {"steps_measured", steps},
                              {"extrapolated", extrapolated},
                              {"seconds_setup", info.seconds_setup},
                              {"seconds_measured", secs},
                              {"seconds_full_length", full},
                              {"images_per_second", ips},
                              {"ms_per_step", secs / steps * 1e3},
                              {"gflop_per_image", flops_per_step(c) * L / 1e9},
                              {"gflops_achieved", gflops},
                              {"state_bytes_per_image", c.state_floats_per_image() * 4},
                              {"state_traffic_gb_per_s", state_bw / 1e9},
                              {"peak_bandwidth_gb_per_s", info.peak_bandwidth / 1e9},
                              {"state_bound_images_per_second", bound_ips},
                              {"device_bytes", info.device_bytes}};
    write_text_file(a.json, j.dump(2) + "\n");
  }
  return 0;
}

} // namespace tarnn
