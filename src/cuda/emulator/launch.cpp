// Kernels on the emulated device: a launch checked as a GPU checks it, then its blocks one after
// another, each block's threads as fibers (fiber.h) in a fixed order. A thread runs until it
// waits: at __syncthreads until every thread of its block still running has arrived, at a warp's
// collective call (__shfl_xor_sync, wmma's: warp_arrive) until every lane of its mask has. So
// barriers, shuffles and tensor-core calls have CUDA's meaning, and a run is deterministic: the
// same interleaving every time, whatever the machine.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <map>
#include <regex>
#include <set>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "device.h"
#include "fiber.h"
#include "sanitizer.h"

namespace tarnn_emu {

thread_local ThreadRun *tl_thread __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

constexpr size_t kStackBytes = size_t(256) << 10; // per thread; only what is touched is mapped
constexpr int kMaxThreads = 1024, kWarp = 32;
constexpr size_t kDefaultSharedBytes = 48 << 10, kOptinSharedBytes = 232448; // an H100's

// ---- what a launch is checked against
// -------------------------------------------------------------

// The pads before every kernel of every module (cuda_runtime.h: __global__, __launch_bounds__),
// by where each pad starts.
std::set<uintptr_t> &kernel_pads() {
  static std::set<uintptr_t> pads;
  return pads;
}

// The kernel's __launch_bounds__ (its most threads a block), or kMaxThreads without.
int launch_bound(const void *kernel) {
  const auto &pads = kernel_pads();
  const uintptr_t at = reinterpret_cast<uintptr_t>(kernel);
  auto it = pads.lower_bound(at);
  if (it == pads.begin())
    return kMaxThreads;
  const uintptr_t pad = at - *std::prev(it); // 1 byte: none given; else 1 + the bound
  return pad >= 2 && pad <= kMaxThreads + 1 ? int(pad - 1) : kMaxThreads;
}

std::map<const void *, size_t> &max_dynamic_shared() {
  static std::map<const void *, size_t> m;
  return m;
}

// "linear_attention_kernel<32, Fp32>" from __PRETTY_FUNCTION__ of kernel_name<&kernel>().
std::string short_name(const char *pretty) {
  std::string s = pretty;
  const size_t at = s.find("Kernel = ");
  if (at != std::string::npos)
    s = s.substr(at + 9, s.rfind(']') - at - 9);
  if (!s.empty() && s[0] == '&')
    s.erase(0, 1);
  static const std::regex scope(R"((\w+|\{anonymous\}|\(anonymous namespace\))::)");
  return std::regex_replace(s, scope, "");
}

std::string dims(dim3 d) {
  return std::to_string(d.x) + " x " + std::to_string(d.y) + " x " + std::to_string(d.z);
}

// cudaSuccess, or CUDA's refusal of this launch configuration, with why.
cudaError_t check(const Grid &g, std::string &why) {
  const dim3 b = g.block, n = g.grid;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (!b.x || !b.y || !b.z || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > kMaxThreads) {
    why = "a block of " + dims(b) + " threads (at most 1024 in all, 1024 x 1024 x 64)";
    return cudaErrorInvalidConfiguration;
  }
  if (!n.x || !n.y || !n.z || n.x > 0x7fffffffu || n.y > 65535 || n.z > 65535) {
    why = "a grid of " + dims(n) + " blocks (each at least 1; at most 2^31 - 1 x 65535 x 65535)";
    return cudaErrorInvalidConfiguration;
  }
  const auto it = max_dynamic_shared().find(g.kernel);
  const size_t most = it == max_dynamic_shared().end() ? kDefaultSharedBytes : it->second;
  if (g.shared_bytes > most) {
    why = std::to_string(g.shared_bytes) + " bytes of dynamic shared memory: the kernel may " +
          "have " + std::to_string(most) +
          (it == max_dynamic_shared().end()
               ? " without cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)"
               : " (cudaFuncSetAttribute)");
    return cudaErrorInvalidValue;
  }
  const int bound = launch_bound(g.kernel);
  if (threads > uint64_t(bound)) {
    why = "a block of " + std::to_string(threads) + " threads, but its __launch_bounds__ allow " +
          std::to_string(bound);
    return cudaErrorLaunchOutOfResources;
  }
  return cudaSuccess;
}

// ---- one block
// ---------------------------------------------------------------------------------------

struct Worker {
  Fiber fiber;
  ThreadRun run;
  enum State { Runnable, AtBarrier, AtWarp, Done, Stopped } state = Done;
  const char *at_warp = nullptr; // AtWarp: the collective call it waits in
  unsigned collectives = 0;      // the thread's warp-collective calls so far
  bool fresh = true;             // the fiber has not run: it starts at worker_main
};

struct Warp { // two generations of one warp's collective call (a lane is never two ahead)
  uint64_t value[2][kWarp];
  uint32_t arrived[2] = {0, 0}, mask[2] = {0, 0};
  const char *call[2] = {nullptr, nullptr}; // which call each generation is
};

struct Block {
  const Grid *grid = nullptr;
  Fiber scheduler;
  int threads = 0, live = 0, at_barrier = 0;
  std::vector<Warp> warps;
  bool stopped = false;
  cudaError_t code = cudaSuccess;
  std::string what;
};

Block *g_block = nullptr;                       // the block running (the device's lock is held)
std::vector<std::unique_ptr<Worker>> g_workers; // reused by every block
thread_local Worker *tl_worker __attribute__((tls_model("initial-exec"))) = nullptr;

void worker_main(void *arg);

Worker &worker(int i) {
  while (int(g_workers.size()) <= i) {
    g_workers.push_back(std::make_unique<Worker>());
    fiber_start(g_workers.back()->fiber, kStackBytes, &worker_main, g_workers.back().get());
  }
  return *g_workers[size_t(i)];
}

// Back to the block's scheduler; returns when the scheduler runs this thread again.
void wait(Worker &w) { fiber_switch(w.fiber, g_block->scheduler); }

// The block stops with this fault (the first kept), and the running thread with it.
void stop_block(Block &b, cudaError_t code, const std::string &what) {
  if (!b.stopped) {
    b.stopped = true;
    b.code = code;
    b.what = what;
  }
}
// The running thread stops where it is: thrown to worker_main, so that its frames' objects are
// destroyed (the kernels have none that need it; the emulator's messages do). The kernels' code
// has no catch, and no object whose destructor would want an entry for the instrumentation's
// calls in its function's unwinding table.
struct Stopped {};
[[noreturn]] void stop_running_thread() { throw Stopped(); }

// Every thread still running has arrived at __syncthreads (the last one calls this): false if
// the interval before it read shared memory uninitialised, and the block stops.
bool release_barrier(Block &b) {
  const std::string unwritten = unwritten_shared_reads(*tl_thread);
  if (!unwritten.empty()) {
    stop_block(b, cudaErrorLaunchFailure, unwritten);
    return false;
  }
  const uint32_t seg = next_segment(); // the accesses after it are ordered after those before
  for (int i = 0; i < b.threads; ++i) {
    Worker &w = *g_workers[size_t(i)];
    if (w.state == Worker::AtBarrier)
      w.state = Worker::Runnable;
    w.run.seg = seg;
  }
  b.at_barrier = 0;
  return true;
}

// The collective call lanes of warp `warp` wait in for `lane` (its mask names it), or null.
const char *waited_for(const Block &b, int warp, int lane) {
  const Warp &wp = b.warps[size_t(warp)];
  for (int p = 0; p < 2; ++p)
    if (wp.arrived[p] && (wp.mask[p] >> lane & 1u) && !(wp.arrived[p] >> lane & 1u))
      return wp.call[p];
  return nullptr;
}

void thread_exits(Worker &w) {
  Block &b = *g_block;
  w.state = Worker::Done;
  --b.live;
  const int warp = w.run.thread / kWarp, lane = w.run.thread % kWarp;
  if (const char *call = waited_for(b, warp, lane))
    stop_block(b, cudaErrorLaunchFailure,
               thread_name(w.run.thread) + " exits while lanes of its warp wait for it in " + call);
  else if (b.at_barrier > 0 && b.at_barrier == b.live)
    release_barrier(b); // the threads still running have all arrived
}

void worker_main(void *arg) {
  fiber_entered();
  Worker &w = *static_cast<Worker *>(arg);
  for (;;) {
    try {
      w.run.grid->body(w.run.grid->params.get());
      w.run.quiet = true;
      thread_exits(w);
    } catch (const Stopped &) {
      w.state = Worker::Stopped;
    } catch (...) {
      stop_block(*g_block, cudaErrorLaunchFailure,
                 thread_name(w.run.thread) + " threw a C++ exception out of the kernel");
      w.state = Worker::Stopped;
    }
    wait(w); // resumed for the next block's thread
  }
}

// "threads 0-31 at __syncthreads; 32-63 at __shfl_xor_sync": who waits on whom.
std::string waiting(const Block &b) {
  std::string s;
  auto add = [&](int from, int to, const std::string &where) {
    if (from < 0)
      return;
    s += std::string(s.empty() ? "" : "; ") + "threads " + std::to_string(from) +
         (to > from ? "-" + std::to_string(to) : "") + " at " + where;
  };
  auto where = [&](int i) -> std::string { // what thread i waits at ("": nothing)
    const Worker &w = *g_workers[size_t(i)];
    return w.state == Worker::AtBarrier ? "__syncthreads"
           : w.state == Worker::AtWarp  ? w.at_warp
                                        : "";
  };
  int from = -1;
  std::string at;
  for (int i = 0; i <= b.threads; ++i) {
    const std::string now = i < b.threads ? where(i) : "";
    if (i < b.threads && now == at)
      continue;
    if (!at.empty())
      add(from, i - 1, at);
    from = i;
    at = now;
  }
  return s;
}

// Runs the block's threads in turns until all have exited, or one broke a rule.
void run_block(Block &b) {
  while (b.live > 0 && !b.stopped) {
    bool ran = false;
    for (int i = 0; i < b.threads && !b.stopped; ++i) {
      Worker &w = *g_workers[size_t(i)];
      if (w.state != Worker::Runnable)
        continue;
      tl_worker = &w;
      tl_thread = &w.run;
      w.fresh = false;
      fiber_switch(b.scheduler, w.fiber);
      tl_worker = nullptr;
      tl_thread = nullptr;
      ran = true;
    }
    if (!ran && b.live > 0 && !b.stopped) {
      b.stopped = true;
      b.code = cudaErrorLaunchFailure;
      b.what = "its threads wait for each other for ever (" + waiting(b) + ")";
    }
  }
}

// A block's dynamic shared memory: on the heap at its exact size under AddressSanitizer (which
// then reports an overrun itself), else at the end of a mapping followed by a guard page:
// memory.cpp reports an access outside the block's bytes but inside the mapping (the arena).
#ifdef TARNN_EMU_ASAN
constexpr bool kSharedOnHeap = true;
#else
constexpr bool kSharedOnHeap = false;
#endif

struct Shared {
  char *arena = nullptr;
  size_t arena_bytes = 0; // then one page that faults
  char *get(size_t bytes) {
    if (kSharedOnHeap)
      return static_cast<char *>(std::malloc(std::max<size_t>(bytes, 1)));
    if (!arena) {
      const size_t page = size_t(sysconf(_SC_PAGESIZE));
      arena_bytes = (kOptinSharedBytes + page - 1) / page * page;
      void *m = mmap(nullptr, arena_bytes + page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) {
        std::fprintf(stderr, "tarnn emulated device: cannot map shared memory\n");
        std::abort();
      }
      arena = static_cast<char *>(m);
      mprotect(arena + arena_bytes, page, PROT_NONE);
      set_shared_arena(arena, arena_bytes + page);
    }
    return arena + arena_bytes - (bytes + 15) / 16 * 16; // 16-aligned, as CUDA's
  }
  void put(char *p) {
    if (kSharedOnHeap)
      std::free(p);
  }
};
Shared g_shared;

// Each of a block's `threads` workers made ready to run the block `common` describes.
void start_threads(const Grid &g, const ThreadRun &common, int threads) {
  for (int i = 0; i < threads; ++i) {
    Worker &w = *g_workers[size_t(i)];
    w.run = common;
    w.run.thread = uint16_t(i);
    w.run.thread_idx = {unsigned(i) % g.block.x, unsigned(i) / g.block.x % g.block.y,
                        unsigned(i) / (g.block.x * g.block.y)};
    w.run.stack_lo = w.fiber.stack;
    w.run.stack_hi = w.fiber.stack + w.fiber.stack_bytes;
    w.state = Worker::Runnable;
    w.collectives = 0;
  }
}

// After a block: its reads of shared memory that no thread of it wrote, as a fault's words (empty
// for none). tl_thread is the block's for thread_name's index, and quiet: the report's own strings
// are the host's memory, not the kernel's (checked, one was "a host pointer?", a fault with no
// worker to stop).
std::string unwritten_report(ThreadRun &common) {
  tl_thread = &common;
  std::string why;
  {
    Quiet quiet(&common);
    why = unwritten_shared_reads(common);
  }
  tl_thread = nullptr;
  return why;
}

void run_blocks(const Grid &g, Counts *counts) {
  const int threads = int(g.block.x * g.block.y * g.block.z);
  Block b;
  b.grid = &g;
  b.threads = threads;
  b.warps.resize(size_t((threads + kWarp - 1) / kWarp));
  fiber_of_this_thread(b.scheduler);
  g_block = &b;
  for (int i = 0; i < threads; ++i)
    worker(i);
  ThreadRun common{};
  common.grid = &g;
  common.counts = counts;
  common.params_lo = static_cast<const char *>(g.params.get());
  common.params_hi = common.params_lo + g.params_bytes;
  common.launch = next_launch();
  common.launch_seg = next_segment();
  for (unsigned z = 0; z < g.grid.z && !b.stopped; ++z)
    for (unsigned y = 0; y < g.grid.y && !b.stopped; ++y)
      for (unsigned x = 0; x < g.grid.x && !b.stopped; ++x) {
        common.block_idx = {x, y, z};
        common.block_seg = common.seg = next_segment();
        common.shared_bytes = g.shared_bytes;
        common.shared = g.shared_bytes ? g_shared.get(g.shared_bytes) : nullptr;
        if (common.shared)
          std::memset(common.shared, 0xff, g.shared_bytes); // not zeroed on a GPU either
        common.shared_shadow = shared_shadow(g.shared_bytes);
        for (Warp &wp : b.warps)
          wp = Warp();
        start_threads(g, common, threads);
        b.live = threads;
        b.at_barrier = 0;
        run_block(b);
        if (!b.stopped && common.shared)
          if (const std::string unwritten = unwritten_report(common); !unwritten.empty())
            stop_block(b, cudaErrorLaunchFailure, unwritten);
        if (common.shared)
          g_shared.put(common.shared);
      }
  g_block = nullptr;
  if (!b.stopped)
    return;
  // the threads stopped mid-kernel start over at their next block
  for (int i = 0; i < threads; ++i) {
    Worker &w = *g_workers[size_t(i)];
    if (!w.fresh && w.state != Worker::Done && w.state != Worker::Stopped)
      fiber_start(w.fiber, kStackBytes, &worker_main, &w), w.fresh = true; // left mid-kernel
  }
  fault(b.code, g.name + ": " + b.what);
}

} // namespace

