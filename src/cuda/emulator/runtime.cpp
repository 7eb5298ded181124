// The emulated device's runtime API (cuda_runtime_api.h): one device, an H100 as far as the
// backend asks (sm_90, 132 SMs, 48 KB of shared memory a block without asking, 227 KB with) with
// the memory an H100 80GB HBM3 reports, or TARNN_EMULATED_GPU_MEMORY; its memory is the host's.
// Work runs when it is issued, in order, so every stream is trivially ordered; a capturing
// stream records it instead, and a graph replays its records. What a GPU refuses is refused with
// CUDA's error: a bad handle, a copy outside an allocation, a capture-unsafe call during a
// capture (cudaMalloc, a synchronisation), and after a fault in a kernel or GEMM every call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "device.h"

struct tarnn_emu_graph_node {
  cudaGraphNodeType type;
  std::string name;
  std::function<void()> work;
};
struct tarnn_emu_graph {
  std::vector<std::unique_ptr<tarnn_emu_graph_node>> nodes;
};
struct tarnn_emu_graph_exec {
  std::vector<tarnn_emu_graph_node> nodes;
};
struct tarnn_emu_stream {
  unsigned flags = 0;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id capturer;
  std::unique_ptr<tarnn_emu_graph> graph;
};
struct tarnn_emu_event {
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

namespace tarnn_emu {

namespace {

// An H100 80GB HBM3's total as cudaMemGetInfo reports it (81,559 MiB).
constexpr size_t kH100Bytes = size_t(81559) << 20;
const char *const kName = "tarnn emulated CUDA device, on the CPU";

struct State {
  tarnn_emu_stream legacy; // the default stream, 0
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
  std::set<cudaGraph_t> graphs;
  std::set<cudaGraphExec_t> execs;
  cudaError_t sticky = cudaSuccess;
  std::string sticky_detail;
};
State &state() {
  static State s;
  return s;
}

thread_local cudaError_t tl_last = cudaSuccess;
thread_local std::string tl_detail; // what the emulator knows of the last error it set
thread_local cudaError_t tl_detail_code = cudaSuccess;
thread_local std::string tl_message; // cudaGetErrorString's answer

// The device's memory: TARNN_EMULATED_GPU_MEMORY (bytes, or a number with GB, GiB, MB or MiB),
// else an H100's; 0 with `why` set when the variable is not a size.
size_t memory_size(std::string &why) {
  const char *env = std::getenv("TARNN_EMULATED_GPU_MEMORY");
  if (!env || !*env)
    return kH100Bytes;
  char *end = nullptr;
  const double v = std::strtod(env, &end);
  const std::string unit = end ? end : "";
  const double scale = unit.empty()    ? 1
                       : unit == "GB"  ? 1e9
                       : unit == "GiB" ? 1073741824.0
                       : unit == "MB"  ? 1e6
                       : unit == "MiB" ? 1048576.0
                                       : 0;
  if (end == env || !(v > 0) || scale == 0 || v * scale > 1e15) {
    why = std::string("TARNN_EMULATED_GPU_MEMORY=") + env +
          " is not a size (bytes, or a number with GB, GiB, MB or MiB, at most 1 PB)";
    return 0;
  }
  return size_t(v * scale);
}

// What the host can still give: MemAvailable.
size_t host_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (in >> key >> kb)
    if (key == "MemAvailable:")
      return kb * 1024;
  return SIZE_MAX;
}

const char *plain(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidPitchValue:
    return "invalid pitch argument";
  case cudaErrorInvalidDevicePointer:
    return "invalid device pointer";
  case cudaErrorInsufficientDriver:
    return "CUDA driver version is insufficient for CUDA runtime version";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorIllegalState:
    return "the operation cannot be performed in the present state";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorIllegalAddress:
    return "an illegal memory access was encountered";
  case cudaErrorLaunchOutOfResources:
    return "too many resources requested for launch";
  case cudaErrorMisalignedAddress:
    return "misaligned address";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  case cudaErrorNotSupported:
    return "operation not supported";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnmatched:
    return "capture was not initiated in this stream";
  case cudaErrorStreamCaptureImplicit:
    return "operation would make the legacy stream depend on a capturing blocking stream";
  case cudaErrorStreamCaptureWrongThread:
    return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

tarnn_emu_stream *stream_of(cudaStream_t s) {
  if (!s)
    return &state().legacy;
  return state().streams.count(s) ? s : nullptr;
}

// A call a capture forbids in its thread (thread-local or global mode) or anywhere (global):
// cudaErrorStreamCaptureUnsupported, and the captures it would have broken end invalidated.
cudaError_t capture_forbids(const char *call) {
  bool forbidden = false;
  for (cudaStream_t s : state().streams)
    if (s->capture == cudaStreamCaptureStatusActive && s->mode != cudaStreamCaptureModeRelaxed &&
        (s->mode == cudaStreamCaptureModeGlobal || s->capturer == std::this_thread::get_id())) {
      s->capture = cudaStreamCaptureStatusInvalidated;
      forbidden = true;
    }
  return forbidden ? set_error(cudaErrorStreamCaptureUnsupported,
                               std::string(call) + " while a stream is being captured")
                   : cudaSuccess;
}

// A pointer the call says is device memory: [p, p + n) inside one allocation.
cudaError_t check_device(const void *p, size_t n, const char *call, const char *which) {
  if (n == 0 || device_range(p, n) == 0)
    return cudaSuccess;
  return set_error(cudaErrorInvalidValue, std::string(call) + ": the " + which + " [" +
                                              std::to_string(n) +
                                              " bytes] is not inside one device allocation");
}

cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                       const char *call) {
  const bool d_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice ||
                     (kind == cudaMemcpyDefault && device_range(dst, 1) >= 0);
  const bool s_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
                     (kind == cudaMemcpyDefault && device_range(src, 1) >= 0);
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return set_error(cudaErrorInvalidValue, std::string(call) + ": no such cudaMemcpyKind");
  if (d_dev)
    if (cudaError_t e = check_device(dst, n, call, "destination"))
      return e;
  if (s_dev)
    if (cudaError_t e = check_device(src, n, call, "source"))
      return e;
  return cudaSuccess;
}

} // namespace

std::recursive_mutex &device_mutex() {
  static std::recursive_mutex m;
  return m;
}

cudaError_t set_error(cudaError_t code, const std::string &detail) {
  if (code != cudaSuccess) {
    tl_last = code;
    tl_detail = detail;
    tl_detail_code = code;
  }
  return code;
}

void fault(cudaError_t code, const std::string &detail) {
  State &s = state();
  if (s.sticky != cudaSuccess)
    return;
  s.sticky = code;
  s.sticky_detail = detail;
  std::fprintf(stderr, "tarnn emulated device: %s: %s\n", plain(code), detail.c_str());
}

cudaError_t sticky_error() { return state().sticky; }

cudaError_t submit(cudaStream_t stream, cudaGraphNodeType type, const std::string &name,
                   std::function<void()> work) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  State &s = state();
  if (s.sticky)
    return s.sticky;
  tarnn_emu_stream *st = stream_of(stream);
  if (!st)
    return cudaErrorInvalidResourceHandle;
  if (st->capture == cudaStreamCaptureStatusActive) {
    st->graph->nodes.push_back(
        std::make_unique<tarnn_emu_graph_node>(tarnn_emu_graph_node{type, name, std::move(work)}));
    return cudaSuccess;
  }
  if (st->capture == cudaStreamCaptureStatusInvalidated)
    return cudaErrorStreamCaptureInvalidated;
  work(); // a fault in it shows at the next call, as a GPU's would (cudaGetLastError at once)
  return cudaSuccess;
}

