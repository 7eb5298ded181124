#include "bench.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine.h"
#include "error.h"

namespace tarnn {

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Multiply-adds x 2 of one image at one position, linear attention in RNN mode.
double flops_per_step(const Config &c) {
  const double D = c.d_model, A = c.d_attn(), F = c.d_ff, dh = c.d_head;
  const double gemm = 2 * (D * 3 * A + A * D + D * F + F * D);
  const double attention = c.n_heads * (4 * dh * dh + 4 * dh); // S, z update and read-out
  return c.n_layers * (gemm + attention) + 2 * D * c.d_out();
}

void add_bench_options(CLI::App *cmd, BenchArgs &a) {
  cmd->add_option("--model", a.model, "benchmark this model folder instead of --shape");
  cmd->add_option("--shape", a.shape, "the paper's model with random weights: mnist or cifar10")
      ->check(CLI::IsMember({"mnist", "cifar10"}))
      ->capture_default_str();
  cmd->add_option("--attention", a.attention, "linear (RNN mode)")
      ->check(CLI::IsMember({"linear"}))
      ->capture_default_str();
  cmd->add_option("--batch", a.batch, "images generated at once")->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--steps", a.steps, "measure only the first N positions and extrapolate (0: all)")
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
  const Model m = a.model.empty()
                      ? random_model(a.shape == "mnist" ? Config::mnist() : Config::cifar10(), 1)
                      : load_model(a.model);
  const Config &c = m.config;
  const int threads = a.threads > 0 ? a.threads : default_threads();
  const int L = c.positions();
  const int steps = a.steps > 0 && a.steps < L ? a.steps : L;
  const CpuWeights w(m);
  std::vector<uint8_t> out(size_t(a.batch > 0 ? a.batch : 1) * c.bytes_per_image());
  Rollout job;
  job.count = a.batch;
  job.out = out.data();
  job.positions = steps;
  RunOptions opt{a.batch, threads, false, progress_bar(steps)};
  check_run_options(c, opt);
  const auto t0 = std::chrono::steady_clock::now();
  run_cpu(w, job, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Linear attention costs the same at every position, so time per step times L is the
  // full-length time; with --steps < L that is an extrapolation, and the output says so.
  const double full = secs / steps * L;
  const double ips = a.batch / full;
  const double gflops = flops_per_step(c) * a.batch * steps / secs / 1e9;
  const bool extrapolated = steps < L;
  std::printf("%s, %s attention, batch %d, %d threads, %s: %.2f images/s "
              "(%.2f ms/step, %.1f GFLOP/s, state %lld bytes/image)%s\n",
              a.model.empty() ? a.shape.c_str() : a.model.c_str(), a.attention.c_str(), a.batch,
              threads, cpu_name().c_str(), ips, secs / steps * 1e3, gflops,
              static_cast<long long>(c.state_floats_per_image() * 4),
              extrapolated ? (" [extrapolated from " + std::to_string(steps) + " of " +
                              std::to_string(L) + " positions]")
                                 .c_str()
                           : "");
  if (!a.json.empty()) {
    const nlohmann::json j = {{"machine", {{"cpu", cpu_name()}, {"threads", threads}}},
                              {"device", a.device},
                              {"model", a.model.empty() ? "random:" + a.shape : a.model},
                              {"attention", a.attention},
                              {"batch", a.batch},
                              {"positions", L},
                              {"steps_measured", steps},
                              {"extrapolated", extrapolated},
                              {"seconds_measured", secs},
                              {"seconds_full_length", full},
                              {"images_per_second", ips},
                              {"ms_per_step", secs / steps * 1e3},
                              {"gflop_per_image", flops_per_step(c) * L / 1e9},
                              {"gflops_achieved", gflops},
                              {"state_bytes_per_image", c.state_floats_per_image() * 4}};
    write_text_file(a.json, j.dump(2) + "\n");
  }
  return 0;
}

} // namespace tarnn
