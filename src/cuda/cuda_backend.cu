// The CUDA backend (cuda_backend.h): a device context and the weights in one allocation, made
// once per Engine; per run the batch in another; and GpuOps, model/forward.h's ops on kernels and
// cuBLAS, each step replayed as a graph.
#include "cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../kernels/cuda_util.h"
#include "../../kernels/launch.h"
#include "../../kernels/round_bf16.h"
#include "../base/util.h"
#include "../model/forward.h"
#include "../model/plugin_api.h"
#include "../model/rollout.h"
#include "gemm.h"
#include "plan.h"
#include "tarnn/error.h"
#include "tarnn/version.h"
#ifdef TARNN_EMULATED_DEVICE
#include "emulator/emulator.h"
#endif

namespace tarnn {

namespace {

constexpr size_t kBlasWorkspace = size_t(32)
                                  << 20; // set up front: cuBLAS may not allocate in capture

void blas_check(cublasStatus_t s, const char *call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(call) + ": " + cublasGetStatusString(s), Error::Kind::Runtime);
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// The emulated device counts the bytes kernels move in device memory by these names (the state,
// the weights; docs/CUDA.md; a name here and in moved_since_last is all a new one takes); a GPU
// counts nothing.
constexpr const char *kStateBytes = "state", *kWeightBytes = "weights";
void name_memory(const void *p, size_t bytes, const char *name) {
#ifdef TARNN_EMULATED_DEVICE
  tarnn_emu::label_memory(p, bytes, name);
#else
  (void)p, (void)bytes, (void)name;
#endif
}

// The emulated device's counts since the last call, per image and step, and none on a GPU.
std::vector<KernelBytes> moved_since_last(double image_steps, double steps) {
  std::vector<KernelBytes> all;
#ifdef TARNN_EMULATED_DEVICE
  for (const tarnn_emu::Traffic &t : tarnn_emu::traffic()) {
    KernelBytes k;
    k.name = t.name;
    k.gemm = t.gemm;
    k.launches_per_step = double(t.launches) / steps;
    k.read = double(t.all.read) / image_steps;
    k.written = double(t.all.written) / image_steps;
    for (const auto &[label, b] : t.labelled) {
      const double bytes = double(b.read + b.written) / image_steps;
      if (label == kStateBytes)
        k.state += bytes;
      else if (label == kWeightBytes)
        k.weights += bytes;
    }
    all.push_back(k);
  }
  tarnn_emu::reset_traffic();
#else
  (void)image_steps, (void)steps;
#endif
  return all;
}

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
                    hint + "use --device cpu)",
                Error::Kind::Runtime);
  }
  if (count == 0)
    throw Error("no CUDA device: none found (use --device cpu)", Error::Kind::Runtime);
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

// The widest input of a linear layer: the room a bf16 copy of a GEMM's input takes per image.
size_t widest_input(const Config &c) { return size_t(std::max({c.d_model, c.d_ff, c.d_attn()})); }

void check_supported(const Config &c) {
  if (c.attention != Attention::Linear)
    throw Error(std::string("the CUDA backend runs linear attention; this model's attention is ") +
                attention_name(c.attention));
}

// The GEMMs' inputs for a precision.
Gemm::Inputs gemm_inputs(Precision p) {
  switch (p) {
  case Precision::Fp32:
    return Gemm::Inputs::Fp32;
  case Precision::Tf32:
    return Gemm::Inputs::Tf32;
  case Precision::Bf16:
    return Gemm::Inputs::Bf16;
  }
  throw Error(std::string("the CUDA backend has no ") + name(p) + " GEMM");
}

// A stream and a cuBLAS handle on it. FP32 GEMMs by default (the same products as the CPU's to
// float rounding); TF32 tensor cores, or bf16 inputs with fp32 sums, on request.
struct Gpu {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void *workspace = nullptr;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  // null: cuBLAS's own choice per size (CudaGemm::Cublas, for comparisons; bf16 always runs Gemm).
  std::unique_ptr<Gemm> gemm;