// ---- the API of cuda_runtime.h
// -------------------------------------------------------------------

void add_kernel_pads(void *const *begin, void *const *end) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  for (void *const *p = begin; p && p < end; ++p)
    kernel_pads().insert(reinterpret_cast<uintptr_t>(*p));
}

void launch(const void *kernel, const char *pretty, dim3 grid, dim3 block, size_t shared_bytes,
            cudaStream_t stream, std::shared_ptr<const void> params, size_t params_bytes,
            void (*body)(const void *)) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  Grid g;
  g.kernel = kernel;
  g.name = short_name(pretty);
  g.grid = grid;
  g.block = block;
  g.shared_bytes = shared_bytes;
  g.params = std::move(params);
  g.params_bytes = params_bytes;
  g.body = body;
  std::string why;
  if (const cudaError_t e = check(g, why)) {
    set_error(e, g.name + ": " + why);
    invalidate_capture(stream);
    return;
  }
  const auto shared = std::make_shared<const Grid>(std::move(g));
  set_error(submit(stream, cudaGraphNodeTypeKernel, shared->name, [shared] { run_grid(*shared); }));
}

void run_grid(const Grid &g) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  Counts *counts = counts_of(g.name, false);
  ++counts->launches;
  run_blocks(g, counts);
}

uint3 thread_idx() { return tl_thread ? tl_thread->thread_idx : uint3{0, 0, 0}; }
uint3 block_idx() { return tl_thread ? tl_thread->block_idx : uint3{0, 0, 0}; }
dim3 block_dim() { return tl_thread ? tl_thread->grid->block : dim3(); }
dim3 grid_dim() { return tl_thread ? tl_thread->grid->grid : dim3(); }
void *dynamic_shared() { return tl_thread ? tl_thread->shared : nullptr; }

