// How many images the CUDA backend holds at once: host arithmetic, compiled in every build so the
// CPU tests cover it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tarnn/numerics.h"

namespace tarnn {

// What the CUDA backend's kernels run (known without loading the plugin): its GEMMs' precisions
// (cuda_backend.cu: gemm_inputs) and state formats.
inline const std::vector<Precision> kCudaPrecisions = {Precision::Fp32, Precision::Bf16,
                                                       Precision::Tf32, Precision::Int8};
inline const std::vector<StateFormat> kCudaStates = {StateFormat::Fp32, StateFormat::Fp16};

// A chunk goes through the prefill (model/prefill.h) when its images have at most this many
// different known leading runs (a completion's K samples share one): the prefill walks one run's
// rows after another, 8 blocks of 32 threads a layer, while a step runs the whole batch at once,
// so a chunk of many different runs (scoring: every image its own) is faster stepped.
constexpr int kCudaPrefillRuns = 4;

// Device bytes one more image adds to a batch (state, activations, bytes), alignment aside.
int64_t cuda_bytes_per_image(const Config &c, StateFormat state);

// The most images an automatic batch holds: more gains nothing once the GPU is full, and it keeps
// every index of a launch far from 32-bit limits.
constexpr int64_t kMaxAutoBatch = 65536;

// Free memory to leave for cuBLAS, the CUDA graph and the driver.
int64_t cuda_memory_reserve(int64_t free_bytes);

// The batch for `count` images on a device with `free_bytes` free (weights already resident):
// `requested` > 0 is taken (capped at count) if it fits, else an Error saying how much it needs
// and what is free; 0 is as many as fit (capped at count and kMaxAutoBatch). An Error too when
// not even one image fits.
int plan_batch(const Config &c, int64_t requested, int64_t count, int64_t free_bytes,
               const std::string &device, StateFormat state);

} // namespace tarnn
