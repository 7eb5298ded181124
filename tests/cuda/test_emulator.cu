// The emulated device itself (src/cuda/emulator; built with -DTARNN_CUDA_EMULATOR=ON only): that
// it refuses what a GPU refuses with CUDA's error codes, that its barriers and shuffles have
// CUDA's meaning, that its checks stop a racing, overrunning or wandering kernel naming it, that
// graphs capture and replay, that its cuBLASLt stand-in computes and refuses as documented, and
// that it counts the bytes a kernel moves. The kernels here are written for these checks; the
// backend's own run in the GPU suites.
#include <cmath>
#include <cstring>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <functional>
#include <gtest/gtest.h>
#include <mma.h>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda_util.h"
#include "kernels/gemm_ref.h"
#include "src/cuda/emulator/emulator.h"

// AddressSanitizer's runtime, where the build has it (this file's own instrumentation is the
// emulator's in either build, so __SANITIZE_ADDRESS__ does not tell).
extern "C" void __asan_init() __attribute__((weak));

using namespace tarnn;

namespace {

// ---- kernels
// ---------------------------------------------------------------------------------------

// out[t] = in[t + 1] of the block's threads, through shared memory, with or without the barrier.
__global__ void rotate_kernel(const float *in, float *out, bool barrier) {
  TARNN_DYNAMIC_SHARED(float, s);
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = in[blockIdx.x * n + t];
  if (barrier)
    __syncthreads();
  out[blockIdx.x * n + t] = s[(t + 1) % n];
}

// Every thread of every block writes out[0].
__global__ void all_write_kernel(float *out) { out[0] = float(threadIdx.x); }

// Thread t reads shared word t + extra (past the end when extra > 0).
__global__ void shared_reach_kernel(float *out, int extra) {
  TARNN_DYNAMIC_SHARED(float, s);
  s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x + extra];
}