void syncthreads() {
  if (!tl_worker) {
    std::fprintf(stderr, "tarnn emulated device: __syncthreads outside a kernel\n");
    std::abort();
  }
  Worker &w = *tl_worker;
  Block &b = *g_block;
  Quiet quiet(&w.run);
  ++b.at_barrier;
  w.state = Worker::AtBarrier;
  if (b.at_barrier < b.live)
    wait(w);
  else if (!release_barrier(b)) // the last to arrive: every thread goes on (this one now)
    stop_running_thread();
}

WarpArrival warp_arrive(const char *call, unsigned mask, uint64_t value) {
  if (!tl_worker) {
    std::fprintf(stderr, "tarnn emulated device: %s outside a kernel\n", call);
    std::abort();
  }
  Worker &w = *tl_worker;
  Block &b = *g_block;
  Quiet quiet(&w.run);
  const int warp = w.run.thread / kWarp, lane = w.run.thread % kWarp;
  const int lanes = std::min(kWarp, b.threads - warp * kWarp);
  auto fail = [call](const std::string &how) { // (the message made only when it is needed)
    kernel_fault(cudaErrorLaunchFailure, std::string("calls ") + call + how);
  };
  if (!(mask >> lane & 1u))
    fail(" with a mask that leaves out its own lane");
  Warp &wp = b.warps[size_t(warp)];
  const int p = int(w.collectives++ & 1u);
  if (wp.arrived[p] == 0) { // the first lane of this call: the mask's lanes must exist
    wp.mask[p] = mask;
    wp.call[p] = call;
    for (int l = 0; l < kWarp; ++l)
      if (mask >> l & 1u) {
        if (l >= lanes)
          fail(" waiting for lane " + std::to_string(l) + ", which its warp (of " +
               std::to_string(lanes) + ") does not have");
        if (g_workers[size_t(warp * kWarp + l)]->state == Worker::Done)
          fail(" waiting for lane " + std::to_string(l) + " (" +
               thread_name(uint16_t(warp * kWarp + l)) + "), which has exited");
      }
  } else if (wp.call[p] != call && std::strcmp(wp.call[p], call) != 0)
    fail(std::string(" while lanes of its warp wait in ") + wp.call[p] + " for it");
  else if (wp.mask[p] != mask)
    fail(" with another mask than its warp");
  wp.value[p][lane] = value;
  wp.arrived[p] |= 1u << lane;
  const bool last = (wp.arrived[p] & mask) == mask;
  if (last) { // all go on, when this lane next waits
    for (int l = 0; l < kWarp; ++l)
      if ((mask >> l & 1u) && l != lane)
        g_workers[size_t(warp * kWarp + l)]->state = Worker::Runnable;
    wp.arrived[p] = 0;
  } else {
    w.state = Worker::AtWarp;
    w.at_warp = call;
    wait(w);
  }
  return {wp.value[p], lane, last};
}

