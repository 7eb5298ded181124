// CUDA-only helpers (included by .cu files): every runtime call checked and turned into a
// tarnn::Error naming the call, and a device array that frees itself.
#pragma once

#include <algorithm>
#include <cuda_runtime_api.h>
#include <string>
#include <utility>
#include <vector>

#include "tarnn/error.h"

// How a kernel is launched and how it declares its dynamic shared memory: CUDA's own syntax under
// nvcc; the emulated device (src/cuda/emulator, -DTARNN_CUDA_EMULATOR=ON) defines both its way,
// so that the kernels' files compile for either unchanged. A templated kernel goes in parentheses:
// TARNN_LAUNCH((kernel<A, B>), grid, block, shared_bytes, stream)(arguments...).
#ifndef TARNN_EMULATED_DEVICE
#define TARNN_LAUNCH(kernel, grid, block, shared_bytes, stream)                                    \
  kernel<<<grid, block, shared_bytes, stream>>>
#define TARNN_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

namespace tarnn {

inline void cuda_check(cudaError_t e, const char *call) {
  if (e != cudaSuccess) {
    cudaGetLastError(); // clear a non-sticky error so the next call does not report it again
    throw Error(std::string(call) + ": " + cudaGetErrorString(e), Error::Kind::Runtime);
  }
}

// After a kernel launch: a bad configuration shows up here, not at the next synchronisation.
inline void launch_check(const char *kernel) { cuda_check(cudaGetLastError(), kernel); }

// The grid of a kernel whose blocks walk `rows` rows and whose threads walk a row's n columns
// (bias_act, embedding, int8_rows's finish): a block a row, up to 65,536, and threads a whole
// number of warps, up to 256.
struct RowsGrid {
  int blocks, threads;
};
inline RowsGrid rows_grid(int rows, int n) {
  return {std::min(rows, 65536), n >= 256 ? 256 : (n + 31) / 32 * 32};
}

// Such a kernel launched on s over rows_grid(rows, n), with args, and checked (`name`); no rows,
// no launch (an empty grid is a launch error). Where a launch compiles: nvcc's or the emulated
// device's kernel files (a host file that includes this header, as the kernels' tests, has no
// launch).
#if defined(__CUDACC__) || (defined(TARNN_EMULATED_DEVICE) && defined(TARNN_LAUNCH))
template <auto Kernel, class... A>
void launch_over_rows(const char *name, int rows, int n, cudaStream_t s, A &&...args) {
  if (rows <= 0)
    return;
  const RowsGrid g = rows_grid(rows, n);
  TARNN_LAUNCH(Kernel, g.blocks, g.threads, 0, s)(std::forward<A>(args)...);
  launch_check(name);
}
#endif

template <class T> class DeviceArray {
public:
  explicit DeviceArray(size_t n) : n_(n) {
    cuda_check(cudaMalloc(reinterpret_cast<void **>(&p_), std::max<size_t>(n, 1) * sizeof(T)),
               "cudaMalloc");
  }
  explicit DeviceArray(const std::vector<T> &v) : DeviceArray(v.size()) { upload(v); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  T *get() const { return p_; }
  void upload(const std::vector<T> &v) {
    cuda_check(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
               "cudaMemcpy");
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    cuda_check(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
  }

private:
  T *p_ = nullptr;
  size_t n_;
};

} // namespace tarnn
