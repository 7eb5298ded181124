#include "registry.h"

#include "../cpu/cpu_backend.h"
#include "../cuda/plan.h"
#include "cuda_loader.h"
#include "tarnn/error.h"

namespace tarnn {

namespace {

const BackendEntry kBackends[] = {
    {Device::Cpu,
     {Precision::Fp32, Precision::Bf16},
     {StateFormat::Fp32},
     kDefaultCpuBatch,
     true,
     &make_cpu_backend},
    {Device::Cuda,
     {Precision::Fp32, Precision::Bf16, Precision::Tf32},
     {StateFormat::Fp32},
     0,
     false,
     &make_cuda_backend},
};

} // namespace

const BackendEntry &backend_entry(Device d) {
  for (const BackendEntry &e : kBackends)
    if (e.device == d)
      return e;
  throw Error(std::string("--device ") + name(d) + " has no backend");
}

} // namespace tarnn
