// The CUDA backend (cuda_backend.h): a device context, the weights in one allocation, the batch in
// another, and GpuOps, the step plan of step_plan.h on kernels and cuBLAS, replayed as a graph.
#include "cuda_backend.h"

#include <chrono>
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "../kernels/cuda_util.h"
#include "../kernels/launch.h"
#include "cuda_plan.h"
#include "error.h"
#include "step_plan.h"

namespace tarnn {

namespace {

constexpr size_t kBlasWorkspace = size_t(32)
                                  << 20; // set up front: cuBLAS may not allocate in capture

void blas_check(cublasStatus_t s, const char *call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(call) + ": " + cublasGetStatusString(s));
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

std::string mb(double bytes) { return std::to_string(int64_t(bytes / 1e6)) + " MB"; }

// The current device (CUDA_VISIBLE_DEVICES picks it), or Error "no CUDA device: ...".
int require_device() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    const std::string hint = e == cudaErrorInsufficientDriver
                                 ? "no NVIDIA driver, or one too old for CUDA " +
                                       std::to_string(CUDART_VERSION / 1000) + "." +
                                       std::to_string(CUDART_VERSION % 1000 / 10) + "; "
                                 : "";
    throw Error(std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (" +
                hint + "use --device cpu)");
  }
  if (count == 0)
    throw Error("no CUDA device: none found (use --device cpu)");
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  int major = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
             "cudaDeviceGetAttribute");
  if (major < 8)
    throw Error("CUDA device " + std::to_string(dev) + " has compute capability " +
                std::to_string(major) +
                ".x; this build has code for 8.0 and newer (use --device cpu)");
  return dev;
}

std::string describe(int dev) {
  cudaDeviceProp prop;
  cuda_check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  char s[400];
  std::snprintf(s, sizeof s, "%s (sm_%d%d, %.1f GB)", prop.name, prop.major, prop.minor,
                double(prop.totalGlobalMem) / 1e9);
  return s;
}

// Bytes/s of DRAM from the memory clock and bus width (double data rate); 0 if not reported.
double peak_bandwidth(int dev) {
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return 2.0 * khz * 1e3 * bits / 8.0;
}

void check_supported(const Config &c) {
  if (c.attention != "linear")
    throw Error("the CUDA backend runs linear attention; this model's attention is " + c.attention);
}

// A stream and a cuBLAS handle on it. FP32 GEMMs by default (the same products as the CPU's to
// float rounding); TF32 tensor cores on request.
struct Gpu {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void *workspace = nullptr;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;

  explicit Gpu(bool tf32) {
    device = require_device();
    name = describe(device);
    try {
      cuda_check(cudaSetDevice(device), "cudaSetDevice");
      cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      blas_check(cublasCreate(&blas), "cublasCreate");
      blas_check(cublasSetStream(blas, stream), "cublasSetStream");
      cuda_check(cudaMalloc(&workspace, kBlasWorkspace), "cudaMalloc (cuBLAS workspace)");
      blas_check(cublasSetWorkspace(blas, workspace, kBlasWorkspace), "cublasSetWorkspace");
      blas_check(cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode");
      compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    } catch (...) {
      release();
      throw;
    }
  }
  ~Gpu() { release(); }
  Gpu(const Gpu &) = delete;
  Gpu &operator=(const Gpu &) = delete;

  void release() {
    if (blas)
      cublasDestroy(blas);
    if (workspace)
      cudaFree(workspace);
    if (stream)
      cudaStreamDestroy(stream);
    blas = nullptr;
    workspace = nullptr;
    stream = nullptr;
  }
};

// One device allocation, freed with its owner; a failed cudaMalloc is an Error, not a crash.
struct DeviceBlock {
  void *p = nullptr;
  size_t bytes = 0;
  DeviceBlock(size_t n, const std::string &what) : bytes(n) {
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(n, 1));
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error("cudaMalloc (" + what + ", " + mb(double(n)) + "): " + cudaGetErrorString(e));
    }
  }
  ~DeviceBlock() { cudaFree(p); }
  DeviceBlock(const DeviceBlock &) = delete;
  DeviceBlock &operator=(const DeviceBlock &) = delete;
};

size_t weight_bytes(const Weights &W) {
  size_t total = 0;
  weight_ptrs(W, [&](const std::vector<float> &v) {
    total += align256(v.size() * 4);
    return static_cast<const float *>(nullptr);
  });
  return total;
}

