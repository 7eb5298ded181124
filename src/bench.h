// tarnn bench: images/s of full-length generation, measured (or honestly extrapolated).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tarnn {

struct BenchArgs {
  std::string model;           // a model folder, or
  std::string shape = "mnist"; // the paper's shapes with random weights
  std::string attention = "linear";
  int batch = 256;
  int threads = 0; // 0: all cores
  int steps = 0;   // 0: every position
  std::string json;
  std::string device = "cpu";
  bool tf32 = false;
};

void add_bench_options(CLI::App *cmd, BenchArgs &a);
int run_bench(const BenchArgs &a);
int run_bench_cuda(const BenchArgs &a); // bench_cuda.cpp

struct Config;
std::string cpu_name();
double flops_per_step(const Config &c); // of one image at one position

} // namespace tarnn