// A warp's sum by butterfly, as residual_layernorm_kernel's warp_sum.
__global__ void __launch_bounds__(64) warp_sum_kernel(const float *in, float *out) {
  float v = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

// Lane 0 leaves before the shuffle the others wait in.
__global__ void early_exit_kernel(float *out) {
  if (threadIdx.x == 0)
    return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// Half a warp waits at a barrier, the other half in a shuffle with it: neither can go on.
__global__ void deadlock_kernel(float *out) {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// *p += 1 (the step of a graph replayed).
__global__ void increment_kernel(int *p) { *p += 1; }

// out[i] = in[i] + in[i] (each float read twice, written once), grid-stride.
__global__ void double_kernel(const float *in, float *out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = in[i] + in[i];
}

// Reads shared memory no thread of the block wrote.
__global__ void uninitialised_kernel(float *out) {
  TARNN_DYNAMIC_SHARED(float, s);
  out[threadIdx.x] = s[threadIdx.x];
}

// ---- helpers
// ---------------------------------------------------------------------------------------

// A fresh device (the checks below fault it on purpose).
struct Emulator : ::testing::Test {
  void SetUp() override { cudaDeviceReset(); }
  void TearDown() override { cudaDeviceReset(); }
};

// The error a launch left, and what cudaGetErrorString says of it.
std::string last_error(cudaError_t want) {
  const cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, want) << cudaGetErrorString(e);
  return cudaGetErrorString(e);
}

// The fault a run left (every call returns it now).
std::string fault(cudaError_t want) {
  const cudaError_t e = cudaDeviceSynchronize();
  EXPECT_EQ(e, want) << cudaGetErrorString(e);
  return cudaGetErrorString(e);
}

bool has(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// An overrun the run makes is an illegal address the emulated device names (`says`), or, under
// AddressSanitizer, ASan's own report (the run then goes in a child process).
void expect_overrun(const std::function<cudaError_t()> &run, const std::string &says) {
  if (&__asan_init) {
    EXPECT_DEATH(run(), "heap-buffer-overflow");
    return;
  }
  EXPECT_EQ(run(), cudaErrorIllegalAddress);
  EXPECT_TRUE(has(cudaGetErrorString(cudaErrorIllegalAddress), says));
}

} // namespace

// ---- what a GPU refuses at the launch
// --------------------------------------------------------------

TEST_F(Emulator, RefusesLaunchesAsAGpuDoes) {
  DeviceArray<float> in(std::vector<float>(2048, 1.0f)), out(2048);
  TARNN_LAUNCH(rotate_kernel, 1, 1025, 1025 * 4, nullptr)(in.get(), out.get(), true);
  EXPECT_TRUE(has(last_error(cudaErrorInvalidConfiguration), "1025"));
  TARNN_LAUNCH(rotate_kernel, dim3(1, 65536), 32, 128, nullptr)(in.get(), out.get(), true);
  last_error(cudaErrorInvalidConfiguration);
  TARNN_LAUNCH(rotate_kernel, 0, 32, 128, nullptr)(in.get(), out.get(), true);
  last_error(cudaErrorInvalidConfiguration);
  TARNN_LAUNCH(rotate_kernel, 1, dim3(8, 8, 65), 0, nullptr)(in.get(), out.get(), true);
  last_error(cudaErrorInvalidConfiguration);
  // __launch_bounds__(64): 96 threads are more than the kernel was compiled for
  TARNN_LAUNCH(warp_sum_kernel, 1, 96, 0, nullptr)(in.get(), out.get());
  EXPECT_TRUE(has(last_error(cudaErrorLaunchOutOfResources), "__launch_bounds__ allow 64"));
  TARNN_LAUNCH(warp_sum_kernel, 1, 64, 0, nullptr)(in.get(), out.get());
  last_error(cudaSuccess);
  // 48 KB of dynamic shared memory without asking, more with cudaFuncSetAttribute, up to 227 KB
  TARNN_LAUNCH(rotate_kernel, 1, 32, 49152 + 4, nullptr)(in.get(), out.get(), true);
  EXPECT_TRUE(has(last_error(cudaErrorInvalidValue), "cudaFuncSetAttribute"));
  EXPECT_EQ(
      cudaFuncSetAttribute(rotate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 232448 + 4),
      cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaFuncSetAttribute(rotate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536),
            cudaSuccess);
  TARNN_LAUNCH(rotate_kernel, 1, 32, 49152 + 4, nullptr)(in.get(), out.get(), true);
  last_error(cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- barriers and shuffles
// ---------------------------------------------------------------------------

TEST_F(Emulator, BarriersOrderABlocksThreads) {
  std::vector<float> v(256);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float(i);
  DeviceArray<float> in(v), out(v.size());
  TARNN_LAUNCH(rotate_kernel, 2, 128, 128 * 4, nullptr)(in.get(), out.get(), true);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = out.download();
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 128; ++t)
      ASSERT_EQ(got[size_t(b * 128 + t)], float(b * 128 + (t + 1) % 128));
}

// The butterfly gives every lane the same sum, the sum of that order: (x_l + x_l^16) + ... .
TEST_F(Emulator, ShufflesExchangeWithinAWarp) {
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 1.0f / float(i + 3);
  DeviceArray<float> in(v), out(v.size());
  TARNN_LAUNCH(warp_sum_kernel, 1, 64, 0, nullptr)(in.get(), out.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = out.download();
  for (int w = 0; w < 2; ++w) {
    std::vector<float> lane(v.begin() + 32 * w, v.begin() + 32 * w + 32);
    for (int offset = 16; offset > 0; offset /= 2) {
      std::vector<float> next(32);
      for (int l = 0; l < 32; ++l)
        next[size_t(l)] = lane[size_t(l)] + lane[size_t(l ^ offset)];
      lane = next;
    }
    for (int l = 0; l < 32; ++l)
      ASSERT_EQ(got[size_t(32 * w + l)], lane[size_t(l)]) << "warp " << w << " lane " << l;
  }
}

TEST_F(Emulator, AShuffleALaneLeftIsAFault) {
  DeviceArray<float> out(32);
  TARNN_LAUNCH(early_exit_kernel, 1, 32, 0, nullptr)(out.get());
  EXPECT_TRUE(has(fault(cudaErrorLaunchFailure), "early_exit_kernel"));
}

TEST_F(Emulator, ThreadsWaitingForEachOtherForEverAreAFault) {
  DeviceArray<float> out(32);
  TARNN_LAUNCH(deadlock_kernel, 1, 32, 0, nullptr)(out.get());
  const std::string why = fault(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(why, "threads 0-15 at __syncthreads")) << why;
  EXPECT_TRUE(has(why, "at __shfl_xor_sync")) << why;
}

// ---- the race check and the memory checks
// --------------------------------------------------------

TEST_F(Emulator, ARemovedBarrierIsARaceNamingTheKernelAndBothThreads) {
  DeviceArray<float> in(std::vector<float>(64, 1.0f)), out(64);
  TARNN_LAUNCH(rotate_kernel, 1, 64, 64 * 4, nullptr)(in.get(), out.get(), false);
  const std::string why = fault(cudaErrorLaunchFailure);
  EXPECT_TRUE(has(why, "rotate_kernel")) << why;
  // thread 0 runs first and reads word 1 before thread 1 writes it: the write is the race
  EXPECT_TRUE(has(why, "thread (1, 0, 0) of block (0, 0, 0) races: it writes shared memory byte 4 "
                       "(of 256), which thread (0, 0, 0) of block (0, 0, 0) read with no "
                       "__syncthreads between"))
      << why;
  // a faulted device runs nothing more, as a GPU after a fault
  EXPECT_EQ(cudaMemset(out.get(), 0, 4), cudaErrorLaunchFailure);
}

TEST_F(Emulator, TwoBlocksWritingOneWordRace) {
  DeviceArray<float> out(1);
  TARNN_LAUNCH(all_write_kernel, 1, 1, 0, nullptr)(out.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); // one thread: no race
  TARNN_LAUNCH(all_write_kernel, 2, 1, 0, nullptr)(out.get());
  EXPECT_TRUE(has(fault(cudaErrorLaunchFailure), "a thread of another block wrote"));
}

TEST_F(Emulator, ReadingSharedMemoryNoThreadWroteIsAFault) {
  DeviceArray<float> out(32);
  TARNN_LAUNCH(uninitialised_kernel, 1, 32, 128, nullptr)(out.get());
  EXPECT_TRUE(has(fault(cudaErrorLaunchFailure), "which no thread of its block had written"));
}

// Shared memory is exactly what the launch asked for: one word past it is an overrun (under
// AddressSanitizer, ASan's own report: this test then runs in a child process).
TEST_F(Emulator, SharedMemoryIsExactlyTheSizeAsked) {
  DeviceArray<float> out(32);
  TARNN_LAUNCH(shared_reach_kernel, 1, 32, 32 * 4, nullptr)(out.get(), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_overrun(
      [&] {
        TARNN_LAUNCH(shared_reach_kernel, 1, 32, 32 * 4, nullptr)(out.get(), 1);
        return cudaDeviceSynchronize();
      },
      "0 bytes past the end of its block's 128 bytes");
}

// So is device memory: a read one float past an allocation is an illegal address (ASan's report
// under AddressSanitizer).
TEST_F(Emulator, DeviceMemoryIsExactlyTheSizeAsked) {
  DeviceArray<float> in(std::vector<float>(100, 1.0f)), out(101);
  expect_overrun(
      [&] {
        TARNN_LAUNCH(double_kernel, 1, 128, 0, nullptr)(in.get(), out.get(), 101);
        return cudaDeviceSynchronize();
      },
      "reads 4 bytes 0 bytes past the end of a 400-byte device allocation");
}

TEST_F(Emulator, AHostPointerInAKernelIsAnIllegalAddress) {
  std::vector<float> host(64, 1.0f), host_out(64);
  TARNN_LAUNCH(double_kernel, 1, 64, 0, nullptr)(host.data(), host_out.data(), 64);
  EXPECT_TRUE(has(fault(cudaErrorIllegalAddress), "a host pointer?"));
}

// ---- memory, streams and graphs
// --------------------------------------------------------------------

TEST_F(Emulator, HasAnH100sMemoryOrTheStatedSize) {
  size_t free_b = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total), cudaSuccess);
  EXPECT_EQ(total, size_t(81559) << 20);
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, total + 1), cudaErrorMemoryAllocation);
  cudaGetLastError();
  setenv("TARNN_EMULATED_GPU_MEMORY", "2GB", 1);
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total), cudaSuccess);
  EXPECT_EQ(total, size_t(2000000000));
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total), cudaSuccess);
  EXPECT_EQ(free_b, total - 1000);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  setenv("TARNN_EMULATED_GPU_MEMORY", "lots", 1);
  int count = 1;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  EXPECT_TRUE(has(cudaGetErrorString(cudaErrorNoDevice), "is not a size"));
  unsetenv("TARNN_EMULATED_GPU_MEMORY");
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_TRUE(has(prop.name, "emulated"));
}

