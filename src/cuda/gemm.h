// Row-major Y [rows, out] = X [rows, in] W^T for the CUDA backend, with the same bytes for a row
// whatever `rows` is. cuBLAS picks its kernel per problem size: another batch size may get
// another tiling or a split over `in`, another order of summation, another rounding, and after
// hundreds of sampled positions other images (measured on an H100, docs/CUDA.md: 96.7% of the
// bytes of 12 images in batches of 5 matched one batch of 12). Here each (in, out) shape gets ONE
// cuBLASLt algorithm, chosen once at a reference row count with no split-K reduction, and that
// algorithm serves every row count: the order of summation of each output is then fixed by the
// kernel alone. The bias and a ReLU run in the GEMM's epilogue (y = relu(acc + b), the CPU's
// rounding): no pass of their own over y (9.9% of a step at batch 4,096 in fp32, by ncu on an
// H100). GELU stays in bias_act: cuBLASLt's is the tanh approximation, the model's the erf form.
// With bf16, W and X are bfloat16 (CUDA_R_16BF, rounded by kernels/round_bf16.h) and the products
// are summed in fp32 on tensor cores (CUBLAS_COMPUTE_32F); Y is fp32, or bf16 where the one
// reader of Y is another bf16 GEMM (Output::Bf16: cuBLASLt rounds the epilogue's fp32 result to
// nearest even, the rounding that GEMM's input would get from kernels/round_bf16.h but for
// subnormals, which cuBLASLt keeps and bf16_bits flushes to zero; the bias it adds is bf16, Y's
// type, the only one cuBLASLt takes for it, so a bf16 layer's bias is rounded to bf16 whatever
// its output: kernels/gemm_ref.h's bf16_bias). With int8,
// W and X are int8 (CUDA_R_8I, quantized by kernels/int8_rows.h's rule) and Y is their exact int32
// sums (CUBLAS_COMPUTE_32I): any algorithm gives the same, and the scaling to fp32 is
// kernels/int8_rows.h's own kernel, in the CPU's order (no epilogue here). cuBLASLt takes int8 only
// with in, out and the leading dimensions multiples of 4: the caller pads (int8_padded).
#pragma once

#include <cstdint>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <map>
#include <tuple>

#include "tarnn/config.h"

namespace tarnn {

class Gemm {
public:
  enum class Inputs { Fp32, Tf32, Bf16, Int8 };
  // Y's type: Bf16 with Inputs::Bf16 only; with Inputs::Int8, Fp32's place holds int32 sums
  enum class Output { Fp32, Bf16 };
  // `workspace` (`workspace_bytes`) is the kernels' scratch: allocated up front, since nothing
  // may be allocated while a graph is captured. Tf32: TF32 tensor cores
  // (CUBLAS_COMPUTE_32F_FAST_TF32); Bf16: W and X in bfloat16, fp32 sums. fuse: bias and ReLU in
  // the epilogue (off: to compare).
  Gemm(cudaStream_t stream, void *workspace, size_t workspace_bytes, Inputs inputs, bool fuse);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;

  // Whether run() applies bias `b` and `act` itself; else the caller does.
  bool fuses(Act act) const {
    return fuse_ && input_type_ != CUDA_R_8I && (act == Act::None || act == Act::Relu);
  }

  // Y [rows, out] = X [rows, in] W^T (+ b, then act, where b and fuses(act)); W [out, in] row-major
  // (PyTorch's layout), b [out] in Y's type. W and X are float, or uint16_t bfloat16 bits with
  // Bf16, or int8_t with Int8, when Y is int32_t; Y float, or bfloat16 bits with Output::Bf16.
  void run(const void *w, const void *b, Act act, const void *x, void *y, int in, int out, int rows,
           Output y_type = Output::Fp32);

  // Chooses, at start-up, the algorithm of an (in, out) layer for every epilogue `act` may take:
  // one that cuBLASLt accepts at 1, 5, 12, 4,096 and 2^20 rows (kCheckRows), so that no batch
  // size fails at its first GEMM. Where none is accepted at every one, the layer falls back to
  // cuBLASLt's own choice per row count, saying so once on stderr (its bytes may then depend on
  // the batch size).
  void prepare(int in, int out, Act act, Output y_type = Output::Fp32);

private:
  enum Epilogue { Plain, Bias, ReluBias, kEpilogues };
  static constexpr int kOutputs = 2;
  const cublasLtMatmulAlgo_t &algo(Output y, Epilogue e, int in, int out, int rows);
  int candidates(Output y, Epilogue e, int in, int out, int rows,
                 cublasLtMatmulHeuristicResult_t *found, int most);
  void release();
  cudaDataType_t y_type(Output y) const; // Y's data type, and its scale type where int32

  cudaStream_t stream_;
  void *workspace_;
  size_t workspace_bytes_;
  cublasComputeType_t compute_;
  cudaDataType_t input_type_; // of W and X
  bool fuse_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_[kOutputs][kEpilogues] =
      {}; // [Output][Epilogue]; Bf16's with Bf16 inputs
  std::map<std::tuple<int, int, int, int>, cublasLtMatmulAlgo_t> algos_; // (y, epilogue, in, out)
  // the fallback: (y, epilogue, in, out, rows) for a layer no one algorithm serves at every size
  std::map<std::tuple<int, int, int, int, int>, cublasLtMatmulAlgo_t> per_size_;
};

} // namespace tarnn
