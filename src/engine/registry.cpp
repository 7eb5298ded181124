#include "registry.h"

#include "../cpu/cpu_backend.h"
#include "../cuda/plan.h"
#include "cuda_loader.h"
#include "tarnn/error.h"

namespace tarnn {

namespace {

const BackendEntry kBackends[] = {
    {Device::Cpu,
     kCpuPrecisions,
     kCpuStates,
     {AttentionForm::Linear, AttentionForm::Softmax, AttentionForm::Recompute},
     kDefaultCpuBatch,
     true,
     &make_cpu_backend},
    {Device::Cuda,
     kCudaPrecisions,
     kCudaStates,
     {AttentionForm::Linear},
     0,
     false,
     &make_cuda_backend},
};

} // namespace

const BackendEntry &backend_entry(Device d) {
  for (const BackendEntry &e : kBackends)
    if (e.device == d)
      return e;
  throw Error({param("device", name(d)), " has no backend"});
}

} // namespace tarnn
