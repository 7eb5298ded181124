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
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../kernels/cuda_util.h"
#include "../../kernels/gemm_ref.h"
#include "../../kernels/int8_rows.h"
#include "../../kernels/launch.h"
#include "../../kernels/residual_layernorm.h"
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
    throw Error({std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(e) +
                     " (" + hint + "use ",
                 param("device", "cpu"), ")"},
                Error::Kind::Runtime);
  }
  if (count == 0)
    throw Error({"no CUDA device: none found (use ", param("device", "cpu"), ")"},
                Error::Kind::Runtime);
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  int major = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
             "cudaDeviceGetAttribute");
  if (major < 8)
    throw Error({"CUDA device " + std::to_string(dev) + " has compute capability " +
                     std::to_string(major) + ".x; this build has code for 8.0 and newer (use ",
                 param("device", "cpu"), ")"});
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

// The widest input of a linear layer: the room a bf16 or int8 copy of a GEMM's input takes per
// image.
size_t widest_input(const Config &c) { return size_t(std::max({c.d_model, c.d_ff, c.d_attn()})); }

// The int32 sums' room a row, for the int8 layers whose out is not a multiple of 4: their sums
// are int8_padded(out) apart (kernels/int8_rows.h), wider than y, so they go here; the others'
// are written into y itself. 0 where every layer's out is a multiple of 4 (MNIST's).
size_t int8_sums_width(const Config &c) {
  int width = 0;
  for (int out : {3 * c.d_attn(), c.d_model, c.d_ff}) // q, k and v stacked; the rest; ff1
    if (out % kInt8Multiple)
      width = std::max(width, int8_padded(out));
  return size_t(width);
}

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
  case Precision::Int8:
    return Gemm::Inputs::Int8;
  }
  throw Error(std::string("the CUDA backend has no ") + name(p) + " GEMM");
}

// A knob's value (Knobs, as the engine reads it from `variable`) as the path it names: unset, the
// engine's path; else one of `paths`, or a one-line error naming the variable and every value.
template <class Path> struct KnobValue {
  const char *value;
  Path path;
};
template <class Path>
Path knob_path(const Knobs &k, const char *knob, const char *variable, const char *what,
               Path engine, std::initializer_list<KnobValue<Path>> paths) {
  const std::string v = k.get(knob);
  if (v.empty())
    return engine;
  std::string listed;
  for (const KnobValue<Path> &p : paths) {
    if (v == p.value)
      return p.path;
    listed += (listed.empty() ? "" : ", ") + std::string(p.value);
  }
  throw Error(std::string(variable) + "=" + v + ": not " + what + " (" + listed +
              "; unset: the engine's)");
}

// The GEMM path: one cuBLASLt algorithm per shape with bias and ReLU fused (the engine's), or for
// comparisons (docs/CUDA.md) cuBLAS's own choice per size, or the bias and ReLU in their own
// kernel (the knob "gemm": TARNN_GEMM=cublas|unfused). bf16 always runs the first.
enum class CudaGemm { Fixed, Cublas, Unfused };

CudaGemm gemm_path(const Knobs &k) {
  return knob_path(k, "gemm", "TARNN_GEMM", "a GEMM path", CudaGemm::Fixed,
                   {{"cublas", CudaGemm::Cublas}, {"unfused", CudaGemm::Unfused}});
}

// cuda with bf16 GEMMs: each GEMM input written in bf16 by the kernel that makes it (the engine's:
// the LayerNorm beside its fp32 x, the attention in place of its fp32 output, the first
// feed-forward GEMM's epilogue; docs/CUDA.md), or
// written in fp32 and rounded by a pass of its own before each GEMM (the path before issue 41, to
// compare; the knob "bf16_inputs": TARNN_BF16_INPUTS=rounded). The same bits either way.
enum class CudaBf16Inputs { Written, Rounded };

CudaBf16Inputs bf16_inputs_path(const Knobs &k) {
  return knob_path(k, "bf16_inputs", "TARNN_BF16_INPUTS", "a path for bf16 GEMMs' inputs",
                   CudaBf16Inputs::Written, {{"rounded", CudaBf16Inputs::Rounded}});
}

