// What the emulated device tells the backend beyond CUDA's API: the bytes each kernel and GEMM
// moved in device memory. The backend includes it only where TARNN_EMULATED_DEVICE is defined
// (cuda_runtime_api.h); docs/CUDA.md compares the counts with the design's hand count.
//
// A kernel's bytes are the distinct bytes of device memory its threads loaded and stored, counted
// once per launch however often they were touched (a GPU's caches serve repeats within a kernel;
// nothing is assumed to stay cached from one kernel to the next). A GEMM's are its operands' by
// their shapes and types: A, B and the bias read, C read where beta is not 0, D written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tarnn_emu {

// Names [p, p + bytes) of device memory (e.g. "state", "weights") in the counts; bytes outside
// every named range count under "other". A new name for a range replaces the old; the names go
// when the allocation is freed.
void label_memory(const void *p, size_t bytes, const std::string &label);

struct Bytes {
  uint64_t read = 0, written = 0;
};

struct Traffic {
  std::string name; // a kernel with its template arguments, or "gemm IN->OUT TYPE[, epilogue]"
  bool gemm = false;
  uint64_t launches = 0;
  Bytes all;
  std::map<std::string, Bytes> labelled; // by label_memory's names, and "other"
};

// Every kernel and GEMM run since the last reset, in the order each first ran.
std::vector<Traffic> traffic();
void reset_traffic();

} // namespace tarnn_emu