TEST_F(Emulator, CopiesStayInsideTheirAllocations) {
  DeviceArray<float> a(16);
  std::vector<float> host(17);
  EXPECT_EQ(cudaMemcpy(a.get(), host.data(), 17 * 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(a.get(), host.data(), 16 * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy2DAsync(host.data(), 4, a.get(), 8, 8, 2, cudaMemcpyDeviceToHost, nullptr),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaFree(a.get() + 1), cudaErrorInvalidValue);
  cudaGetLastError();
}

// A captured step is recorded, not run; each replay runs it; what a capture forbids ends it.
TEST_F(Emulator, GraphsCaptureAndReplay) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<int> counter(std::vector<int>{0});
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  TARNN_LAUNCH(increment_kernel, 1, 1, 0, s)(counter.get());
  TARNN_LAUNCH(increment_kernel, 1, 1, 0, s)(counter.get());
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(counter.download()[0], 0);
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 2u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(counter.download()[0], 6);
  // cudaMalloc (and a synchronisation) during a capture: refused, and the capture invalidated
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t broken = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &broken), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(broken, nullptr);
  cudaGetLastError();
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  cudaGetLastError();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// ---- the bytes counted
// ---------------------------------------------------------------------------

// A kernel reading each of n floats twice and writing n: 4n bytes read, 4n written; by name.
TEST_F(Emulator, CountsTheDistinctBytesAKernelMoves) {
  const int n = 1000;
  DeviceArray<float> in(std::vector<float>(n, 1.5f)), out(n);
  tarnn_emu::label_memory(in.get(), n * 4, "state");
  tarnn_emu::reset_traffic();
  TARNN_LAUNCH(double_kernel, 3, 128, 0, nullptr)(in.get(), out.get(), n);
  TARNN_LAUNCH(double_kernel, 3, 128, 0, nullptr)(in.get(), out.get(), n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<tarnn_emu::Traffic> t = tarnn_emu::traffic();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].name, "double_kernel");
  EXPECT_EQ(t[0].launches, 2u);
  EXPECT_EQ(t[0].all.read, 2u * n * 4);
  EXPECT_EQ(t[0].all.written, 2u * n * 4);
  EXPECT_EQ(t[0].labelled.at("state").read, 2u * n * 4);
  EXPECT_EQ(t[0].labelled.at("other").written, 2u * n * 4);
  EXPECT_EQ(out.download()[n - 1], 3.0f);
}