  Gpu(Gemm::Inputs inputs, CudaGemm path) {
    const bool tf32 = inputs == Gemm::Inputs::Tf32;
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
      if (path != CudaGemm::Cublas || inputs == Gemm::Inputs::Bf16)
        gemm = std::make_unique<Gemm>(stream, workspace, kBlasWorkspace, inputs,
                                      path != CudaGemm::Unfused);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Gpu() { release(); }
  Gpu(const Gpu &) = delete;
  Gpu &operator=(const Gpu &) = delete;

  void release() {
    gemm.reset();
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
      throw Error("cudaMalloc (" + what + ", " + mb(double(n)) + "): " + cudaGetErrorString(e),
                  Error::Kind::Runtime);
    }
  }
  ~DeviceBlock() { cudaFree(p); }
  DeviceBlock(const DeviceBlock &) = delete;
  DeviceBlock &operator=(const DeviceBlock &) = delete;
};

// A linear layer in device memory (LinearWeights::w), PyTorch's layout (cuBLAS reads W [out, in]
// as the transposed operand): float, or with bf16 the bfloat16 bits (uint16_t).
size_t weight_bytes(const Weights &W, Precision precision) {
  size_t total = 0;
  auto count = [&](const std::vector<float> &v) {
    total += align256(v.size() * 4);
    return static_cast<const float *>(nullptr);
  };
  make_view(W, count, [&](const Linear &l) {
    total += precision == Precision::Bf16 ? align256(l.w.size() * 2) : align256(l.w.size() * 4);
    return LinearWeights{precision, l.out, l.in, nullptr, count(l.b)};
  });
  return total;
}

// Every tensor copied once into one allocation; with bf16 the linear layers' W rounded on the
// host first (kernels/round_bf16.h's rule).
struct DeviceWeights {
  DeviceBlock mem;
  ModelView view;
  DeviceWeights(const Weights &W, Precision precision)
      : mem(weight_bytes(W, precision), "weights") {
    size_t at = 0;
    auto upload = [&](const void *v, size_t bytes) {
      void *d = static_cast<char *>(mem.p) + at;
      cuda_check(cudaMemcpy(d, v, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      at += align256(bytes);
      return d;
    };
    auto place = [&](const std::vector<float> &v) {
      return static_cast<const float *>(upload(v.data(), v.size() * 4));
    };
    view = make_view(W, place, [&](const Linear &l) {
      const void *w = nullptr;
      if (precision == Precision::Bf16) {
        std::vector<uint16_t> w16(l.w.size());
        round_bf16_cpu(l.w.data(), w16.data(), w16.size());
        w = upload(w16.data(), w16.size() * 2);
      } else {
        w = place(l.w);
      }
      return LinearWeights{precision, l.out, l.in, w, place(l.b)};
    });
    // A pageable cudaMemcpy may return before its DMA lands, and the backend's stream does not
    // wait for the legacy default stream: wait here, once.
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    name_memory(mem.p, mem.bytes, kWeightBytes);
  }
};

// The batch: state, activations and bytes of `rows` images in one allocation, zeroed; a state for
// `state_rows` of them (a prefill's rows share one).
struct DeviceBatch {
  BatchLayout layout;
  DeviceBlock mem;
  StepBuffers b;
  DeviceBatch(const Config &c, int rows, StateFormat state, int state_rows = -1)
      : layout(batch_layout(c, rows, state, state_rows < 0 ? rows : state_rows)),
        mem(layout.total, "batch of " + std::to_string(rows) + " images"),
        b(step_buffers(mem.p, layout)) {
    cuda_check(cudaMemset(mem.p, 0, layout.total), "cudaMemset");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); // as for the weights
    name_memory(b.state, layout.state_bytes, kStateBytes);
  }
};

// model/forward.h's ops on the GPU.
class GpuOps {
public:
  // x16: room for one GEMM input of the batch in bfloat16 (rows x the widest layer input), where
  // the weights are bf16. positions: the rows are consecutive positions of one image (the Pre of
  // model/prefill.h): the embedding and the attention take them so; no steps, no graph.
  GpuOps(Gpu &gpu, const Config &c, const ModelView &w, const StepBuffers &b, bool use_graph,
         uint16_t *x16 = nullptr, bool positions = false)
      : gpu_(gpu), c_(c), w_(w), b_(b), use_graph_(use_graph), x16_(x16), positions_(positions) {}
  ~GpuOps() { drop_graph(); }
  GpuOps(const GpuOps &) = delete;
  GpuOps &operator=(const GpuOps &) = delete;

