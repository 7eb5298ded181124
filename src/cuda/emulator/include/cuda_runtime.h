// The emulated device's CUDA C++ (src/cuda/emulator): the runtime API and what nvcc gives device
// code, for the host compiler. The emulated build compiles every .cu file as C++ with this header
// included first (as nvcc includes the toolkit's) and __CUDACC__ and __CUDA_ARCH__ = 900 defined,
// so the kernels' device branches are the ones that run. Each block's threads run as fibers in
// turn between barriers (launch.cpp); their loads and stores reach the memory checks through the
// compiler's instrumentation (memory.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>

#include "cuda_runtime_api.h"

// ---- the language's keywords
// ---------------------------------------------------------------------

// A kernel's launch bounds (max threads per block) travel with its code: every kernel has a pad
// of NOPs before its entry, whose length the compiler records in __patchable_function_entries
// (GCC and clang both); 1 byte means none were given, else 1 + the bound. A later attribute
// replaces an earlier one, so __launch_bounds__ overrides __global__'s. launch.cpp reads it.
#define __global__ __attribute__((patchable_function_entry(1, 1)))
#define __launch_bounds__(...) TARNN_EMU_LAUNCH_BOUNDS(__VA_ARGS__, 0)
#define TARNN_EMU_LAUNCH_BOUNDS(max_threads, ...)                                                  \
  __attribute__((patchable_function_entry(max_threads + 1, max_threads + 1)))
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
// Static shared arrays are static storage, one copy the blocks take in turn (they run one at a
// time): allowed, but neither bounded nor race-checked. The kernels here use dynamic shared
// memory only (TARNN_DYNAMIC_SHARED), which is both.
#define __shared__ static

constexpr int warpSize = 32;

namespace tarnn_emu {

// The running thread's coordinates, and its block's dynamic shared memory (launch.cpp).
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
void *dynamic_shared();
void syncthreads();
// __shfl_xor_sync's exchange: every lane of `mask` arrives with its value; each leaves with lane
// (its own ^ lane_mask)'s (launch.cpp).
uint64_t shuffle_xor(unsigned mask, uint64_t value, int lane_mask, int width);

// Runs the grid on `stream` (each thread of each block calls body(params)), or captures it into
// the stream's graph. `kernel` is the function (its launch bounds), `pretty` its name
// (kernel_name's __PRETTY_FUNCTION__), `params` the arguments as the kernel's parameters.
void launch(const void *kernel, const char *pretty, dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, std::shared_ptr<const void> params, size_t params_bytes,
            void (*body)(const void *params));

template <auto Kernel> const char *kernel_name() { return __PRETTY_FUNCTION__; }

template <class F> struct Parameters;
template <class... P> struct Parameters<void (*)(P...)> {
  using type = std::tuple<std::decay_t<P>...>;
};

template <auto Kernel, class Tuple> void call_kernel(const void *params) {
  std::apply(Kernel, *static_cast<const Tuple *>(params));
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...): the arguments converted to the kernel's
// parameters once, as CUDA copies them at the launch; each thread's call copies them again.
template <auto Kernel> struct Launch {
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
  template <class... A> void operator()(A &&...args) const {
    using Tuple = typename Parameters<decltype(Kernel)>::type;
    auto params = std::make_shared<const Tuple>(std::forward<A>(args)...);
    launch(reinterpret_cast<const void *>(Kernel), kernel_name<Kernel>(), grid, block, shared_bytes,
           stream, params, sizeof(Tuple), &call_kernel<Kernel, Tuple>);
  }
};

// The launch bounds of this module's kernels (__global__ above), for launch.cpp to read.
void add_kernel_pads(void *const *begin, void *const *end);
extern "C" void *__start___patchable_function_entries[] __attribute__((weak, visibility("hidden")));
extern "C" void *__stop___patchable_function_entries[] __attribute__((weak, visibility("hidden")));
namespace {
[[maybe_unused]] const bool kernel_pads_added =
    (add_kernel_pads(__start___patchable_function_entries, __stop___patchable_function_entries),
     true);
}

template <class T> T bits_as(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
template <class T> uint64_t as_bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}

} // namespace tarnn_emu

#define TARNN_LAUNCH(kernel, grid, block, shared_bytes, stream)                                    \
  ::tarnn_emu::Launch<kernel> { dim3(grid), dim3(block), size_t(shared_bytes), stream }
#define TARNN_DYNAMIC_SHARED(type, name)                                                           \
  type *const name = static_cast<type *>(::tarnn_emu::dynamic_shared())

#define threadIdx (::tarnn_emu::thread_idx())
#define blockIdx (::tarnn_emu::block_idx())
#define blockDim (::tarnn_emu::block_dim())
#define gridDim (::tarnn_emu::grid_dim())
#define __syncthreads() ::tarnn_emu::syncthreads()

// ---- intrinsics, with their documented results
// -----------------------------------------------------

template <class T> T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a 1 to 8-byte value");
  return tarnn_emu::bits_as<T>(
      tarnn_emu::shuffle_xor(mask, tarnn_emu::as_bits(value), lane_mask, width));
}

inline float __uint_as_float(unsigned u) { return tarnn_emu::bits_as<float>(u); }
inline unsigned __float_as_uint(float f) { return unsigned(tarnn_emu::as_bits(f)); }
inline float __int_as_float(int i) { return tarnn_emu::bits_as<float>(uint32_t(i)); }
inline int __float_as_int(float f) { return int(uint32_t(tarnn_emu::as_bits(f))); }
// The fast intrinsics promise less than the library functions (__expf: 2 + 1.16 |x| ulp); the
// host's correctly rounded or 1-ulp functions are within that.
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }

template <class T> cudaError_t cudaMalloc(T **p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
template <class T> cudaError_t cudaFuncSetAttribute(T *kernel, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel), attr, value);
}