// ---- the cuBLASLt stand-in
// -------------------------------------------------------------------------

namespace {

// D = op(A) op(B) with cuBLASLt as the backend's Gemm calls it, or its refusal.
struct Matmul {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cudaDataType_t type = CUDA_R_32F; // A's and B's (int8: D int32)
  Matmul(cublasComputeType_t compute, cublasOperation_t ta, cublasOperation_t tb) {
    cublasLtCreate(&lt);
    cublasLtMatmulDescCreate(&op, compute, compute == CUBLAS_COMPUTE_32I ? CUDA_R_32I : CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  }
  ~Matmul() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
  }
  void layouts(cudaDataType_t t, uint64_t ar, uint64_t ac, int64_t lda, uint64_t br, uint64_t bc,
               int64_t ldb, uint64_t dr, uint64_t dc, int64_t ldd, cudaDataType_t dt = CUDA_R_32F) {
    type = t;
    cublasLtMatrixLayoutCreate(&a, t, ar, ac, lda);
    cublasLtMatrixLayoutCreate(&b, t, br, bc, ldb);
    cublasLtMatrixLayoutCreate(&d, t == CUDA_R_8I ? CUDA_R_32I : dt, dr, dc, ldd);
  }
  cublasStatus_t run(const void *A, const void *B, void *D, const cublasLtMatmulAlgo_t *algo) {
    const float one = 1, zero = 0;
    const int32_t int_one = 1, int_zero = 0; // int8's scale type is int32
    const bool ints = type == CUDA_R_8I;
    return cublasLtMatmul(lt, op, ints ? static_cast<const void *>(&int_one) : &one, A, a, B, b,
                          ints ? static_cast<const void *>(&int_zero) : &zero, D, d, D, d, algo,
                          nullptr, 0, nullptr);
  }
  cublasStatus_t heuristic(cublasLtMatmulAlgo_t &algo) {
    cublasLtMatmulHeuristicResult_t r[2];
    int n = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, nullptr, 2, r, &n);
    if (s == CUBLAS_STATUS_SUCCESS)
      algo = r[0].algo;
    return s;
  }
};

} // namespace

