// The CUDA backend's entry points in a build without CUDA: each says so in one line.
#include "cuda_backend.h"
#include "error.h"

namespace tarnn {

namespace {

[[noreturn]] void unavailable() {
  throw Error("--device cuda is not available in this build (built without CUDA: nvcc was not "
              "found or TARNN_CUDA was OFF)");
}

} // namespace

bool cuda_built() { return false; }
std::string cuda_require_device() { unavailable(); }
CudaRunInfo run_cuda(const Model &, const Rollout &, const CudaOptions &) { unavailable(); }
int cuda_auto_batch(const Model &, int64_t) { unavailable(); }

struct CudaDecoder::Impl {};
CudaDecoder::CudaDecoder(const Model &, int, const CudaOptions &) { unavailable(); }
CudaDecoder::~CudaDecoder() = default;
void CudaDecoder::step(int, const uint8_t *, float *) { unavailable(); }
int CudaDecoder::rows() const { return 0; }
int64_t CudaDecoder::state_bytes() const { return 0; }

KernelCheck check_embedding_kernel() { unavailable(); }
KernelCheck check_linear_attention_kernel(int) { unavailable(); }
KernelCheck check_bias_act_kernel() { unavailable(); }
KernelCheck check_residual_layernorm_kernel() { unavailable(); }
KernelCheck check_sample_bytes_kernel() { unavailable(); }
KernelCheck check_advance_position_kernel() { unavailable(); }

} // namespace tarnn