// The LayerNorms: each row of x + y read once into registers, the last layer's second norm and the
// final norm in one pass, the final norm's fp32 x not written where the head's GEMM reads its bf16
// copy (the engine's, issue 41), or each norm a pass of its own, the row read twice, as before (to
// compare; the knob "layernorm": TARNN_LAYERNORM=passes). The same bits either way.
enum class CudaLayerNorm { Rows, Passes };

CudaLayerNorm layernorm_path(const Knobs &k) {
  return knob_path(k, "layernorm", "TARNN_LAYERNORM", "a LayerNorm path", CudaLayerNorm::Rows,
                   {{"passes", CudaLayerNorm::Passes}});
}

// The feed-forward block and its LayerNorm: the two GEMMs, then the LayerNorm (the engine's, until
// a lease has measured both), or one kernel of tensor-core tiles with the hidden layer kept on chip
// (kernels/feed_forward.h; the knob "feed_forward": TARNN_FEED_FORWARD=fused), or all that follows
// the attention in one kernel: the out-projection, LayerNorm1, the feed-forward and LayerNorm2
// (TARNN_FEED_FORWARD=layer), for bf16 GEMMs.
enum class CudaFeedForward { Unfused, Fused, Layer };

CudaFeedForward feed_forward_path(const Knobs &k) {
  return knob_path(k, "feed_forward", "TARNN_FEED_FORWARD", "a feed-forward path",
                   CudaFeedForward::Unfused,
                   {{"fused", CudaFeedForward::Fused}, {"layer", CudaFeedForward::Layer}});
}