// The backend's layout (Y^T = W X^T: A = W, T; B = X, N) with padded leading dimensions: each
// element the fma chain over k ascending, then the bias and ReLU, as the CPU's reference GEMM.
TEST_F(Emulator, CublasLtIsTheReferenceGemmInTheBackendsLayout) {
  const int in = 37, out = 11, rows = 5, ldw = 40, ldx = 39;
  std::vector<float> w(size_t(out) * ldw), x(size_t(rows) * ldx), bias(out);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = std::sin(float(i)) * 0.5f;
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::cos(float(i) * 0.7f);
  for (int j = 0; j < out; ++j)
    bias[size_t(j)] = 0.1f * float(j) - 0.5f;
  DeviceArray<float> dw(w), dx(x), db(bias), dy(size_t(rows) * out);
  Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
  mm.layouts(CUDA_R_32F, in, out, ldw, in, rows, ldx, out, rows, out);
  const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_RELU_BIAS;
  const float *bp = db.get();
  cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
  cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
  cublasLtMatmulAlgo_t algo;
  ASSERT_EQ(mm.heuristic(algo), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(mm.run(dw.get(), dx.get(), dy.get(), &algo), CUBLAS_STATUS_SUCCESS);
  std::vector<float> packed(size_t(out) * in), want(size_t(rows) * out);
  for (int j = 0; j < out; ++j)
    std::copy(w.begin() + j * ldw, w.begin() + j * ldw + in, packed.begin() + j * in);
  linear_forward_ref(packed.data(), bias.data(), out, in, x.data(), ldx, rows, want.data(), out,
                     Act::Relu);
  EXPECT_EQ(dy.download(), want);
}

// What cuBLASLt documents as refused, refused with its status.
TEST_F(Emulator, CublasLtRefusesWhatCublasLtRefuses) {
  DeviceArray<float> w(64 * 64), x(64 * 64), y(64 * 64);
  cublasLtMatmulAlgo_t algo;
  { // a leading dimension below the rows
    Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_32F, 16, 8, 15, 16, 4, 16, 8, 4, 8);
    EXPECT_EQ(mm.heuristic(algo), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(mm.run(w.get(), x.get(), y.get(), nullptr), CUBLAS_STATUS_INVALID_VALUE);
  }
  { // shapes that do not multiply
    Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_32F, 16, 8, 16, 15, 4, 16, 8, 4, 8);
    EXPECT_EQ(mm.heuristic(algo), CUBLAS_STATUS_INVALID_VALUE);
  }
  { // TF32 compute takes fp32 inputs only
    Matmul mm(CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_16BF, 16, 8, 16, 16, 4, 16, 8, 4, 8);
    EXPECT_EQ(mm.heuristic(algo), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  { // a bias epilogue without a bias
    Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_32F, 16, 8, 16, 16, 4, 16, 8, 4, 8);
    const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    EXPECT_EQ(mm.heuristic(algo), CUBLAS_STATUS_SUCCESS); // the heuristic needs no pointer
    EXPECT_EQ(mm.run(w.get(), x.get(), y.get(), &algo), CUBLAS_STATUS_INVALID_VALUE);
  }
  for (int bias_type : {-1, int(CUDA_R_16BF), int(CUDA_R_32F)}) { // bf16 D: its bias bf16
    Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_16BF, 16, 8, 16, 16, 4, 16, 8, 4, 8, CUDA_R_16BF);
    const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_RELU_BIAS;
    cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    if (bias_type >= 0)
      cublasLtMatmulDescSetAttribute(mm.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                     sizeof bias_type);
    EXPECT_EQ(mm.heuristic(algo),
              bias_type == CUDA_R_32F ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS)
        << "bias type " << bias_type;
  }
  { // an algorithm chosen for 16-byte aligned columns, run on a pointer 4 bytes off
    Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_32F, 16, 8, 16, 16, 4, 16, 8, 4, 8);
    ASSERT_EQ(mm.heuristic(algo), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(mm.run(w.get(), x.get() + 1, y.get(), &algo), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(mm.run(w.get(), x.get(), y.get(), &algo), CUBLAS_STATUS_SUCCESS);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  { // an operand reaching past its allocation: the GEMM's kernel faults, as on a GPU
    Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_32F, 64, 64, 64, 64, 65, 64, 64, 65, 64);
    EXPECT_EQ(mm.run(w.get(), x.get(), y.get(), nullptr), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(has(fault(cudaErrorIllegalAddress), "runs past the end of its allocation"));
  }
}

// int8 (COMPUTE_32I) as cuBLASLt's IMMA kernels take it on column-major layouts: m and k, and the
// leading dimensions of A, B and C, multiples of 4, every pointer 4-byte aligned; the rest is
// NOT_SUPPORTED (an H100 refused the small golden's 16 -> 54 layer so at the heuristic).
TEST_F(Emulator, CublasLtTakesInt8AsItsImmaKernelsDo) {
  DeviceArray<int8_t> w(64 * 64), x(64 * 64);
  DeviceArray<int32_t> y(64 * 64);
  cublasLtMatmulAlgo_t algo;
  struct Shape {
    int in, out, ldw, ldx, ldy; // k, m and the leading dimensions of W (A), X (B) and Y (C, D)
    cublasStatus_t want;
  };
  for (const Shape &s : {Shape{16, 56, 16, 16, 56, CUBLAS_STATUS_SUCCESS},
                         Shape{16, 54, 16, 16, 54, CUBLAS_STATUS_NOT_SUPPORTED},    // m
                         Shape{18, 16, 18, 18, 16, CUBLAS_STATUS_NOT_SUPPORTED},    // k
                         Shape{16, 16, 18, 16, 16, CUBLAS_STATUS_NOT_SUPPORTED},    // lda
                         Shape{16, 16, 16, 18, 16, CUBLAS_STATUS_NOT_SUPPORTED},    // ldb
                         Shape{16, 16, 16, 16, 18, CUBLAS_STATUS_NOT_SUPPORTED}}) { // ldc
    // (not std::to_string: its inline helpers, instantiated in this instrumented file, would be
    // the ones the emulator's own calls link to, and check accesses outside a kernel)
    SCOPED_TRACE(::testing::Message() << s.in << " -> " << s.out);
    Matmul mm(CUBLAS_COMPUTE_32I, CUBLAS_OP_T, CUBLAS_OP_N);
    mm.layouts(CUDA_R_8I, s.in, s.out, s.ldw, s.in, 3, s.ldx, s.out, 3, s.ldy);
    EXPECT_EQ(mm.heuristic(algo), s.want);
    EXPECT_EQ(mm.run(w.get(), x.get(), y.get(), nullptr), s.want);
  }
  Matmul mm(CUBLAS_COMPUTE_32I, CUBLAS_OP_T, CUBLAS_OP_N);
  mm.layouts(CUDA_R_8I, 16, 8, 16, 16, 3, 20, 8, 3, 8); // X's columns 20 bytes apart: 4-aligned
  EXPECT_EQ(mm.run(w.get(), x.get() + 2, y.get(), nullptr), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(mm.run(w.get(), x.get() + 4, y.get(), nullptr), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// bf16 inputs: their products are exact in fp32, summed in one chain.
TEST_F(Emulator, CublasLtSumsBf16ProductsInFp32) {
  const int k = 300;
  std::vector<uint16_t> a(k), b(k);
  double exact = 0;
  float chain = 0;
  for (int i = 0; i < k; ++i) {
    a[size_t(i)] = bf16_bits(std::sin(float(i)));
    b[size_t(i)] = bf16_bits(std::cos(float(i) * 1.3f));
    exact += double(from_bf16(a[size_t(i)])) * from_bf16(b[size_t(i)]);
    chain = std::fma(from_bf16(a[size_t(i)]), from_bf16(b[size_t(i)]), chain);
  }
  DeviceArray<uint16_t> da(a), db(b);
  DeviceArray<float> dy(1);
  Matmul mm(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);
  mm.layouts(CUDA_R_16BF, k, 1, k, k, 1, k, 1, 1, 1);
  ASSERT_EQ(mm.run(da.get(), db.get(), dy.get(), nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dy.download()[0], chain);
  EXPECT_NEAR(dy.download()[0], exact, 1e-5);
}

// Neighbours in one word: each thread reads and writes its own 2 bytes (a 16-bit state's
// columns): no race.
__global__ void halves_kernel(uint16_t *p) {
  const int j = threadIdx.x;
  p[j] = uint16_t(p[j] + 1);
}

TEST_F(Emulator, ThreadsSharingAWordByHalvesDoNotRace) {
  DeviceArray<uint16_t> p(std::vector<uint16_t>(8, 1));
  TARNN_LAUNCH(halves_kernel, 1, 8, 0, nullptr)(p.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaDeviceSynchronize());
  EXPECT_EQ(p.download(), std::vector<uint16_t>(8, 2));
}

// ---- tensor cores (mma.h)
// ------------------------------------------------------------------------------

namespace wmma = nvcuda::wmma;

namespace {

using BTile = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using BTileRows = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;

// Y = X W^T, X [rows, in] and W [out, in] in bf16 and Y [rows, out] in fp32, all row-major: a warp
// a 16 x 16 tile of Y, its k-tiles chained in ascending order into one accumulator. W is B in
// column-major (W^T's columns are W's rows) or, with `w_t`, W^T [in, out] given row-major; with
// `y_t` Y is stored column-major (Y^T [out, rows]).
template <class B>
__global__ void wmma_gemm_kernel(const __nv_bfloat16 *x, const __nv_bfloat16 *w, float *y, int rows,
                                 int in, int out, bool y_t) {
  const int tile = threadIdx.x / 32, tiles_n = out / 16;
  const int r0 = tile / tiles_n * 16, n0 = tile % tiles_n * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  B b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < in; k0 += 16) {
    wmma::load_matrix_sync(a, x + r0 * in + k0, in);
    if (std::is_same<B, BTile>::value)
      wmma::load_matrix_sync(b, w + n0 * in + k0, in);
    else
      wmma::load_matrix_sync(b, w + k0 * out + n0, out);
    wmma::mma_sync(acc, a, b, acc);
  }
  if (y_t)
    wmma::store_matrix_sync(y + n0 * rows + r0, acc, rows, wmma::mem_col_major);
  else
    wmma::store_matrix_sync(y + r0 * out + n0, acc, out, wmma::mem_row_major);
}

// One warp loads the 16 x 16 bf16 tile at p (rows ldm apart) and writes each lane's sum of its
// share; `skip` leaves lane `skip` out of the call (it exits), `other` has lane `other` pass the
// tile's next row.
__global__ void wmma_load_kernel(const __nv_bfloat16 *p, unsigned ldm, float *sums, int skip,
                                 int other) {
  const int lane = threadIdx.x;
  if (lane == skip)
    return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::load_matrix_sync(a, lane == other ? p + ldm : p, ldm);
  float s = 0;
  for (int i = 0; i < a.num_elements; ++i)
    s += __bfloat162float(a.x[i]);
  sums[lane] = s;
}

// One warp stores an accumulator of v into the 16 x 16 fp32 tile at p (rows ldm apart).
__global__ void wmma_store_kernel(float *p, unsigned ldm, float v) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, v);
  wmma::store_matrix_sync(p, acc, ldm, wmma::mem_row_major);
}

std::vector<uint16_t> bf16_values(size_t n, float scale) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = bf16_bits(std::sin(float(i) * scale) * 2.0f);
  return v;
}

std::vector<float> widened(const std::vector<uint16_t> &v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    f[i] = from_bf16(v[i]);
  return f;
}

} // namespace

// A 32 x 48 by 48 x 32 product on tensor cores is the reference GEMM to the bit (mma_sync's fma
// chain over k ascending is linear_forward_ref's), with W^T in either layout and Y stored in
// either; each operand's bytes counted once.
TEST_F(Emulator, TensorCoresAreTheReferenceGemm) {
  const int rows = 32, in = 48, out = 32;
  const std::vector<uint16_t> x = bf16_values(size_t(rows) * in, 0.37f),
                              w = bf16_values(size_t(out) * in, 0.91f);
  std::vector<float> want(size_t(rows) * out);
  linear_forward_ref(widened(w).data(), nullptr, out, in, widened(x).data(), in, rows, want.data(),
                     out, Act::None);
  std::vector<uint16_t> w_t(w.size()); // W^T [in, out], row-major
  for (int j = 0; j < out; ++j)
    for (int k = 0; k < in; ++k)
      w_t[size_t(k) * out + j] = w[size_t(j) * in + k];
  DeviceArray<uint16_t> dx(x), dw(w), dw_t(w_t);
  DeviceArray<float> dy(want.size());
  const auto *bx = reinterpret_cast<const __nv_bfloat16 *>(dx.get());
  tarnn_emu::reset_traffic();
  TARNN_LAUNCH(wmma_gemm_kernel<BTile>, 1, 4 * 32, 0, nullptr)
  (bx, reinterpret_cast<const __nv_bfloat16 *>(dw.get()), dy.get(), rows, in, out, false);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaDeviceSynchronize());
  EXPECT_EQ(dy.download(), want);
  const std::vector<tarnn_emu::Traffic> t = tarnn_emu::traffic();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].all.read, 2u * rows * in * 2); // X and W, 2 bytes an element, each byte once
  EXPECT_EQ(t[0].all.written, 4u * rows * out);
  // W^T row-major, Y column-major: Y^T
  TARNN_LAUNCH(wmma_gemm_kernel<BTileRows>, 1, 4 * 32, 0, nullptr)
  (bx, reinterpret_cast<const __nv_bfloat16 *>(dw_t.get()), dy.get(), rows, in, out, true);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaDeviceSynchronize());
  const std::vector<float> got_t = dy.download();
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j)
      ASSERT_EQ(got_t[size_t(j) * rows + r], want[size_t(r) * out + j]) << r << ", " << j;
}

