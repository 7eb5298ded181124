// tarnn bench: images/s of full-length generation, measured (or honestly extrapolated), for
// linear attention in RNN mode and the paper's softmax baselines with the same weights.
// Measure -> BenchResult -> text or JSON.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jobs.h"
#include "run.h"

namespace tarnn {

struct BenchOptions {
  std::string model;                // a model folder, or empty: `shape` with random weights
  std::string shape = "mnist";      // "mnist" or "cifar10": the paper's models
  std::string attention = "linear"; // "linear", "softmax" (KV cache) or "softmax-recompute"
  int steps = 0;                    // positions to time, then extrapolate; 0: every position
  // Completion instead of generation: the paper's Figure 3 (`images` images, the top half known,
  // `samples` completions each), with the known half prefilled and step by step, and the time to
  // the first sampled pixel of one image.
  bool complete = false;
  int images = 10, samples = kDefaultSamples;
  RunOptions run;
  Progress progress; // (positions timed x batch, of all to time); may throw to stop
};

// What one kernel or GEMM moved in device memory, per image and step, as the emulated device
// counts it (docs/CUDA.md, "What a step moves"): the distinct bytes a kernel's threads loaded and
// stored in a launch, a GEMM's operands by shape and type. A GPU and the CPU have none.
struct KernelBytes {
  std::string name; // a kernel with its template arguments, or "gemm IN->OUT TYPE[, epilogue]"
  bool gemm = false;
  double launches_per_step = 0;
  double read = 0, written = 0;  // bytes per image-step
  double state = 0, weights = 0; // of those (read and written), in the state S and z, the weights
};

struct BenchResult {
  // what ran
  std::string model, attention, attention_form, cpu, gpu;
  Device device = Device::Cpu;
  // the state in this machine's memory (its row's host_state): the per-step times and the GEMM's
  // peak are reported; else in a device's own: the state's traffic against its bandwidth (`gpu`)
  bool host = true;
  Precision precision = Precision::Fp32;
  StateFormat state = StateFormat::Fp32;
  int64_t batch = 0;
  int threads = 0;
  std::string
      threads_from; // RunOptions::threads_from, or "--batch" where fewer images than threads
  double load_average = -1; // the 1-minute load average at the start (other work skews figures)
  // time
  int positions = 0, steps_measured = 0;
  bool extrapolated = false;
  std::string extrapolation;                      // how, when extrapolated
  std::vector<std::pair<int, double>> step_times; // (position, seconds); cpu only
  double seconds_setup = 0, seconds_measured = 0, seconds_full_length = 0;
  double images_per_second = 0;
  // work and memory
  double gflop_per_image = 0, gflops_achieved = 0;
  double peak_gflops = 0; // cpu: this engine's GEMM on a compute-bound shape
  int peak_rows = 0, peak_in = 0, peak_out = 0;
  int64_t memory_bytes_per_image = 0, state_bytes_per_image = 0;
  std::string memory_kind;
  // complete: completions/s and the time to the first sampled pixel of one image, prefilled and
  // step by step (the same bits)
  int images = 0, samples = 0, known_bytes = 0;
  double completions_per_second = 0, completions_per_second_stepwise = 0;
  double first_pixel_seconds = 0, first_pixel_seconds_stepwise = 0;
  // !host: the state read and written once per step, against the device's bandwidth
  double state_traffic = 0, peak_bandwidth = 0, state_bound_images_per_second = 0;
  int64_t device_bytes = 0;
  int kernels_per_step = 0; // the kernels of a step's CUDA graph: a profiler's window
  std::string device_name;  // the device in words (the engine's)
  std::vector<KernelBytes> emulated_bytes; // the emulated device's counts; empty elsewhere
};

// What can be checked without a model (run_bench calls it first; the command, before it finds the
// model): the run options, --steps, the attention form and whether the device runs it.
void check_bench_options(const BenchOptions &options);
BenchResult run_bench(const BenchOptions &options);
// The version of docs/JSON.md the commands' JSON follows (its header, which the command writes).
constexpr int kJsonSchemaVersion = 3;
std::string bench_text(const BenchResult &r); // the lines `tarnn bench` prints
// The result's fields of docs/JSON.md, every time in seconds (a JSON object's text; the command
// adds the header every JSON of it begins with: schema, version and commit, time).
std::string bench_json(const BenchResult &r);

// FLOPs (2 x multiply-adds) of one image at one position, linear attention in RNN mode.
double flops_per_step(const Config &c);

} // namespace tarnn