  const StepBuffers &buffers() const { return b_; }
  const ModelView &view() const { return w_; }
  bool worth_prefilling(int distinct, int) const { return distinct <= kCudaPrefillRuns; }

  void embed(const ModelView &w, int rows) {
    launch_embedding(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model,
                     gpu_.stream, positions_);
  }
  // Row-major Y [rows, out] = X [rows, in] W^T, W [out, in]. Column-major, cuBLAS sees
  // Y^T (out x rows) = op(W) X^T with op = transpose on W's [in, out] column-major view. Then
  // y = act(y + b), rounding as the CPU GEMM's epilogue.
  void linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) {
    if (l.precision == Precision::Bf16) { // X rounded into x16, then the GEMM on bf16 operands
      launch_round_bf16(x, x16_, size_t(rows) * l.in, gpu_.stream);
      const bool fused = gpu_.gemm->fuses(act);
      gpu_.gemm->run(l.w, fused ? l.b : nullptr, fused ? act : Act::None, x16_, y, l.in, l.out,
                     rows);
      if (!fused)
        launch_bias_act(y, l.b, rows, l.out, act, gpu_.stream);
      return;
    }
    if (gpu_.gemm && gpu_.gemm->fuses(act)) {
      gpu_.gemm->run(l.w, l.b, act, x, y, l.in, l.out, rows);
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    if (gpu_.gemm)
      gpu_.gemm->run(l.w, nullptr, Act::None, x, y, l.in, l.out, rows);
    else
      blas_check(cublasGemmEx(gpu_.blas, CUBLAS_OP_T, CUBLAS_OP_N, l.out, rows, l.in, &one, l.w,
                              CUDA_R_32F, l.in, x, CUDA_R_32F, l.in, &zero, y, CUDA_R_32F, l.out,
                              gpu_.compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    launch_bias_act(y, l.b, rows, l.out, act, gpu_.stream);
  }
  void attention(int layer, int rows) {
    launch_linear_attention(b_.qkv, b_.state, b_.att, rows, layer, c_.n_layers, c_.n_heads,
                            phi_map(c_, w_.layers[size_t(layer)].omega), b_.state_format, b_.params,
                            gpu_.stream, positions_);
  }
  void add_norm(float *x, const float *y, NormView n, int rows) {
    launch_residual_layernorm(x, y, n.w, n.b, rows, c_.d_model, gpu_.stream);
  }
  void sample(int rows) {
    launch_sample_bytes(b_.o, c_.mixtures, b_.given, b_.known, c_.bytes_per_image(), b_.cur, b_.out,
                        b_.log_prob, b_.params, rows, gpu_.stream);
  }
  void advance() { launch_advance_position(b_.params, gpu_.stream); }

  // Host copies happen once per chunk: synchronous, so the host buffers may go right after.
  // Unified addressing tells the direction: `src` may be device memory too (a prefill's state).
  void upload(void *dst, const void *src, size_t n) {
    cuda_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, gpu_.stream), "cudaMemcpyAsync");
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
        step(*this, c_, w_, rows);
      return;
    }
    if (!exec_ || graph_rows_ != rows) {
      step(*this, c_, w_, rows);
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
      step(*this, c_, w_, rows);
    } catch (...) {
      cudaStreamEndCapture(gpu_.stream, &graph); // leave the stream usable
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    cuda_check(cudaStreamEndCapture(gpu_.stream, &graph), "cudaStreamEndCapture");
    kernels_per_step_ = count_kernels(graph);
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    cuda_check(e, "cudaGraphInstantiate");
    graph_rows_ = rows;
  }
  // The kernel nodes of a captured step (cuBLASLt's GEMMs and ours): what ncu's window spans.
  static int count_kernels(cudaGraph_t graph) {
    size_t n = 0;
    if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess)
      return 0;
    std::vector<cudaGraphNode_t> nodes(n);
    cudaGraphGetNodes(graph, nodes.data(), &n);
    int kernels = 0;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      kernels +=
          cudaGraphNodeGetType(node, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel;
    }
    return kernels;
  }

public:
  int kernels_per_step() const { return kernels_per_step_; }

private:
  void drop_graph() {
    if (exec_)
      cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    graph_rows_ = -1;
  }

