// Engine (include/tarnn/run.h): every run option resolved and checked in one place, then the
// backend of the device asked for.
#include <thread>

#include "backend.h"
#include "tarnn/error.h"

namespace tarnn {

RunOptions resolve_run_options(const Config &c, RunOptions o) {
  if (o.device != "cpu" && o.device != "cuda")
    throw Error("--device " + o.device + " is not available in this build (cpu" +
                (cuda_built() ? ", cuda)" : ")"));
  if (o.batch < 0 || o.batch > kMaxBatch)
    throw Error("--batch must be in [0, " + std::to_string(kMaxBatch) +
                "] (0: the device's default) (got " + std::to_string(o.batch) + ")");
  if (o.threads < 0 || o.threads > kMaxThreads)
    throw Error("--threads must be in [0, " + std::to_string(kMaxThreads) +
                "] (0: every core) (got " + std::to_string(o.threads) + ")");
  if (o.threads == 0)
    o.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  if (o.tf32 && o.precision == "fp32") // the older --tf32 flag
    o.precision = "tf32";
  if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "tf32")
    throw Error("--precision " + o.precision + ": not a precision (fp32, bf16, or tf32 on cuda)");
  if (o.tf32 && o.precision != "tf32")
    throw Error("--tf32 and --precision " + o.precision + " disagree: give one");
  if (o.precision == "tf32" && o.device != "cuda")
    throw Error("--precision tf32 runs on cuda only (TF32 is a GPU tensor-core format); the CPU "
                "has fp32 and bf16");
  o.tf32 = o.precision == "tf32";
  if (o.device == "cpu") {
    if (o.batch == 0)
      o.batch = kDefaultCpuBatch;
    check_memory(double(o.batch) * double(c.state_bytes_per_image()),
                 "--batch " + std::to_string(o.batch) + " (the state S and z of every image)");
  }
  return o;
}

Engine::Engine(Model model, const RunOptions &options)
    : model_(std::make_unique<const Model>(std::move(model))),
      options_(resolve_run_options(model_->config, options)) {
  if (model_->config.attention != "linear") // the backends step S and z; softmax needs a cache
    throw Error(model_->source + ": config.json says attention \"" + model_->config.attention +
                "\": sample, score and complete run linear attention in RNN mode only (bench " +
                "--attention softmax runs such models)");
  backend_ = options_.device == "cuda" ? make_cuda_backend(*model_, options_)
                                       : make_cpu_backend(*model_, options_);
}

Engine::~Engine() = default;
Engine::Engine(Engine &&) noexcept = default;
Engine &Engine::operator=(Engine &&) noexcept = default;

std::string Engine::device() const { return backend_->device(); }

int64_t Engine::batch_for(int64_t count) const { return backend_->batch_for(count); }

RunInfo Engine::run(const Rollout &job, const Progress &progress) {
  if (job.count < 0 || (job.count > 0 && !job.out))
    throw Error("a rollout needs a count >= 0 and an output buffer");
  if (!job.seeds != !job.images)
    throw Error("a rollout's per-image RNG keys need both seeds and images");
  if (job.batch != 0) { // this job's own batch: checked as the Engine's was
    RunOptions o = options_;
    o.batch = job.batch;
    resolve_run_options(model_->config, o);
  }
  return backend_->run(job, progress);
}

} // namespace tarnn