void invalidate_capture(cudaStream_t stream) {
  tarnn_emu_stream *st = stream_of(stream);
  if (st && st->capture == cudaStreamCaptureStatusActive)
    st->capture = cudaStreamCaptureStatusInvalidated;
}

} // namespace tarnn_emu

using namespace tarnn_emu;

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

// Every call but the error queries: the sticky error of a faulted device first.
#define TARNN_EMU_ENTER                                                                            \
  Lock lock(device_mutex());                                                                       \
  if (const cudaError_t sticky = sticky_error())                                                   \
  return sticky

} // namespace

extern "C" {

// ---- the device
// ----------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int *count) {
  Lock lock(device_mutex());
  std::string why;
  if (!count)
    return set_error(cudaErrorInvalidValue);
  *count = 0;
  if (memory_size(why) == 0)
    return set_error(cudaErrorNoDevice, "the emulated device: " + why);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  if (!device)
    return set_error(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  TARNN_EMU_ENTER;
  return device == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (!value || device != 0)
    return set_error(device != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
  switch (attr) {
  case cudaDevAttrMaxThreadsPerBlock:
  case cudaDevAttrMaxBlockDimX:
    *value = 1024;
    return cudaSuccess;
  case cudaDevAttrMaxGridDimX:
    *value = 0x7fffffff;
    return cudaSuccess;
  case cudaDevAttrMaxGridDimY:
    *value = 65535;
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlock:
    *value = 48 << 10;
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = 232448;
    return cudaSuccess;
  case cudaDevAttrWarpSize:
    *value = 32;
    return cudaSuccess;
  case cudaDevAttrMultiProcessorCount:
    *value = 132;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMajor:
    *value = 9;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = 0;
    return cudaSuccess;
  default: // the memory clock and bus: the emulated device has no bandwidth to speak of
    *value = 0;
    return set_error(cudaErrorInvalidValue, "the emulated device has no such attribute");
  }
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (!prop || device != 0)
    return set_error(device != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
  std::string why;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "%s", kName);
  prop->totalGlobalMem = memory_size(why);
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = 232448;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  TARNN_EMU_ENTER;
  return capture_forbids("cudaDeviceSynchronize");
}

cudaError_t cudaDeviceReset(void) {
  Lock lock(device_mutex());
  State &s = state();
  for (cudaStream_t st : s.streams)
    delete st;
  for (cudaEvent_t e : s.events)
    delete e;
  for (cudaGraph_t g : s.graphs)
    delete g;
  for (cudaGraphExec_t e : s.execs)
    delete e;
  s.streams.clear();
  s.events.clear();
  s.graphs.clear();
  s.execs.clear();
  s.legacy.capture = cudaStreamCaptureStatusNone;
  s.sticky = cudaSuccess;
  s.sticky_detail.clear();
  tl_last = cudaSuccess;
  device_free_all();
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  TARNN_EMU_ENTER;
  std::string why;
  const size_t total = memory_size(why);
  if (!free_bytes || !total_bytes || total == 0)
    return set_error(cudaErrorInvalidValue, why);
  *total_bytes = total;
  *free_bytes = total - std::min(total, device_allocated());
  return cudaSuccess;
}

// ---- errors
// --------------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
  Lock lock(device_mutex());
  const cudaError_t e = sticky_error() ? sticky_error() : tl_last;
  tl_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  Lock lock(device_mutex());
  return sticky_error() ? sticky_error() : tl_last;
}

const char *cudaGetErrorString(cudaError_t error) {
  Lock lock(device_mutex());
  const State &s = state();
  static const std::string none;
  const std::string &detail = error == s.sticky && s.sticky != cudaSuccess ? s.sticky_detail
                              : error == tl_detail_code                    ? tl_detail
                                                                           : none;
  tl_message = plain(error);
  if (!detail.empty() && error != cudaSuccess)
    tl_message += " (emulated device: " + detail + ")";
  return tl_message.c_str();
}

const char *cudaGetErrorName(cudaError_t error) {
  (void)error;
  return "cudaError";
}

// ---- memory
// --------------------------------------------------------------------------------------

cudaError_t cudaMalloc(void **p, size_t bytes) {
  TARNN_EMU_ENTER;
  if (!p)
    return set_error(cudaErrorInvalidValue);
  *p = nullptr;
  if (cudaError_t e = capture_forbids("cudaMalloc"))
    return e;
  std::string why;
  const size_t total = memory_size(why), used = device_allocated();
  if (bytes > total - std::min(total, used))
    return set_error(cudaErrorMemoryAllocation, std::to_string(bytes) + " bytes asked, " +
                                                    std::to_string(total - std::min(total, used)) +
                                                    " free of " + std::to_string(total));
  if (bytes > host_available() / 10 * 9)
    return set_error(cudaErrorMemoryAllocation,
                     std::to_string(bytes) + " bytes asked: its memory is this machine's, which " +
                         "has " + std::to_string(host_available()) + " bytes available");
  *p = device_alloc(bytes);
  return *p ? cudaSuccess
            : set_error(cudaErrorMemoryAllocation, "the host refused " + std::to_string(bytes));
}

cudaError_t cudaFree(void *p) {
  TARNN_EMU_ENTER;
  if (!p)
    return cudaSuccess;
  if (cudaError_t e = capture_forbids("cudaFree"))
    return e;
  return device_free(p)
             ? cudaSuccess
             : set_error(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  TARNN_EMU_ENTER;
  if (cudaError_t e = capture_forbids("cudaMemcpy"))
    return e;
  if (cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpy"))
    return e;
  if (bytes)
    std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  TARNN_EMU_ENTER;
  if (cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpyAsync"))
    return e;
  return set_error(submit(stream, cudaGraphNodeTypeMemcpy, "cudaMemcpyAsync", [=] {
    if (bytes)
      std::memmove(dst, src, bytes);
  }));
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  TARNN_EMU_ENTER;
  if (dpitch < width || spitch < width)
    return set_error(cudaErrorInvalidPitchValue, "cudaMemcpy2DAsync: a pitch below the width");
  if (height && width)
    if (cudaError_t e = check_copy(dst, src, 0, kind, "cudaMemcpy2DAsync"))
      return e;
  if (height && width) {
    const bool d_dev = device_range(dst, 1) >= 0, s_dev = device_range(src, 1) >= 0;
    if (d_dev && device_range(dst, dpitch * (height - 1) + width) != 0)
      return set_error(cudaErrorInvalidValue, "cudaMemcpy2DAsync: the destination's rows run "
                                              "past its allocation");
    if (s_dev && device_range(src, spitch * (height - 1) + width) != 0)
      return set_error(cudaErrorInvalidValue, "cudaMemcpy2DAsync: the source's rows run past "
                                              "its allocation");
  }
  return set_error(submit(stream, cudaGraphNodeTypeMemcpy, "cudaMemcpy2DAsync", [=] {
    for (size_t r = 0; r < height; ++r)
      std::memmove(static_cast<char *>(dst) + r * dpitch,
                   static_cast<const char *>(src) + r * spitch, width);
  }));
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  TARNN_EMU_ENTER;
  if (cudaError_t e = capture_forbids("cudaMemset"))
    return e;
  if (cudaError_t e = check_device(p, bytes, "cudaMemset", "memory"))
    return e;
  if (bytes && device_range(p, 1) < 0)
    return set_error(cudaErrorInvalidValue, "cudaMemset of host memory");
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream) {
  TARNN_EMU_ENTER;
  if (cudaError_t e = check_device(p, bytes, "cudaMemsetAsync", "memory"))
    return e;
  if (bytes && device_range(p, 1) < 0)
    return set_error(cudaErrorInvalidValue, "cudaMemsetAsync of host memory");
  return set_error(submit(stream, cudaGraphNodeTypeMemset, "cudaMemsetAsync",
                          [=] { std::memset(p, value, bytes); }));
}

// ---- streams and events
// --------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  TARNN_EMU_ENTER;
  if (!stream || flags > cudaStreamNonBlocking)
    return set_error(cudaErrorInvalidValue);
  *stream = new tarnn_emu_stream;
  (*stream)->flags = flags;
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Lock lock(device_mutex());
  if (!stream || !state().streams.erase(stream))
    return set_error(cudaErrorInvalidResourceHandle);
  delete stream;
  return sticky_error();
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  TARNN_EMU_ENTER;
  tarnn_emu_stream *s = stream_of(stream);
  if (!s)
    return set_error(cudaErrorInvalidResourceHandle);
  if (s->capture != cudaStreamCaptureStatusNone) {
    s->capture = cudaStreamCaptureStatusInvalidated;
    return set_error(cudaErrorStreamCaptureUnsupported,
                     "cudaStreamSynchronize of a stream being captured");
  }
  return capture_forbids("cudaStreamSynchronize");
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  TARNN_EMU_ENTER;
  if (!stream_of(stream) || !state().events.count(event))
    return set_error(cudaErrorInvalidResourceHandle);
  return cudaSuccess; // everything before the event has run already
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  TARNN_EMU_ENTER;
  if (!event)
    return set_error(cudaErrorInvalidValue);
  *event = new tarnn_emu_event;
  state().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Lock lock(device_mutex());
  if (!state().events.erase(event))
    return set_error(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  TARNN_EMU_ENTER;
  if (!state().events.count(event))
    return set_error(cudaErrorInvalidResourceHandle);
  return set_error(submit(stream, cudaGraphNodeTypeEmpty, "cudaEventRecord", [event] {
    event->recorded = true;
    event->at = std::chrono::steady_clock::now();
  }));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  TARNN_EMU_ENTER;
  if (!state().events.count(event))
    return set_error(cudaErrorInvalidResourceHandle);
  return capture_forbids("cudaEventSynchronize");
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  TARNN_EMU_ENTER;
  if (!ms || !state().events.count(start) || !state().events.count(end))
    return set_error(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded)
    return set_error(cudaErrorInvalidResourceHandle, "an event that was never recorded");
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

// ---- graphs
// --------------------------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  TARNN_EMU_ENTER;
  tarnn_emu_stream *s = stream_of(stream);
  if (!s)
    return set_error(cudaErrorInvalidResourceHandle);
  if (!stream)
    return set_error(cudaErrorStreamCaptureUnsupported, "the legacy stream cannot be captured");
  if (s->capture != cudaStreamCaptureStatusNone)
    return set_error(cudaErrorIllegalState, "the stream is being captured already");
  s->capture = cudaStreamCaptureStatusActive;
  s->mode = mode;
  s->capturer = std::this_thread::get_id();
  s->graph = std::make_unique<tarnn_emu_graph>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  Lock lock(device_mutex());
  tarnn_emu_stream *s = stream_of(stream);
  if (!s || !graph)
    return set_error(s ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
  *graph = nullptr;
  if (s->capture == cudaStreamCaptureStatusNone)
    return set_error(cudaErrorIllegalState, "the stream is not being captured");
  if (s->mode != cudaStreamCaptureModeRelaxed && s->capturer != std::this_thread::get_id())
    return set_error(cudaErrorStreamCaptureWrongThread);
  const bool invalid = s->capture == cudaStreamCaptureStatusInvalidated;
  s->capture = cudaStreamCaptureStatusNone;
  std::unique_ptr<tarnn_emu_graph> g = std::move(s->graph);
  if (invalid)
    return set_error(cudaErrorStreamCaptureInvalidated);
  *graph = g.release();
  state().graphs.insert(*graph);
  return sticky_error();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
  Lock lock(device_mutex());
  tarnn_emu_stream *s = stream_of(stream);
  if (!s || !status)
    return set_error(s ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
  *status = s->capture;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
  TARNN_EMU_ENTER;
  if (!exec || !state().graphs.count(graph))
    return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = capture_forbids("cudaGraphInstantiate"))
    return e;
  *exec = new tarnn_emu_graph_exec;
  for (const auto &n : graph->nodes)
    (*exec)->nodes.push_back(*n);
  state().execs.insert(*exec);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  TARNN_EMU_ENTER;
  if (!state().execs.count(exec))
    return set_error(cudaErrorInvalidResourceHandle);
  for (const tarnn_emu_graph_node &n : exec->nodes) // recorded again where the stream captures
    if (cudaError_t e = submit(stream, n.type, n.name, n.work))
      return set_error(e);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  Lock lock(device_mutex());
  if (!state().execs.erase(exec))
    return set_error(cudaErrorInvalidResourceHandle);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  Lock lock(device_mutex());
  if (!state().graphs.erase(graph))
    return set_error(cudaErrorInvalidResourceHandle);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count) {
  Lock lock(device_mutex());
  if (!count || !state().graphs.count(graph))
    return set_error(cudaErrorInvalidValue);
  if (nodes)
    for (size_t i = 0; i < std::min(*count, graph->nodes.size()); ++i)
      nodes[i] = graph->nodes[i].get();
  *count = graph->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType *type) {
  if (!node || !type)
    return set_error(cudaErrorInvalidValue);
  *type = node->type;
  return cudaSuccess;
}

} // extern "C"
