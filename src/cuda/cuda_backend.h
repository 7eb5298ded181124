// The CUDA backend, inside libtarnn_cuda.so: the state S and z of a whole batch in one device
// allocation, every step a captured CUDA graph of cuBLAS GEMMs and the kernels in kernels/*.cu,
// the next bytes sampled on the device with the CPU's Philox contract. The library reaches it
// through plugin_api.h; the GPU tests link it directly and use what is declared here. A plain C++
// header: callers need no CUDA headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "../model/backend.h"

namespace tarnn {

// The device to run on ("NVIDIA H100 80GB HBM3 (sm_90, 79.1 GB)"); throws Error "no CUDA device:
// ..." where there is none.
std::string cuda_require_device();

// The backend Engine uses for --device cuda.
std::unique_ptr<Backend> make_cuda_backend_here(const Model &m, const RunOptions &o,
                                                const Knobs &k);

// One step at a time, for tests that want the mixture parameters.
class CudaDecoder {
public:
  // fp32 or tf32 GEMMs
  CudaDecoder(const Model &m, int rows, Precision precision = Precision::Fp32);
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

} // namespace tarnn