uint64_t shuffle_xor(unsigned mask, uint64_t value, int lane_mask, int width) {
  if (tl_worker && (width < 1 || width > kWarp || (width & (width - 1)))) {
    Quiet quiet(&tl_worker->run);
    kernel_fault(cudaErrorLaunchFailure,
                 "calls __shfl_xor_sync with width " + std::to_string(width));
  }
  const WarpArrival in = warp_arrive("__shfl_xor_sync", mask, value);
  const int from = in.lane ^ lane_mask;
  if (from >= (in.lane / width + 1) * width) // a later group of `width` lanes: its own value
    return value;
  if (from < 0 || !(mask >> from & 1u)) {
    Quiet quiet(&tl_worker->run);
    kernel_fault(cudaErrorLaunchFailure,
                 "reads lane " + std::to_string(from) + " in __shfl_xor_sync, outside the mask");
  }
  return in.values[from];
}

void kernel_fault(cudaError_t code, const std::string &what) {
  stop_block(*g_block, code, thread_name(tl_worker->run.thread) + " " + what);
  stop_running_thread();
}

std::string thread_name(uint16_t thread) {
  const Grid &g = *g_block->grid;
  const unsigned i = thread;
  const uint3 b = tl_thread ? tl_thread->block_idx : uint3{0, 0, 0};
  return "thread (" + std::to_string(i % g.block.x) + ", " +
         std::to_string(i / g.block.x % g.block.y) + ", " +
         std::to_string(i / (g.block.x * g.block.y)) + ") of block (" + std::to_string(b.x) + ", " +
         std::to_string(b.y) + ", " + std::to_string(b.z) + ")";
}

} // namespace tarnn_emu

extern "C" cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value) {
  using namespace tarnn_emu;
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      size_t(value) > kOptinSharedBytes)
    return set_error(cudaErrorInvalidValue,
                     "cudaFuncSetAttribute: the dynamic shared memory a kernel may ask for is at "
                     "most " +
                         std::to_string(kOptinSharedBytes) + " bytes");
  max_dynamic_shared()[kernel] = size_t(value);
  return cudaSuccess;
}
