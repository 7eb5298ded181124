// Running a model: the options every command shares, the rollout job, and Engine, a model made
// ready on one backend (weights packed for the CPU, or copied to the GPU, once) that runs jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "error.h"
#include "model.h"
#include "numerics.h"

namespace tarnn {

// Called on the calling thread, a few times a second: positions done over all images, of total.
using Progress = std::function<void(int64_t done, int64_t total)>;

// What a run may choose, with every default resolved by resolve_run_options. The numerics are
// types (numerics.h): the command, the Python module and the server parse their strings into them.
struct RunOptions {
  Device device = Device::Cpu;
  int64_t batch = 0; // images whose state is in memory at once; 0: the device's default
                     // (256 on the CPU, as many as fit on the GPU)
  int threads = 0;   // CPU threads, each stepping its share of the images; 0: every core this
                     // process may use (its CPU affinity and cgroup quota)
  Precision precision = Precision::Fp32; // the GEMMs' arithmetic (numerics.h)
  StateFormat state = StateFormat::Fp32; // how S and z are stored between positions
  bool prefill = true; // known leading bytes in the parallel form (false: step by step; the
                       // same bits, slower: `--no-prefill`, for comparisons)
  // Set by resolve_run_options: where `threads` came from: "--threads" (given), or for 0 what
  // bounded every core: "affinity", "cgroup quota" ("hardware" where no affinity could be read).
  std::string threads_from;
};

constexpr int64_t kDefaultCpuBatch = 256;
// --batch's default on each device, in words ("256 on cpu, as many as fit on cuda")
std::string batch_help();
constexpr int64_t kMaxBatch = int64_t(1) << 22;
constexpr int kMaxThreads = 1024;

// What can be checked without a model: batch and thread counts in range, a precision and a state
// format the device runs. Throws Error; resolve_run_options calls it first, and the command calls
// it before loading a model (a bad flag is found at once).
void check_run_options(const RunOptions &o);

// The sampler's temperature (docs/SPEC.md section 2) from a number as given: the float nearest to
// `t`, which must be finite and above 0, and stay so as a float (1e-50 becomes 0 and 1e39
// infinity: both refused). Throws Error "temperature must be a finite number above 0 ...".
float sampling_temperature(double t);

// The options with their defaults filled in (batch 0 stays 0 on cuda: it depends on free GPU
// memory, known when the job runs). Throws Error for an unknown device, a batch or thread count
// out of range, or a CPU batch whose state would not fit in this machine's memory; for a softmax
// model (config.json "attention"), also for a device without a KV cache (cuda) or a --state other
// than fp32 (its cache is fp32).
RunOptions resolve_run_options(const Config &c, RunOptions o);

// The one memory check: throws Error "WHAT needs N MB, more than 3/4 of this machine's M MB" when
// `bytes` is over 3/4 of the physical memory. Every job calls it, with everything it will hold,
// before any work.
void check_memory(double bytes, const Message &what);
int64_t physical_memory_bytes();

// Whether this build has the backend of `d`, and the device it would run on, in words ("NVIDIA
// H100 ..."); device_here throws Error where there is none ("no CUDA device: ...") or the build
// has no such backend ("... not available in this build ...").
bool device_built(Device d);
std::string device_here(Device d);

// A rollout: a set of images stepped through every position, a byte fed where it is known
// (teacher forcing) and sampled where it is not. Sampling (nothing known), scoring (everything
// known) and completion (a mask) are the same job.
struct Rollout {
  int64_t count = 0;              // images
  uint64_t seed = 0;              // docs/SPEC.md section 3
  int64_t first_index = 0;        // the RNG's image index of image 0
  const uint8_t *given = nullptr; // [count, T] bytes fed where known; null: nothing known
  const uint8_t *known = nullptr; // [count, T] nonzero where `given` holds; null: all of `given`
  uint8_t *out = nullptr;         // [count, T] the images (may be `given` itself)
  double *log_prob = nullptr;     // [count] sum of log p(p_{t+1}) over the known p_{t+1}
  int positions = -1;             // stop after this many positions (benchmarks); -1: all L
  int64_t batch = 0;              // images in memory at once for this job; 0: the Engine's batch
  // Each image's own random numbers, for a job that merges images of different runs (a server's
  // requests): image r draws as image images[r] of a run with seed seeds[r] (both or neither;
  // [count] each). Null: image r is image first_index + r of the run with `seed`.
  const uint64_t *seeds = nullptr;
  const uint64_t *images = nullptr;
  // The sampler's temperature (docs/SPEC.md section 2): a finite float above 0; 1 is the model's
  // own distribution. It changes the drawn bytes only: known bytes' log-probabilities are the
  // model's. `temperatures`, with seeds and images, gives each image its own ([count]).
  float temperature = 1.0f;
  const float *temperatures = nullptr;
  // Streaming: when set, called after every few positions, once columns [0, t] of images
  // [image, image + n) of `out` hold their final bytes; on a worker thread, maybe several at
  // once. It may throw to stop the run (as a Progress may).
  std::function<void(int64_t image, int64_t n, int t)> grown;
  // Timing (the benchmark's time per position): when set, every step is run alone and waited
  // for, and then called with its position and the seconds it took, by each thread that ran it
  // (a CPU thread's share of the images), maybe several at once. A prefill (the known leading
  // bytes' positions 0 .. P-1 at once) is one call, at P - 1, with the time of all of them.
  std::function<void(int t, double seconds)> stepped;
};

// What a run used and how long it took.
struct RunInfo {
  std::string device;        // "cpu: <model name>, N threads" or the GPU's name
  int64_t batch = 0;         // images in memory at once
  int64_t state_bytes = 0;   // of which the state S and z
  int64_t memory_bytes = 0;  // the batch's buffers (state, activations, bytes)
  double seconds_setup = 0;  // allocation (and, the first time, the device's context)
  double seconds_steps = 0;  // the rollout itself
  double peak_bandwidth = 0; // cuda: bytes/s of device memory, 0 if unknown
  int kernels_per_step = 0;  // cuda: the kernels a step's graph launches (a profiler's window)
  float largest_state = 0;   // cpu, --state fp16: the largest |S| an image's state ended with
  int threads = 0;           // the CPU threads that ran it (0: a device ran it)
};

class Backend; // src/model/backend.h: what each device implements
struct Knobs;  // src/model/backend.h: switches for tests and comparisons, not part of the API

class Engine {
public:
  // Checks the options (resolve_run_options) and makes the weights ready on the device; throws
  // Error before any work when the device or the options cannot run this model.
  Engine(Model model, const RunOptions &options);
  ~Engine();
  Engine(Engine &&) noexcept;
  Engine &operator=(Engine &&) noexcept;

