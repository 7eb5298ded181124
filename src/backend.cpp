#include "backend.h"

#include "cuda_backend.h"
#include "error.h"

namespace tarnn {

void check_device(const std::string &device) {
  if (device == "cuda") { // fails here, before any work, where there is no GPU or no CUDA build
    cuda_require_device();
    return;
  }
  if (device != "cpu")
    throw Error("--device " + device + " is not available in this build (cpu" +
                (cuda_built() ? ", cuda)" : ")"));
}

void run_rollout(const std::string &device, bool tf32, const Model &m, const CpuWeights &w,
                 const Rollout &job, const RunOptions &opt) {
  if (m.config.attention != "linear") // the decoders step S and z; a softmax model needs a cache
    throw Error(m.source + ": config.json says attention \"" + m.config.attention +
                "\": sample, score and complete run linear attention in RNN mode only (bench "
                "--attention softmax runs such models)");
  if (device != "cuda")
    return run_cpu(w, job, opt);
  CudaOptions co;
  co.batch = opt.batch;
  co.tf32 = tf32;
  co.progress = opt.progress;
  run_cuda(m, job, co);
}

} // namespace tarnn
