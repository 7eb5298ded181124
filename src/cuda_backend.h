// The CUDA backend: the state S and z of a whole batch in one device allocation, every step a
// captured CUDA graph of cuBLAS GEMMs and the kernels in kernels/*.cu, the next bytes sampled on
// the device with the CPU's Philox contract. A plain C++ header: callers need no CUDA headers, and
// a build without CUDA links cuda_stub.cpp, whose functions say so.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine.h"
#include "model.h"

namespace tarnn {

bool cuda_built(); // whether this build has the CUDA backend

// The device to run on ("NVIDIA H100 80GB HBM3 (sm_90, 79.1 GB)"); throws Error "no CUDA device:
// ..." where there is none, or "... not available in this build ..." without CUDA.
std::string cuda_require_device();

struct CudaOptions {
  int64_t batch = 0; // images whose state is on the GPU at once; 0: as many as fit (cuda_plan.h)
  bool tf32 = false; // TF32 tensor cores in the GEMMs: faster, further from the CPU's numbers
  bool graph = true; // replay each step as a CUDA graph (false: plain launches, for tests)
  // Called about every 32 steps with positions done over all images.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct CudaRunInfo {
  std::string device;
  int batch = 0;             // the batch it used
  int64_t device_bytes = 0;  // the batch's one allocation (state, activations, bytes)
  int64_t state_bytes = 0;   // of which S and z
  double seconds_setup = 0;  // context, weights, allocation
  double seconds_steps = 0;  // the rollout itself
  double peak_bandwidth = 0; // bytes/s from the memory clock and bus width, 0 if unknown
};

// The rollout of engine.h on the GPU: same Rollout semantics as run_cpu.
CudaRunInfo run_cuda(const Model &m, const Rollout &job, const CudaOptions &opt);

// The batch run_cuda would take for `count` images when opt.batch is 0, on this device.
int cuda_auto_batch(const Model &m, int64_t count);

// One step at a time, as CpuDecoder: for tests and tools that want the mixture parameters.
class CudaDecoder {
public:
  CudaDecoder(const Model &m, int rows, const CudaOptions &opt = {});
  ~CudaDecoder();
  CudaDecoder(const CudaDecoder &) = delete;
  CudaDecoder &operator=(const CudaDecoder &) = delete;

  // Feeds p_t of each row at position t; writes o [rows, 3K] for p_{t+1}.
  void step(int t, const uint8_t *bytes, float *o);
  int rows() const;
  int64_t state_bytes() const; // S and z of every row, layer and head, in the one allocation

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Each kernel against its CPU twin on random inputs (kernels/*.cu).
struct KernelCheck {
  std::string kernel;
  double max_error = 0; // the largest difference found
  double tolerance = 0;
  int64_t compared = 0; // values compared
  std::string detail;
  bool ok() const { return max_error <= tolerance && compared > 0; }
};

KernelCheck check_embedding_kernel();
KernelCheck check_linear_attention_kernel(int d_head);
KernelCheck check_bias_act_kernel();
KernelCheck check_residual_layernorm_kernel();
KernelCheck check_sample_bytes_kernel();
KernelCheck check_advance_position_kernel();

} // namespace tarnn