// load_matrix_sync of a 16 x 16 bf16 tile whose rows are 24 elements apart reads its 512 bytes
// (not the 768 its rows span, nor 32 times 512: each lane its share); store_matrix_sync of an fp32
// tile writes its 1,024.
TEST_F(Emulator, TensorCoreTilesCountTheirBytesOnce) {
  const unsigned ldm = 24;
  const std::vector<uint16_t> v = bf16_values(16 * ldm, 0.5f);
  DeviceArray<uint16_t> tile(v);
  DeviceArray<float> sums(32), y(std::vector<float>(16 * ldm, -1.0f));
  tarnn_emu::reset_traffic();
  TARNN_LAUNCH(wmma_load_kernel, 1, 32, 0, nullptr)
  (reinterpret_cast<const __nv_bfloat16 *>(tile.get()), ldm, sums.get(), -1, -1);
  TARNN_LAUNCH(wmma_store_kernel, 1, 32, 0, nullptr)(y.get(), ldm, 2.5f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaDeviceSynchronize());
  const std::vector<tarnn_emu::Traffic> t = tarnn_emu::traffic();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "wmma_load_kernel");
  EXPECT_EQ(t[0].all.read, 512u);
  EXPECT_EQ(t[0].all.written, 32u * 4); // the sums
  EXPECT_EQ(t[1].all.read, 0u);
  EXPECT_EQ(t[1].all.written, 1024u);
  // every element of the tile was loaded by one lane: the lanes' sums add up to the tile's
  double total = 0, want = 0;
  for (float s : sums.download())
    total += s;
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      want += from_bf16(v[r * ldm + c]);
  EXPECT_NEAR(total, want, 1e-4);
  const std::vector<float> got = y.download();
  for (unsigned i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], i % ldm < 16 ? 2.5f : -1.0f) << i;
}

