// What a device implements behind Engine (include/tarnn/run.h): a model made ready on it (weights
// in the device's layout, once) that runs rollouts, and the benchmark's timed steps. One folder
// per device (src/cpu, src/cuda); src/engine finds them by name (engine/registry.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tarnn/bench.h"
#include "tarnn/run.h"

namespace tarnn {

// cuda's GEMM path: one cuBLASLt algorithm per shape with bias and ReLU fused (the engine's), or
// for comparisons (docs/CUDA.md) cuBLAS's own choice per size, or the bias and ReLU in their own
// kernel. bf16 always runs the first.
enum class CudaGemm { Fixed, Cublas, Unfused };

// Switches for tests and comparisons: never set by a user, so not in RunOptions. The engine
// reads the one that comes from the environment (TARNN_GEMM, docs/ENVIRONMENT.md); tests set the
// others through engine/testing.h.
struct Knobs {
  bool reference_gemm = false; // cpu: the plain reference GEMM instead of the packed one
  bool graph = true;           // cuda: replay each step as a CUDA graph (false: plain launches)
  CudaGemm cuda_gemm = CudaGemm::Fixed;
};

// The attention the benchmark times with the model's weights: linear attention in RNN mode, or
// the paper's softmax baselines (a KV cache; the whole prefix recomputed every step).
enum class AttentionForm { Linear, Softmax, Recompute };

// The benchmark's job (src/bench): `batch` images generated from position 0, every image of the
// batch stepping together, each position in `positions` (ascending) timed from the first image's
// start to the last image's end. Positions not listed are skipped: the time of a step does not
// depend on the values in the state, cache or prefix.
struct TimedSteps {
  AttentionForm form = AttentionForm::Linear;
  int64_t batch = 0;
  std::vector<int> positions;
  Progress progress; // (positions timed x batch, of all to time); may throw to stop
};

struct StepTimes {
  std::vector<std::pair<int, double>> at; // (position, seconds) where each is timed alone
  double seconds = 0;                     // all the positions
  int threads = 0;
  int64_t memory_bytes_per_image = 0; // what the form holds per image at full length
  RunInfo info;
  // this device's GEMM on a compute-bound shape, as the engine reaches it (0: not measured)
  double peak_gflops = 0;
  int peak_rows = 0, peak_in = 0, peak_out = 0;
  std::vector<KernelBytes> emulated_bytes; // the emulated device's counts (bench.h)
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string device() const = 0;
  // Safe to call from several threads at once (a backend serialises what it must): the same
  // results as one after the other.
  virtual RunInfo run(const Rollout &job, const Progress &progress) = 0;
  virtual int64_t batch_for(int64_t count) const = 0; // images a run of `count` holds at once
  virtual StepTimes time_steps(const TimedSteps &job) = 0;
};

} // namespace tarnn