// Every tensor copied once into one allocation, in PyTorch's layout (cuBLAS reads W [out, in]
// as the transposed operand).
struct DeviceWeights {
  DeviceBlock mem;
  WeightPtrs ptrs;
  explicit DeviceWeights(const Weights &W) : mem(weight_bytes(W), "weights") {
    size_t at = 0;
    ptrs = weight_ptrs(W, [&](const std::vector<float> &v) {
      float *d = reinterpret_cast<float *>(static_cast<char *>(mem.p) + at);
      cuda_check(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      at += align256(v.size() * 4);
      return static_cast<const float *>(d);
    });
    // A pageable cudaMemcpy may return before its DMA lands, and the backend's stream does not
    // wait for the legacy default stream: wait here, once.
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
};

// The batch: state, activations and bytes of `rows` images in one allocation, zeroed.
struct DeviceBatch {
  BatchLayout layout;
  DeviceBlock mem;
  StepBuffers b;
  DeviceBatch(const Config &c, int rows)
      : layout(batch_layout(c, rows)),
        mem(layout.total, "batch of " + std::to_string(rows) + " images"),
        b(step_buffers(mem.p, layout)) {
    cuda_check(cudaMemset(mem.p, 0, layout.total), "cudaMemset");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); // as for the weights
  }
};

// step_plan.h's operations on the GPU.
class GpuOps {
public:
  GpuOps(Gpu &gpu, const Config &c, const WeightPtrs &w, const StepBuffers &b, bool use_graph)
      : gpu_(gpu), c_(c), w_(w), b_(b), use_graph_(use_graph) {}
  ~GpuOps() { drop_graph(); }
  GpuOps(const GpuOps &) = delete;
  GpuOps &operator=(const GpuOps &) = delete;

  void embedding(float *x, const float *E, const float *P, const uint8_t *cur, const StepParams *p,
                 int rows, int d_model) {
    launch_embedding(x, E, P, cur, p, rows, d_model, gpu_.stream);
  }
  // Row-major Y [rows, out] = X [rows, in] W^T, W [out, in]. Column-major, cuBLAS sees
  // Y^T (out x rows) = op(W) X^T with op = transpose on W's [in, out] column-major view.
  void gemm(const float *W, const float *X, float *Y, int rows, int out, int in) {
    const float one = 1.0f, zero = 0.0f;
    blas_check(cublasGemmEx(gpu_.blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, W, CUDA_R_32F,
                            in, X, CUDA_R_32F, in, &zero, Y, CUDA_R_32F, out, gpu_.compute,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  }
  void linear_attention(const float *qkv, const float *bias, float *state, float *att, int rows,
                        int layer, int n_layers, int n_heads, int d_head) {
    launch_linear_attention(qkv, bias, state, att, rows, layer, n_layers, n_heads, d_head,
                            gpu_.stream);
  }
  void bias_act(float *y, const float *bias, int rows, int n, Act a) {
    launch_bias_act(y, bias, rows, n, a, gpu_.stream);
  }
  void residual_layernorm(float *x, const float *y, const float *bias, const float *nw,
                          const float *nb, int rows, int n) {
    launch_residual_layernorm(x, y, bias, nw, nb, rows, n, gpu_.stream);
  }
  void sample_bytes(const float *o, int K, const uint8_t *given, const uint8_t *known, int T,
                    uint8_t *cur, uint8_t *out, double *log_prob, const StepParams *p, int rows) {
    launch_sample_bytes(o, K, given, known, T, cur, out, log_prob, p, rows, gpu_.stream);
  }
  void advance_position(StepParams *p) { launch_advance_position(p, gpu_.stream); }

  // Host copies happen once per chunk: synchronous, so the host buffers may go right after.
  void upload(void *dst, const void *src, size_t n) {
    cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, gpu_.stream),
               "cudaMemcpyAsync");
    sync();
  }
  void download(void *dst, const void *src, size_t n) {
    cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, gpu_.stream),
               "cudaMemcpyAsync");
    sync();
  }
  void download_columns(uint8_t *dst, size_t dpitch, const uint8_t *src, size_t spitch,
                        size_t width, size_t rows) {
    cuda_check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToHost,
                                 gpu_.stream),
               "cudaMemcpy2DAsync");
    sync();
  }
  void zero(void *p, size_t n) {
    cuda_check(cudaMemsetAsync(p, 0, n, gpu_.stream), "cudaMemsetAsync");
  }
  void sync() { cuda_check(cudaStreamSynchronize(gpu_.stream), "cudaStreamSynchronize"); }

  // `count` whole steps of `rows` rows. The first step of a new shape runs as plain launches
  // (it loads every kernel and lets cuBLAS pick its own, outside capture), then the sequence is
  // captured once and each further step is one graph launch.
  void steps(int rows, int count) {
    if (count <= 0)
      return;
    if (!use_graph_) {
      for (int i = 0; i < count; ++i)
        step_sequence(*this, c_, w_, b_, rows);
      return;
    }
    if (!exec_ || graph_rows_ != rows) {
      step_sequence(*this, c_, w_, b_, rows);
      --count;
      capture(rows);
    }
    for (int i = 0; i < count; ++i)
      cuda_check(cudaGraphLaunch(exec_, gpu_.stream), "cudaGraphLaunch");
  }