  Gpu &gpu_;
  const Config &c_;
  const ModelView &w_;
  const StepBuffers &b_;
  bool use_graph_;
  uint16_t *x16_;
  bool positions_;
  cudaGraphExec_t exec_ = nullptr;
  int graph_rows_ = -1;
  int kernels_per_step_ = 0;
};

int64_t free_memory() {
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return int64_t(free_b);
}

// The device context and the weights, made once; a batch per run.
class CudaBackend : public Backend {
public:
  CudaBackend(const Model &m, const RunOptions &o, const Knobs &k)
      : model_(m), options_(o), graph_(k.graph),
        gpu_((check_supported(m.config), gemm_inputs(o.precision)), k.cuda_gemm),
        weights_(m.weights, o.precision) {
    // every layer's GEMM algorithm chosen and checked at every batch size now, not at its first
    // call (gemm.h: Gemm::prepare)
    if (gpu_.gemm)
      for (const LayerView &l : weights_.view.layers) {
        gpu_.gemm->prepare(l.qkv.in, l.qkv.out, Act::None);
        gpu_.gemm->prepare(l.out.in, l.out.out, Act::None);
        gpu_.gemm->prepare(l.ff1.in, l.ff1.out, m.config.activation);
        gpu_.gemm->prepare(l.ff2.in, l.ff2.out, Act::None);
      }
    if (gpu_.gemm)
      gpu_.gemm->prepare(weights_.view.predictor.in, weights_.view.predictor.out, Act::None);
  }

  std::string device() const override { return gpu_.name; }

  int64_t batch_for(int64_t count) const override {
    return plan_batch(model_.config, options_.batch, count, free_memory(), gpu_.name,
                      options_.state);
  }

  // One run at a time on this backend: its runs share one stream, the GEMMs' descriptors (the
  // bias pointer is set per call), the bf16 scratch and the graph being captured, so a second
  // thread (Python releases the GIL; a server's workers) waits for the first.
  RunInfo run(const Rollout &job, const Progress &progress) override {
    std::lock_guard<std::mutex> one_at_a_time(running_);
    const Config &c = model_.config;
    const auto t0 = std::chrono::steady_clock::now();
    const int batch = plan_batch(c, job.batch > 0 ? job.batch : options_.batch, job.count,
                                 free_memory(), gpu_.name, options_.state);
    DeviceBatch mem(c, batch, options_.state);
    const bool bf16 = options_.precision == Precision::Bf16;
    // the known leading bytes as rows of one pass (model/prefill.h), as on the CPU; --no-prefill:
    // step by step (CudaPrefill.CompletionsAsStepByStep compares the two on a GPU)
    const bool prefill = options_.prefill;
    const int pre_rows = prefill ? std::min(kPrefillRows, c.positions()) : 0;
    DeviceBlock x16(bf16 ? size_t(std::max(batch, pre_rows)) * widest_input(c) * 2 : 0,
                    "bf16 GEMM inputs");
    uint16_t *x16p = bf16 ? static_cast<uint16_t *>(x16.p) : nullptr;
    GpuOps ops(gpu_, c, weights_.view, mem.b, graph_, x16p);
    std::unique_ptr<DeviceBatch> pre_mem;
    std::unique_ptr<GpuOps> pre;
    if (prefill) {
      pre_mem = std::make_unique<DeviceBatch>(c, pre_rows, options_.state, 1);
      pre = std::make_unique<GpuOps>(gpu_, c, weights_.view, pre_mem->b, false, x16p, true);
    }
    RunInfo info;
    info.device = gpu_.name;
    info.batch = batch;
    info.memory_bytes = int64_t(mem.layout.total);
    info.state_bytes = int64_t(mem.layout.state_bytes);
    info.peak_bandwidth = peak_bandwidth(gpu_.device);
    info.seconds_setup = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    const int steps = rollout_steps(c, job);
    DoneHook hook;
    if (progress)
      hook = [&](int64_t done) { progress(done, job.count * steps); };
    rollout(ops, c, job, hook, 32, pre.get()); // a report waits for the GPU: not every step
    info.kernels_per_step = ops.kernels_per_step();
    if (progress)
      progress(job.count * steps, job.count * steps);
    info.seconds_steps = seconds_since(t1);
    return info;
  }

