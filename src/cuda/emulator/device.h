// The emulated device's state, shared by its parts (not an API: the CUDA headers in include/ and
// emulator.h are). runtime.cpp: the device, errors, memory calls, streams, events, graphs;
// launch.cpp: grids, blocks, fibers, barriers, warps' collective calls; wmma.cpp: tensor cores'
// calls (<mma.h>); memory.cpp: allocations and the checks and counts of every kernel load and
// store; blas.cpp: cuBLAS and cuBLASLt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emulator.h"

namespace tarnn_emu {

// One host thread at a time drives the device: every API call and every grid holds it.
std::recursive_mutex &device_mutex();

// ---- errors (runtime.cpp)
// ------------------------------------------------------------------------

// Sets the calling host thread's last error (cudaGetLastError) to `code`, with what the emulator
// knows of it (cudaGetErrorString adds it), and returns `code`. cudaSuccess changes nothing.
cudaError_t set_error(cudaError_t code, const std::string &detail = "");
// A kernel or GEMM failed as a GPU's would fault (an illegal address, a race, a broken barrier):
// from here on every call returns `code`, as a CUDA context after a fault does, and
// cudaGetErrorString says `detail` too. The first fault is kept; it is printed on stderr once.
void fault(cudaError_t code, const std::string &detail);
cudaError_t sticky_error();

// ---- memory (memory.cpp)
// -------------------------------------------------------------------------

// device memory of `bytes` (posix_memalign: 256-aligned, exactly `bytes` long, so that
// AddressSanitizer sees an overrun), filled with 0xff (a NaN in every float) as a GPU's memory
// is not zeroed; null if the host has no room
void *device_alloc(size_t bytes);
bool device_free(void *p); // false: not the start of an allocation
size_t device_allocated();
void device_free_all();
// Where [p, p + bytes) lies: -1 in no allocation, 0 inside one, 1 partly outside its allocation.
int device_range(const void *p, size_t bytes);
// the named range holding p ("other" where none): for a GEMM's counts
const std::string &label_at(const void *p);
void count_gemm(const std::string &name, const void *const reads[], const size_t read_bytes[],
                int n_reads, const void *d, size_t written_bytes);

// ---- streams (runtime.cpp)
// -----------------------------------------------------------------------

// Runs `work` on `stream` now (the emulated device runs everything in issue order), or records it
// as a node of the graph the stream is capturing. Returns the error a GPU would: the sticky one,
// an invalid handle, a capture already invalidated.
cudaError_t submit(cudaStream_t stream, cudaGraphNodeType type, const std::string &name,
                   std::function<void()> work);
// A call failed on a capturing stream: its capture ends in cudaErrorStreamCaptureInvalidated.
void invalidate_capture(cudaStream_t stream);

// ---- kernels (launch.cpp)
// ------------------------------------------------------------------------

struct Grid {
  const void *kernel = nullptr;
  std::string name;
  dim3 grid, block;
  size_t shared_bytes = 0;
  std::shared_ptr<const void> params; // the kernel's arguments, read by every thread
  size_t params_bytes = 0;
  void (*body)(const void *params) = nullptr; // one thread's call of the kernel
};
// Runs every block of the grid, one after another, each block's threads as fibers.
void run_grid(const Grid &g);

// The running emulated thread (null outside kernels), for the memory checks.
struct Word;
struct Counts;
struct ThreadRun {
  uint16_t thread;                             // linear index in its block
  uint3 thread_idx;                            //
  const char *stack_lo;                        // its fiber's stack
  const char *stack_hi;                        //
  const char *params_lo;                       // its grid's arguments
  const char *params_hi;                       //
  char *shared;                                // its block's dynamic shared memory
  size_t shared_bytes;                         //
  Word *shared_shadow;                         //
  uint32_t launch, launch_seg, block_seg, seg; // memory.cpp: the race check's intervals
  const Grid *grid;                            //
  uint3 block_idx;                             //
  Counts *counts;                              // its kernel's bytes
  // Set while the emulator's own code runs for this thread (its checks, a barrier, a shuffle):
  // inline library code the linker took from an instrumented kernel file (std::string's, say)
  // then reports nothing.
  bool quiet;
};
// Quiet for the running thread while in scope (scopes nest: the outer one's stays).
struct Quiet {
  ThreadRun *t;
  bool was = false;
  explicit Quiet(ThreadRun *run) : t(run) {
    if (t) {
      was = t->quiet;
      t->quiet = true;
    }
  }
  ~Quiet() {
    if (t)
      t->quiet = was;
  }
};
// (initial-exec: read at every access; the plugin is small enough for static TLS)
extern thread_local ThreadRun *tl_thread __attribute__((tls_model("initial-exec")));

// A warp-collective call (__shfl_xor_sync, wmma's: wmma.cpp): the running lane arrives at `call`
// (its name in messages) with `value` and waits until every lane of `mask` has. Then `values`
// holds each lane's `value` (until the warp's next collective call but one), and the lane that
// arrived last returns with `last` set, before any other lane runs again: what it does for the
// warp then is done when they go on. A lane of the mask that has exited (or exits while the
// others wait), lanes of one warp in different calls or masks, a mask past the warp: the launch
// fails naming the kernel and the threads; threads that never come are a deadlock (run_block).
// Outside a kernel: the process aborts, saying so.
struct WarpArrival {
  const uint64_t *values;
  int lane;
  bool last;
};
WarpArrival warp_arrive(const char *call, unsigned mask, uint64_t value);

// The running thread broke a rule a GPU enforces (or compute-sanitizer reports): its block and
// grid stop, and the device faults with `code` (launch.cpp). Does not return.
[[noreturn]] void kernel_fault(cudaError_t code, const std::string &what);
// "thread (x, y, z) of block (x, y, z)"
std::string thread_name(uint16_t thread);

// ---- the race check and the counts (memory.cpp) ------------------------------------------------

// The shadow of one aligned 4-byte word: which thread wrote and read each of its bytes in the
// interval between barriers of its last write and last read (a segment: segments count up across
// the whole run, so one before the launch's first is from an earlier launch), and which bytes the
// current launch has counted already. Threads by byte, so that threads owning neighbouring bytes
// (a 16-bit state's columns, a row's byte) share a word without racing.
struct Word {
  uint32_t w_seg, r_seg, t_launch;
  uint16_t writer[4], reader[4]; // the thread's index + 1; 0: none; kMany: several readers
  uint8_t t_read, t_written;
};
constexpr uint16_t kMany = 0xffff;

// A fresh shadow for a block's shared memory (every word unwritten).
Word *shared_shadow(size_t bytes);
// The block's reads of shared words no thread of it had written: a write by another thread later
// in the same interval is a race (reported there), and a word still unwritten at the interval's
// end (the next barrier, the block's end) was read uninitialised: the message, or "" (forgotten
// either way).
std::string unwritten_shared_reads(const ThreadRun &t);
// Where blocks' shared memory lives outside AddressSanitizer builds (launch.cpp): an access in it
// but outside the running block's bytes is an overrun.
void set_shared_arena(const char *begin, size_t bytes);
// A new segment number (a barrier's, a block's, a launch's first), and the launch's number.
uint32_t next_segment();
uint32_t next_launch();
// A kernel's or GEMM's bytes so far, by label (0: "other"; label_memory's names after).
struct Counts {
  std::string name;
  bool gemm = false;
  uint64_t launches = 0;
  std::vector<Bytes> by_label;
};
// The counts of kernel or GEMM `name` (made at its first run).
Counts *counts_of(const std::string &name, bool gemm);

} // namespace tarnn_emu