  const Model &model() const { return *model_; }
  const Config &config() const { return model_->config; }
  const RunOptions &options() const { return options_; }
  std::string device() const; // a line naming the device, for messages

  // The images a run of `count` images holds in memory at once (on cuda: what fits, if the
  // batch was left to the device).
  int64_t batch_for(int64_t count) const;

  // The bytes of state a run of `count` images holds in this machine's memory (0 where the
  // device keeps it in its own): what check_memory must count. For a softmax model the state is
  // each image's KV cache at its full length (numerics.h: memory_bytes_per_image).
  double host_state_bytes(int64_t count) const;

  // Runs the job; exceptions from workers or the device surface here as Error. Several threads
  // may run jobs on one Engine at once: each gets the images it would get alone.
  RunInfo run(const Rollout &job, const Progress &progress = nullptr);

  // The device's backend, for the library's own tools (the benchmark's GEMM peak and counts).
  Backend &backend() { return *backend_; }

  // What the runs so far saw that their results do not show, each said once, in the order seen:
  // an fp16 state beyond the magnitudes it was measured for (docs/STATE.md). The command prints
  // them on stderr and in its JSON, Python as warnings, each in its own words (error.h).
  std::vector<Message> warnings() const;

private:
  friend Engine engine_with(Model model, const RunOptions &options, const Knobs &knobs);
  Engine(Model model, const RunOptions &options, const Knobs &knobs);
  void note_state_range(const RunInfo &info); // warnings(): an fp16 state beyond its measures

  std::unique_ptr<const Model> model_; // a fixed address: the backend points into its weights
  RunOptions options_;
  std::unique_ptr<Backend> backend_;
  struct Notes; // warnings(), under their own lock (jobs may run at once)
  std::unique_ptr<Notes> notes_;
};

} // namespace tarnn