// The fused path asked for where it cannot run is an error, not a silent fallback: bf16 GEMMs, the
// row LayerNorm (its code is the kernel's), a shape the kernel takes (whose shared memory every
// device has: feed_forward.h).
void check_fused_feed_forward(const Config &c, Precision p, CudaLayerNorm norm,
                              CudaFeedForward ff) {
  const bool layer = ff == CudaFeedForward::Layer;
  const std::string knob = layer ? "TARNN_FEED_FORWARD=layer: the layer's kernel"
                                 : "TARNN_FEED_FORWARD=fused: the fused feed-forward";
  if (p != Precision::Bf16)
    throw Error(knob + " runs bf16 GEMMs (--precision bf16); this run's are " + name(p));
  if (norm == CudaLayerNorm::Passes)
    throw Error(knob + " normalizes each row once; not with TARNN_LAYERNORM=passes");
  const std::string refused = layer ? after_attention_refusal(c.d_model, c.d_ff, c.d_attn())
                                    : feed_forward_refusal(c.d_model, c.d_ff);
  if (!refused.empty())
    throw Error(knob + " needs " + refused);
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
  // null: cuBLAS's own choice per size (CudaGemm::Cublas, for comparisons; bf16 and int8 always
  // run Gemm).
  std::unique_ptr<Gemm> gemm;
  // int8's head (head_precision: fp32): Gemm's fp32 path beside the int8 one; else null.
  std::unique_ptr<Gemm> fp32_gemm;

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
      const bool fuse = path != CudaGemm::Unfused;
      if (path != CudaGemm::Cublas || inputs == Gemm::Inputs::Bf16 || inputs == Gemm::Inputs::Int8)
        gemm = std::make_unique<Gemm>(stream, workspace, kBlasWorkspace, inputs, fuse);
      if (inputs == Gemm::Inputs::Int8)
        fp32_gemm =
            std::make_unique<Gemm>(stream, workspace, kBlasWorkspace, Gemm::Inputs::Fp32, fuse);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Gpu() { release(); }
  Gpu(const Gpu &) = delete;
  Gpu &operator=(const Gpu &) = delete;

  // The GEMM of a layer in precision p: the int8 one, or fp32's beside it (int8's head).
  Gemm *gemm_for(Precision p) const {
    return p == Precision::Fp32 && fp32_gemm ? fp32_gemm.get() : gemm.get();
  }

  void release() {
    fp32_gemm.reset();
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

// One float per output, 256 aligned: where a layer's block goes on past it (int8's values after
// W's scales; a bf16 bias after its fp32 copy).
size_t floats_per_output_bytes(int out) { return align256(size_t(out) * 4); }

// A linear layer in device memory (LinearWeights::w), PyTorch's layout (cuBLAS reads W [out, in]
// as the transposed operand): float, or with bf16 the bfloat16 bits (uint16_t), or with int8 its
// Int8Linear: W's scales (out floats) and then, 256 bytes aligned, its int8 values padded to
// [int8_padded(out), int8_padded(in)] with zeros (kernels/int8_rows.h), the shape its GEMM has.
struct Int8Linear {
  const float *scale;
  const int8_t *q;
  int in, out; // the GEMM's
  Int8Linear(const LinearWeights &l)
      : scale(static_cast<const float *>(l.w)),
        q(static_cast<const int8_t *>(l.w) + floats_per_output_bytes(l.out)), in(int8_padded(l.in)),
        out(int8_padded(l.out)) {}
};

size_t linear_bytes(const Linear &l, Precision p) {
  switch (p) {
  case Precision::Bf16:
    return align256(l.w.size() * 2);
  case Precision::Int8:
    return floats_per_output_bytes(l.out) +
           align256(size_t(int8_padded(l.out)) * int8_padded(l.in));
  case Precision::Fp32:
  case Precision::Tf32:
    break;
  }
  return align256(l.w.size() * 4);
}

// Each linear layer's precision: the run's, but int8's head in fp32 (head_precision, as the CPU).
Precision precision_of(const Weights &W, const Linear &l, Precision p) {
  return &l == &W.predictor ? head_precision(p) : p;
}

// A linear layer's bias in device memory: [out] floats, which bias_act and an fp32 output's
// epilogue add; with bf16, rounded to bf16 at load as W is (bf16_bias, docs/PRECISION.md), and
// then, 256 bytes on, the same values in bf16, which a bf16 output's epilogue adds: cuBLASLt takes
// a bias in D's type only (an fp32 one for a bf16 D was refused on an H100, docs/CUDA.md).
size_t bias_bytes(const Linear &l, Precision p) {
  return floats_per_output_bytes(l.out) + (p == Precision::Bf16 ? align256(size_t(l.out) * 2) : 0);
}

std::vector<uint8_t> bias_block(const Linear &l, Precision p) {
  std::vector<uint8_t> block(bias_bytes(l, p), 0);
  float *b = reinterpret_cast<float *>(block.data());
  uint16_t *b16 = reinterpret_cast<uint16_t *>(block.data() + floats_per_output_bytes(l.out));
  const bool bf16 = p == Precision::Bf16;
  for (int j = 0; j < l.out; ++j) {
    b[j] = bf16 ? bf16_bias(l.b[size_t(j)]) : l.b[size_t(j)];
    if (bf16)
      b16[j] = bf16_bits(b[j]); // exact: b[j] is a bf16 value
  }
  return block;
}

// The bias Gemm::run adds to a layer's output of type y: in y's type (bias_block).
const void *bias_for(const LinearWeights &l, Gemm::Output y) {
  if (y == Gemm::Output::Fp32)
    return l.b;
  return reinterpret_cast<const char *>(l.b) + floats_per_output_bytes(l.out);
}

size_t weight_bytes(const Weights &W, Precision precision) {
  size_t total = 0;
  auto count = [&](const std::vector<float> &v) {
    total += align256(v.size() * 4);
    return static_cast<const float *>(nullptr);
  };
  make_view(W, count, [&](const Linear &l) {
    const Precision p = precision_of(W, l, precision);
    total += linear_bytes(l, p) + bias_bytes(l, p);
    return LinearWeights{};
  });
  return total;
}

// W quantized once, on the host, row by row as kernels/gemm_int8_ref.h says (the CPU's packing
// quantizes alike): the block Int8Linear reads, zeros in its padding.
std::vector<uint8_t> quantized_int8(const Linear &l) {
  std::vector<uint8_t> block(linear_bytes(l, Precision::Int8), 0);
  float *scale = reinterpret_cast<float *>(block.data());
  int8_t *q = reinterpret_cast<int8_t *>(block.data() + floats_per_output_bytes(l.out));
  quantize_rows_int8_cpu(l.w.data(), l.out, l.in, int8_padded(l.in), q, scale);
  return block;
}

// Every tensor copied once into one allocation; with bf16 the linear layers' W and b rounded on
// the host first (kernels/round_bf16.h's rule; bias_block), with int8 W quantized
// (quantized_int8).
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
      const Precision p = precision_of(W, l, precision);
      const void *w = nullptr;
      if (p == Precision::Bf16) {
        std::vector<uint16_t> w16(l.w.size());
        round_bf16_cpu(l.w.data(), w16.data(), w16.size());
        w = upload(w16.data(), w16.size() * 2);
      } else if (p == Precision::Int8) {
        const std::vector<uint8_t> block = quantized_int8(l);
        w = upload(block.data(), block.size());
      } else {
        w = place(l.w);
      }
      const std::vector<uint8_t> b = bias_block(l, p);
      return LinearWeights{p, l.out, l.in, w,
                           static_cast<const float *>(upload(b.data(), b.size()))};
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

// Where the GEMMs read their inputs in their own type (all null with fp32 and tf32). bf16: x16,
// room for one GEMM input of the batch (rows x the widest layer input), which the LayerNorm's copy
// of x, the attention's bf16 output or a rounding pass fills; hid16, the first feed-forward GEMM's
// bf16 output (rows x d_ff); qkv16, the q,k,v GEMM's bf16 output (rows x 3 d_attn), which the
// attention reads where the layer's LinearWeights::bf16_output says; written: the kernels that make
// a GEMM's input write it in bf16 (CudaBf16Inputs::Written), else a pass rounds each. int8: q, one
// GEMM input's rows quantized, with a scale a row in sx (kernels/int8_rows.h), and sums, the int32
// sums of a layer too wide for y (int8_sums_width).
struct GemmInputs {
  uint16_t *x16 = nullptr, *hid16 = nullptr, *qkv16 = nullptr;
  bool written = false;
  int8_t *q = nullptr;
  float *sx = nullptr;
  int32_t *sums = nullptr;
};

// The GEMM inputs' room, in one block: bf16, x16, hid16 then qkv16 at cuBLASLt's alignment; int8, q
// (rows of the widest input, padded), sx, then the sums; none for fp32 and tf32, whose GEMMs read X
// itself.
size_t gemm_inputs_bytes(Precision p, size_t rows, const Config &c) {
  switch (p) {
  case Precision::Bf16:
    return align256(rows * widest_input(c) * 2) + align256(rows * size_t(c.d_ff) * 2) +
           rows * size_t(3 * c.d_attn()) * 2;
  case Precision::Int8:
    return align256(rows * int8_padded(int(widest_input(c)))) + align256(rows * 4) +
           rows * int8_sums_width(c) * 4;
  case Precision::Fp32:
  case Precision::Tf32:
    break;
  }
  return 0;
}

GemmInputs gemm_inputs(const DeviceBlock &m, Precision p, size_t rows, const Config &c,
                       bool written) {
  GemmInputs in;
  char *base = static_cast<char *>(m.p);
  if (p == Precision::Bf16) {
    in.x16 = reinterpret_cast<uint16_t *>(base);
    in.hid16 = reinterpret_cast<uint16_t *>(base + align256(rows * widest_input(c) * 2));
    in.qkv16 = reinterpret_cast<uint16_t *>(reinterpret_cast<char *>(in.hid16) +
                                            align256(rows * size_t(c.d_ff) * 2));
    in.written = written;
  }
  if (p == Precision::Int8) {
    const size_t q_bytes = align256(rows * int8_padded(int(widest_input(c))));
    in.q = reinterpret_cast<int8_t *>(base);
    in.sx = reinterpret_cast<float *>(base + q_bytes);
    in.sums = reinterpret_cast<int32_t *>(base + q_bytes + align256(rows * 4));
  }
  return in;
}

// model/forward.h's ops on the GPU.
class GpuOps {
public:
  // in: where the GEMMs read their inputs in bf16 or int8 (GemmInputs), where the weights are so.
  // positions: the rows are consecutive positions of one image (the Pre of model/prefill.h): the
  // embedding and the attention take them so; no steps, no graph. norm: the LayerNorms' path.
  // ff: the feed-forward block's path (checked: check_fused_feed_forward).
  GpuOps(Gpu &gpu, const Config &c, const ModelView &w, const StepBuffers &b, bool use_graph,
         GemmInputs in = {}, bool positions = false, CudaLayerNorm norm = CudaLayerNorm::Rows,
         CudaFeedForward ff = CudaFeedForward::Unfused)
      : gpu_(gpu), c_(c), w_(w), b_(b), use_graph_(use_graph), in_(in), positions_(positions),
        norm_(norm), ff_(ff) {}
  ~GpuOps() { drop_graph(); }
  GpuOps(const GpuOps &) = delete;
  GpuOps &operator=(const GpuOps &) = delete;

  const StepBuffers &buffers() const { return b_; }
  const ModelView &view() const { return w_; }
  bool worth_prefilling(int distinct, int) const { return distinct <= kCudaPrefillRuns; }

  void embed(const ModelView &w, int rows) {
    copies_ = {}; // a forward starts: no bf16 copy is current
    launch_embedding(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model,
                     gpu_.stream, positions_);
  }
  // Row-major Y [rows, out] = X [rows, in] W^T, W [out, in]. Column-major, cuBLAS sees
  // Y^T (out x rows) = op(W) X^T with op = transpose on W's [in, out] column-major view. Then
  // y = act(y + b), rounding as the CPU GEMM's epilogue.
  void linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) {
    wrote(y);
    if (l.precision == Precision::Int8) { // X's rows quantized, the exact int32 sums into y (or
                                          // sums, where wider), scaled to fp32 (int8_rows.h)
      const Int8Linear w(l);
      int32_t *sums = w.out == l.out ? reinterpret_cast<int32_t *>(y) : in_.sums;
      launch_quantize_rows_int8(x, rows, l.in, w.in, in_.q, in_.sx, gpu_.stream);
      gpu_.gemm->run(w.q, nullptr, Act::None, in_.q, sums, w.in, w.out, rows);
      launch_finish_int8(sums, w.out, in_.sx, w.scale, l.b, rows, l.out, act, y, gpu_.stream);
      return;
    }
    Gemm *gemm = gpu_.gemm_for(l.precision);
    if (l.precision == Precision::Bf16) { // the GEMM on bf16 operands
      const uint16_t *x16 = bf16_of(x, size_t(rows) * l.in);
      const bool fused = gemm->fuses(act);
      if (l.bf16_output && y == b_.qkv) { // q, k, v in bf16 for the attention: the epilogue's
        if (fused)                        // rounding, or (TARNN_GEMM=unfused) a pass's
          gemm->run(l.w, bias_for(l, Gemm::Output::Bf16), act, x16, in_.qkv16, l.in, l.out, rows,
                    Gemm::Output::Bf16);
        else
          round_after(gemm, l, x16, y, rows, act, in_.qkv16);
        qkv16_ = true; // y itself is not written
        return;
      }
      if (fused && in_.written && y == b_.hid) { // hid's one reader: the next (bf16) GEMM
        gemm->run(l.w, bias_for(l, Gemm::Output::Bf16), act, x16, in_.hid16, l.in, l.out, rows,
                  Gemm::Output::Bf16);
        copies_.hid16 = y; // y itself is not written
        return;
      }
      gemm->run(l.w, fused ? l.b : nullptr, fused ? act : Act::None, x16, y, l.in, l.out, rows);
      if (!fused)
        launch_bias_act(y, l.b, rows, l.out, act, gpu_.stream);
      return;
    }
    if (gemm && gemm->fuses(act)) {
      gemm->run(l.w, l.b, act, x, y, l.in, l.out, rows);
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    if (gemm)
      gemm->run(l.w, nullptr, Act::None, x, y, l.in, l.out, rows);
    else
      blas_check(cublasGemmEx(gpu_.blas, CUBLAS_OP_T, CUBLAS_OP_N, l.out, rows, l.in, &one, l.w,
                              CUDA_R_32F, l.in, x, CUDA_R_32F, l.in, &zero, y, CUDA_R_32F, l.out,
                              gpu_.compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    launch_bias_act(y, l.b, rows, l.out, act, gpu_.stream);
  }
  void attention(int layer, int rows) {
    wrote(b_.att);
    const LayerView &w = w_.layers[size_t(layer)];
    const uint16_t *qkv16 = qkv16_ ? in_.qkv16 : nullptr; // the q,k,v GEMM's bf16 output
    qkv16_ = false;
    // att's one reader is the out-projection: a bf16 GEMM takes it in bf16, written so here
    uint16_t *att16 = in_.written && w.out.precision == Precision::Bf16 ? in_.x16 : nullptr;
    if (b_.state_chunk > 1) // S and z written once a chunk (chunked_attention.h)
      launch_chunked_attention(b_.qkv, b_.state, b_.att, rows, layer, c_.n_layers, c_.n_heads,
                               phi_map(c_, w.omega), b_.state_format, b_.params, gpu_.stream,
                               positions_, att16, b_.state_chunk, qkv16);
    else
      launch_linear_attention(b_.qkv, b_.state, b_.att, rows, layer, c_.n_layers, c_.n_heads,
                              phi_map(c_, w.omega), b_.state_format, b_.params, gpu_.stream,
                              positions_, att16, qkv16);
    if (att16)
      copies_.x16 = b_.att; // att itself is not written
  }
  void add_norm(float *x, const float *y, NormView n, int rows, const NormView *then = nullptr) {
    const NormOut out = norm_out(x, then);
    const int d = c_.d_model;
    if (norm_ == CudaLayerNorm::Passes || d > kLayerNormRegisterWidth) {
      launch_residual_layernorm(x, y, n.w, n.b, rows, d, gpu_.stream, out.x16);
      if (then)
        launch_residual_layernorm(x, nullptr, then->w, then->b, rows, d, gpu_.stream, out.x16);
    } else {
      launch_layernorm_rows(x, y, n.w, n.b, then ? then->w : nullptr, then ? then->b : nullptr,
                            rows, d, out.x, out.x16, gpu_.stream);
    }
  }
  // x = then(LayerNorm2(x + W2 act(W1 x + b1) + b2)): the ops' composition, or the fused kernel,
  // which reads x's bf16 copy and writes x and its copy as add_norm does.
  void feed_forward(const LayerView &w, int rows, Act act, const NormView *then) {
    if (ff_ != CudaFeedForward::Fused) {
      feed_forward_unfused(*this, w, rows, act, then);
      return;
    }
    const uint16_t *x16 = bf16_of(b_.x, size_t(rows) * c_.d_model);
    fused(feed_forward_of(w, act, then), x16, rows, then, &launch_feed_forward_norm);
  }
  // The out linear, LayerNorm1 and the feed-forward's: the ops' composition, or one kernel, which
  // reads the attention's bf16 output (written by the attention where the GEMM would read it)
  // and x, and writes x and its copy as add_norm does.
  void after_attention(const LayerView &w, int rows, Act act, const NormView *then) {
    if (ff_ != CudaFeedForward::Layer) {
      after_attention_unfused(*this, w, rows, act, then);
      return;
    }
    const uint16_t *att16 = bf16_of(b_.att, size_t(rows) * c_.d_model); // d_attn = d_model
    FeedForwardNorm f = feed_forward_of(w, act, then);
    f.wo = static_cast<const uint16_t *>(w.out.w);
    f.bo = w.out.b;
    f.norm1_w = w.norm1.w;
    f.norm1_b = w.norm1.b;
    fused(f, att16, rows, then, &launch_after_attention);
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
  // The fused kernels' weights: the layer's feed-forward block and its norm (then where given).
  FeedForwardNorm feed_forward_of(const LayerView &w, Act act, const NormView *then) const {
    FeedForwardNorm f;
    f.w1 = static_cast<const uint16_t *>(w.ff1.w);
    f.w2 = static_cast<const uint16_t *>(w.ff2.w);
    f.b1 = w.ff1.b;
    f.b2 = w.ff2.b;
    f.d_model = c_.d_model;
    f.d_ff = c_.d_ff;
    f.act = act;
    f.norm_w = w.norm2.w;
    f.norm_b = w.norm2.b;
    f.then_w = then ? then->w : nullptr;
    f.then_b = then ? then->b : nullptr;
    return f;
  }
  // Where a LayerNorm of x writes (add_norm's, the fused kernels'): x in fp32, or null where after
  // the final norm x's one reader is the head and that reads bf16; x's copy for the bf16 GEMM after
  // it, or null where the kernels do not write GEMM inputs. The copy is x's current one from now.
  struct NormOut {
    float *x;
    uint16_t *x16;
  };
  NormOut norm_out(float *x, const NormView *then) {
    wrote(x);
    uint16_t *x16 = in_.written ? in_.x16 : nullptr;
    if (x16)
      copies_.x16 = x;
    const bool copy_only = then && x16 && w_.predictor.precision == Precision::Bf16;
    return {copy_only ? nullptr : x, x16};
  }
  // A fused kernel's launch over b.x from `in` (x16 or att16), writing as add_norm does.
  using FusedLaunch = void (*)(const FeedForwardNorm &, const float *, const uint16_t *, int,
                               float *, uint16_t *, cudaStream_t);
  void fused(const FeedForwardNorm &f, const uint16_t *in, int rows, const NormView *then,
             FusedLaunch launch) {
    const NormOut out = norm_out(b_.x, then);
    launch(f, b_.x, in, rows, out.x, out.x16, gpu_.stream);
  }
  // The bf16 form of x (n elements) for a GEMM: its current copy, else rounded into x16 by a pass.
  const uint16_t *bf16_of(const float *x, size_t n) {
    if (copies_.hid16 == x)
      return in_.hid16;
    if (copies_.x16 != x) {
      launch_round_bf16(x, in_.x16, n, gpu_.stream);
      copies_.x16 = x;
    }
    return in_.x16;
  }
  // y = act(x W^T + b) in fp32 with the bias in its own pass (an unfused bf16 GEMM), then rounded
  // into y16 by a pass: the bits of the epilogue's bf16 output (but for subnormals, gemm.h).
  void round_after(Gemm *gemm, const LinearWeights &l, const uint16_t *x16, float *y, int rows,
                   Act act, uint16_t *y16) {
    gemm->run(l.w, nullptr, Act::None, x16, y, l.in, l.out, rows);
    launch_bias_act(y, l.b, rows, l.out, act, gpu_.stream);
    launch_round_bf16(y, y16, size_t(rows) * l.out, gpu_.stream);
  }
  // `p` is written in fp32: a bf16 copy of it is no longer current.
  void wrote(const float *p) {
    if (copies_.x16 == p)
      copies_.x16 = nullptr;
    if (copies_.hid16 == p)
      copies_.hid16 = nullptr;
  }

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
  GemmInputs in_;
  struct {
    const float *x16 = nullptr, *hid16 = nullptr; // the fp32 buffer whose bf16 copy each holds
  } copies_;
  bool qkv16_ = false; // the last q,k,v GEMM wrote in_.qkv16, not b_.qkv
  bool positions_;
  CudaLayerNorm norm_;
  CudaFeedForward ff_;
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
      : model_(m), options_(o), graph_(k.get("graph", "on") == "on"),
        bf16_inputs_(bf16_inputs_path(k)), norm_(layernorm_path(k)), ff_(feed_forward_path(k)),
        gpu_((check_supported(m.config), gemm_inputs(o.precision)), gemm_path(k)),
        weights_(m.weights, o.precision) {
    if (ff_ != CudaFeedForward::Unfused)
      check_fused_feed_forward(m.config, o.precision, norm_, ff_);
    mark_bf16_outputs(weights_.view, m.config, bf16_outputs_path(k.get("bf16_outputs")));
    // every layer's GEMM algorithm chosen and checked at every batch size now, not at its first
    // call (gemm.h: Gemm::prepare)
    auto prepare = [&](const LinearWeights &l, Act act, Gemm::Output y = Gemm::Output::Fp32) {
      const bool int8 = l.precision == Precision::Int8; // the GEMM's shape: Int8Linear's
      if (Gemm *g = gpu_.gemm_for(l.precision))
        g->prepare(int8 ? int8_padded(l.in) : l.in, int8 ? int8_padded(l.out) : l.out, act, y);
    };
    for (const LayerView &l : weights_.view.layers) {
      prepare(l.qkv, Act::None);
      if (l.qkv.bf16_output)
        prepare(l.qkv, Act::None, Gemm::Output::Bf16);
      prepare(l.out, Act::None);
      prepare(l.ff1, m.config.activation);
      if (o.precision == Precision::Bf16 && bf16_inputs_ == CudaBf16Inputs::Written)
        prepare(l.ff1, m.config.activation, Gemm::Output::Bf16);
      prepare(l.ff2, Act::None);
    }
    prepare(weights_.view.predictor, Act::None);
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
    // the known leading bytes as rows of one pass (model/prefill.h), as on the CPU; --no-prefill:
    // step by step (CudaPrefill.CompletionsAsStepByStep compares the two on a GPU)
    const bool prefill = options_.prefill;
    const int pre_rows = prefill ? std::min(kPrefillRows, c.positions()) : 0;
    const size_t in_rows = size_t(std::max(batch, pre_rows));
    DeviceBlock scratch(gemm_inputs_bytes(options_.precision, in_rows, c),
                        std::string(name(options_.precision)) + " GEMM inputs");
    const GemmInputs in = gemm_inputs(scratch, options_.precision, in_rows, c,
                                      bf16_inputs_ == CudaBf16Inputs::Written);
    GpuOps ops(gpu_, c, weights_.view, mem.b, graph_, in, false, norm_, ff_);
    std::unique_ptr<DeviceBatch> pre_mem;
    std::unique_ptr<GpuOps> pre;
    if (prefill) {
      pre_mem = std::make_unique<DeviceBatch>(c, pre_rows, options_.state, 1);
      pre =
          std::make_unique<GpuOps>(gpu_, c, weights_.view, pre_mem->b, false, in, true, norm_, ff_);
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

  // The emulated device's counts since the last call (empty on a GPU).
  std::vector<KernelBytes> bytes_moved(double image_steps, double steps) override {
    return moved_since_last(image_steps, steps);
  }

private:
  const Model &model_;
  RunOptions options_;
  bool graph_;
  CudaBf16Inputs bf16_inputs_;
  CudaLayerNorm norm_;
  CudaFeedForward ff_;
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
  if (precision == Precision::Bf16 || precision == Precision::Int8)
    throw Error(std::string("CudaDecoder: fp32 or tf32 (") + name(precision) +
                " needs the GEMM inputs' scratch of a run)");
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
extern "C" const tarnn::BackendPlugin *tarnn_backend_plugin() {
  static const std::string version = std::string(tarnn::version()) + " " + tarnn::git_commit();
  static const tarnn::BackendPlugin api{tarnn::kPluginAbi, version.c_str(), "cuda",
                                        &tarnn::cuda_require_device,
                                        &tarnn::make_cuda_backend_here};
  return &api;
}