private:
  void capture(int rows) {
    drop_graph();
    cuda_check(cudaStreamBeginCapture(gpu_.stream, cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      step_sequence(*this, c_, w_, b_, rows);
    } catch (...) {
      cudaStreamEndCapture(gpu_.stream, &graph); // leave the stream usable
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    cuda_check(cudaStreamEndCapture(gpu_.stream, &graph), "cudaStreamEndCapture");
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    cuda_check(e, "cudaGraphInstantiate");
    graph_rows_ = rows;
  }
  void drop_graph() {
    if (exec_)
      cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    graph_rows_ = -1;
  }

  Gpu &gpu_;
  const Config &c_;
  const WeightPtrs &w_;
  const StepBuffers &b_;
  bool use_graph_;
  cudaGraphExec_t exec_ = nullptr;
  int graph_rows_ = -1;
};

int64_t free_memory() {
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return int64_t(free_b);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

bool cuda_built() { return true; }

std::string cuda_require_device() { return describe(require_device()); }

CudaRunInfo run_cuda(const Model &m, const Rollout &job, const CudaOptions &opt) {
  const Config &c = m.config;
  check_supported(c);
  const auto t0 = std::chrono::steady_clock::now();
  Gpu gpu(opt.tf32);
  const DeviceWeights w(m.weights);
  const int batch = plan_batch(c, opt.batch, job.count, free_memory(), gpu.name);
  DeviceBatch mem(c, batch);
  GpuOps ops(gpu, c, w.ptrs, mem.b, opt.graph);
  CudaRunInfo info;
  info.device = gpu.name;
  info.batch = batch;
  info.device_bytes = int64_t(mem.layout.total);
  info.state_bytes = int64_t(mem.layout.state_bytes);
  info.peak_bandwidth = peak_bandwidth(gpu.device);
  info.seconds_setup = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  rollout(ops, c, mem.b, job, opt.progress);
  info.seconds_steps = seconds_since(t1);
  return info;
}

int cuda_auto_batch(const Model &m, int64_t count) {
  check_supported(m.config);
  Gpu gpu(false);
  const DeviceWeights w(m.weights);
  return plan_batch(m.config, 0, count, free_memory(), gpu.name);
}

struct CudaDecoder::Impl {
  const Config &c;
  Gpu gpu;
  DeviceWeights w;
  int rows;
  DeviceBatch mem;
  GpuOps ops;
  Impl(const Model &m, int rows_, const CudaOptions &opt)
      : c(m.config), gpu(opt.tf32), w(m.weights),
        rows(plan_batch(m.config, rows_, rows_, free_memory(), gpu.name)), mem(c, rows),
        ops(gpu, c, w.ptrs, mem.b, false) {}
};

CudaDecoder::CudaDecoder(const Model &m, int rows, const CudaOptions &opt) {
  check_supported(m.config);
  if (rows < 1)
    throw Error("CudaDecoder: rows must be at least 1");
  impl_ = std::make_unique<Impl>(m, rows, opt);
}

CudaDecoder::~CudaDecoder() = default;

void CudaDecoder::step(int t, const uint8_t *bytes, float *o) {
  Impl &d = *impl_;
  if (t < 0 || t >= d.c.positions())
    throw Error("CudaDecoder::step: position " + std::to_string(t) + " is outside [0, " +
                std::to_string(d.c.positions()) + ")");
  StepParams p;
  p.t = t;
  d.ops.upload(d.mem.b.cur, bytes, size_t(d.rows));
  d.ops.upload(d.mem.b.params, &p, sizeof p);
  forward(d.ops, d.c, d.w.ptrs, d.mem.b, d.rows);
  d.ops.download(o, d.mem.b.o, size_t(d.rows) * d.c.d_out() * 4);
}

int CudaDecoder::rows() const { return impl_->rows; }

int64_t CudaDecoder::state_bytes() const { return int64_t(impl_->mem.layout.state_bytes); }

} // namespace tarnn