  // Linear attention only (the softmax baselines run on the CPU): one rollout of the first
  // positions, timed whole (its steps are graph launches the host does not wait for).
  StepTimes time_steps(const TimedSteps &job) override {
    if (job.form != AttentionForm::Linear)
      throw Error("--device cuda runs linear attention; the softmax baselines run on the CPU");
    const Config &c = model_.config;
    const int steps = int(job.positions.size());
    for (int i = 0; i < steps; ++i)
      if (job.positions[size_t(i)] != i)
        throw Error("the CUDA backend times the first positions of a rollout, in order");
    std::vector<uint8_t> out(size_t(job.batch) * c.bytes_per_image());
    Rollout r;
    r.count = job.batch;
    r.out = out.data();
    r.positions = steps; // r.batch 0: the engine's, which planned job.batch
    StepTimes t;
    moved_since_last(1, 1); // the counts start here
    t.info = run(r, job.progress);
    t.emulated_bytes = moved_since_last(double(job.batch) * steps, steps);
    t.seconds = t.info.seconds_steps;
    t.memory_bytes_per_image = state_bytes_per_image(c, options_.state);
    return t;
  }

private:
  const Model &model_;
  RunOptions options_;
  bool graph_;
  std::mutex running_;
  Gpu gpu_;
  DeviceWeights weights_;
};

} // namespace

std::string cuda_require_device() { return describe(require_device()); }

std::unique_ptr<Backend> make_cuda_backend_here(const Model &m, const RunOptions &o,
                                                const Knobs &k) {
  return std::make_unique<CudaBackend>(m, o, k);
}

struct CudaDecoder::Impl {
  const Config &c;
  Gpu gpu;
  DeviceWeights w;
  int rows;
  DeviceBatch mem;
  GpuOps ops;
  Impl(const Model &m, int rows_, Precision precision)
      : c(m.config), gpu(gemm_inputs(precision), CudaGemm::Fixed), w(m.weights, precision),
        rows(plan_batch(m.config, rows_, rows_, free_memory(), gpu.name, StateFormat::Fp32)),
        mem(c, rows, StateFormat::Fp32), ops(gpu, c, w.view, mem.b, false) {}
};

CudaDecoder::CudaDecoder(const Model &m, int rows, Precision precision) {
  check_supported(m.config);
  if (rows < 1)
    throw Error("CudaDecoder: rows must be at least 1");
  if (precision == Precision::Bf16)
    throw Error("CudaDecoder: fp32 or tf32 (bf16 needs the GEMM inputs' scratch of a run)");
  impl_ = std::make_unique<Impl>(m, rows, precision);
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
  forward(d.ops, d.c, d.w.view, d.rows);
  d.ops.download(o, d.mem.b.o, size_t(d.rows) * d.c.d_out() * 4);
}

int CudaDecoder::rows() const { return impl_->rows; }

int64_t CudaDecoder::state_bytes() const { return int64_t(impl_->mem.layout.state_bytes); }

} // namespace tarnn

// The plugin's one entry point (plugin_api.h).
extern "C" const tarnn::CudaPluginApi *tarnn_cuda_plugin() {
  static const std::string version = std::string(tarnn::version()) + " " + tarnn::git_commit();
  static const tarnn::CudaPluginApi api{tarnn::kCudaPluginAbi, version.c_str(),
                                        &tarnn::cuda_require_device,
                                        &tarnn::make_cuda_backend_here};
  return &api;
}
