// What a device implements behind Engine (include/tarnn/run.h): a model made ready on it (weights
// in the device's layout, once) that runs rollouts (the jobs' and the benchmark's); and its row,
// the one description of the device. One folder per device (src/cpu, src/cuda), each declaring
// its row; src/engine lists the rows (engine/registry.cpp) and reads nothing else about a device.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tarnn/bench.h"
#include "tarnn/run.h"

namespace tarnn {

// Switches for tests and comparisons: never set by a user, so not in RunOptions. Each is a name
// and a value that one backend reads, as its row lists (BackendRow::knobs: cpu's
// "reference_gemm", cuda's "graph", "gemm", "bf16_inputs", "layernorm" and "feed_forward", both's
// "bf16_outputs"); the engine refuses a name no row lists. Those from the environment (TARNN_GEMM,
// TARNN_BF16_INPUTS, TARNN_LAYERNORM, TARNN_BF16_OUTPUTS, TARNN_FEED_FORWARD, docs/ENVIRONMENT.md)
// are read by the engine as "gemm", "bf16_inputs", "layernorm", "bf16_outputs" and
// "feed_forward"; tests set the others through engine/testing.h.
struct Knobs {
  std::map<std::string, std::string> values;
  Knobs &set(const std::string &name, const std::string &value) {
    values[name] = value;
    return *this;
  }
  // the value of `name`, or `otherwise` where it is not set
  std::string get(const std::string &name, const std::string &otherwise = "") const {
    const auto it = values.find(name);
    return it == values.end() ? otherwise : it->second;
  }
};

// The attention the benchmark times with the model's weights: linear attention in RNN mode, or
// the paper's softmax baselines (a KV cache; the whole prefix recomputed every step).
enum class AttentionForm { Linear, Softmax, Recompute };

// This device's GEMM on a compute-bound shape, as the engine reaches it (the benchmark's peak).
struct GemmPeak {
  double gflops = 0; // 0: not measured
  int rows = 0, in = 0, out = 0;
};

class Backend;

// A precision a device's GEMMs do not run, and why (said when a run asks for it there).
struct Refusal {
  Precision precision;
  const char *why;
};

// A device as the library knows it: every word and check about a device comes from its row.
struct BackendRow {
  const char *name;                  // --device's value, JSON's "device" ("cpu")
  const char *what;                  // for help texts ("this machine's cores")
  std::vector<Precision> precisions; // what its GEMMs run
  std::vector<Refusal> refused;      // the precisions it does not run that deserve a reason
  std::vector<StateFormat> states;   // how it may store S and z
  // the attentions it runs: linear; softmax (a KV cache: a softmax model's jobs and the
  // benchmark's baseline); recompute (the benchmark's other baseline)
  std::vector<AttentionForm> forms;
  int64_t default_batch;  // --batch 0 means this; 0: as many as fit, per job
  const char *batch_help; // that default in words ("256", "as many as fit")
  bool host_state;        // S and z in this machine's memory (check_memory counts it); else in
                          // the device's: the benchmark reports the state's traffic
  std::vector<const char *> knobs; // the Knobs it reads
  // made by a function in the library, or (null) by the plugin of the same name, loaded the
  // first time (model/plugin_api.h). `options` are resolved; throws Error when the device cannot
  // run the model.
  std::unique_ptr<Backend> (*make)(const Model &, const RunOptions &options, const Knobs &);
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string device() const = 0;
  // Safe to call from several threads at once (a backend serialises what it must): the same
  // results as one after the other.
  virtual RunInfo run(const Rollout &job, const Progress &progress) = 0;
  virtual int64_t batch_for(int64_t count) const = 0; // images a run of `count` holds at once
  // The benchmark's two figures beside its runs' times, where the device has them: its GEMM's
  // peak, and what its kernels moved in device memory since the last call, per image-step
  // (`image_steps` and `steps` since then: the emulated device's counts, bench.h).
  // (the peak as a run of `batch` images reaches it: on the threads such a run has)
  virtual GemmPeak gemm_peak(int64_t batch) {
    (void)batch;
    return {};
  }
  virtual std::vector<KernelBytes> bytes_moved(double image_steps, double steps) {
    (void)image_steps, (void)steps;
    return {};
  }
};

} // namespace tarnn
