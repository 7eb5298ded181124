// The benchmark on the GPU: one rollout of a batch through the Engine, with the state traffic (S
// and z of every layer and head read and written once per step) against the device's peak
// bandwidth, the bound docs/CUDA.md derives.
#include <vector>

#include "../cpu/cpu_features.h"
#include "forms.h"
#include "tarnn/error.h"

namespace tarnn {

BenchResult measure_cuda(const BenchOptions &o) {
  cuda_device(); // no GPU is a one-line error at once, before making a model
  Engine engine(bench_model(o), o.run);
  const Config &c = engine.config();
  const int L = c.positions();
  const int steps = o.steps > 0 && o.steps < L ? o.steps : L;
  const int64_t batch = engine.batch_for(o.run.batch > 0 ? o.run.batch : int64_t(1) << 30);
  std::vector<uint8_t> out(size_t(batch) * c.bytes_per_image());
  Rollout job;
  job.count = batch;
  job.out = out.data();
  job.positions = steps;
  BenchResult r;
  r.load_average = load_average();
  const RunInfo info = engine.run(job, o.progress);
  const double secs = info.seconds_steps;
  const double state = double(c.state_bytes_per_image());
  r.model = o.model.empty() ? "random:" + o.shape : o.model;
  r.attention = o.attention;
  r.attention_form = describe(Form::Linear);
  r.device = "cuda";
  r.cpu = cpu_model_name();
  r.gpu = info.device;
  r.batch = batch;
  r.tf32 = o.run.tf32;
  r.precision = o.run.tf32 ? "tf32" : o.run.precision;
  r.positions = L;
  r.steps_measured = steps;
  r.extrapolated = steps < L;
  if (r.extrapolated)
    r.extrapolation = "extrapolated from " + std::to_string(steps) + " of " + std::to_string(L) +
                      " positions: constant cost per position";
  r.seconds_setup = info.seconds_setup;
  r.seconds_measured = secs;
  r.seconds_full_length = secs / steps * L;
  r.images_per_second = double(batch) / r.seconds_full_length;
  r.gflop_per_image = flops_per_step(c) * L / 1e9;
  r.gflops_achieved = flops_per_step(c) * double(batch) * steps / secs / 1e9;
  r.memory_bytes_per_image = c.state_bytes_per_image();
  r.memory_kind = "state S and z, constant in the position";
  r.state_bytes_per_image = c.state_bytes_per_image();
  r.state_traffic = 2 * state * double(batch) * steps / secs; // read + written per step
  r.peak_bandwidth = info.peak_bandwidth;
  r.state_bound_images_per_second =
      info.peak_bandwidth > 0 ? info.peak_bandwidth / (2 * state * L) : 0;
  r.device_bytes = info.memory_bytes;
  return r;
}

} // namespace tarnn