namespace {

// What wmma_load_kernel's launch over a 32 x 24 bf16 tile at element `offset` with `ldm`, lane
// `skip` leaving and lane `other` passing the next row, failed with (`want`), and why.
std::string wmma_load_fault(cudaError_t want, int offset, unsigned ldm, int skip, int other) {
  std::string why;
  {
    DeviceArray<uint16_t> tile(std::vector<uint16_t>(32 * 24, 0));
    DeviceArray<float> sums(32);
    TARNN_LAUNCH(wmma_load_kernel, 1, 32, 0, nullptr)
    (reinterpret_cast<const __nv_bfloat16 *>(tile.get()) + offset, ldm, sums.get(), skip, other);
    why = fault(want);
  }
  cudaDeviceReset();
  return why;
}

} // namespace

// A warp's collective call with a lane missing, or a lane passing another tile, fails the launch
// naming the kernel and the lane.
TEST_F(Emulator, ATensorCoreCallWithoutTheWholeWarpIsAFault) {
  std::string why = wmma_load_fault(cudaErrorLaunchFailure, 0, 16, 5, -1);
  EXPECT_TRUE(has(why, "wmma_load_kernel: thread (5, 0, 0) of block (0, 0, 0) exits while lanes "
                       "of its warp wait for it in wmma::load_matrix_sync"))
      << why;
  why = wmma_load_fault(cudaErrorLaunchFailure, 0, 16, -1, 3);
  EXPECT_TRUE(has(why, "wmma_load_kernel")) << why;
  EXPECT_TRUE(has(why, "lane 3 (thread (3, 0, 0) of block (0, 0, 0)) passed pointer")) << why;
}

// A tile's pointer 256-bit aligned, and ldm a multiple of 16 bytes, as a GPU requires.
TEST_F(Emulator, TensorCoresRefuseMisalignedTiles) {
  std::string why = wmma_load_fault(cudaErrorMisalignedAddress, 8, 16, -1, -1);
  EXPECT_TRUE(has(why, "wmma_load_kernel")) << why;
  EXPECT_TRUE(has(why, "with a pointer 16 bytes past a 32-byte boundary")) << why;
  why = wmma_load_fault(cudaErrorMisalignedAddress, 0, 20, -1, -1);
  EXPECT_TRUE(has(why, "with ldm 20: a multiple of 8 for 16-bit elements")) << why;
}

// Outside a kernel a warp's call has no warp: the process stops saying so.
TEST_F(Emulator, TensorCoreCallsOutsideAKernelAbort) {
  std::vector<uint16_t> host(256);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  EXPECT_DEATH(wmma::load_matrix_sync(a, reinterpret_cast<const __nv_bfloat16 *>(host.data()), 16),
               "wmma::load_matrix_sync outside a kernel");
}
