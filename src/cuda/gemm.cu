// gemm.h: one cuBLASLt algorithm per weight shape, whatever the batch.
#include "gemm.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "tarnn/error.h"

namespace tarnn {

namespace {

void lt_check(cublasStatus_t s, const char *call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(call) + ": " + cublasGetStatusString(s), Error::Kind::Runtime);
}

// Column-major, as cuBLAS sees it: Y^T (out x rows) = op(W) X^T, with W's [out, in] row-major
// storage read as an [in x out] column-major matrix and transposed.
struct Layouts {
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  Layouts(int in, int out, int rows, cudaDataType_t input, cudaDataType_t output) {
    lt_check(cublasLtMatrixLayoutCreate(&w, input, in, out, in), "cublasLtMatrixLayoutCreate");
    lt_check(cublasLtMatrixLayoutCreate(&x, input, in, rows, in), "cublasLtMatrixLayoutCreate");
    lt_check(cublasLtMatrixLayoutCreate(&y, output, out, rows, out), "cublasLtMatrixLayoutCreate");
  }
  ~Layouts() {
    cublasLtMatrixLayoutDestroy(w);
    cublasLtMatrixLayoutDestroy(x);
    cublasLtMatrixLayoutDestroy(y);
  }
  Layouts(const Layouts &) = delete;
  Layouts &operator=(const Layouts &) = delete;
};

// The algorithm is chosen where the heavy batches are; it must also run at one row and at the
// largest batch, else the next candidate is taken (and, with none left, Gemm::algo's fallback).
constexpr int kReferenceRows = 4096;
constexpr int kCheckRows[] = {1, 5, 12, 4096, 1 << 20};

cudaDataType_t data_type(Gemm::Output y) {
  return y == Gemm::Output::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

// One matmul's description: compute type, W transposed, the epilogue; Y's type, the bias's
// type left at cuBLASLt's default, Y's (the only one it takes for these inputs: cuBLASLt 13.1
// refused an fp32 bias for a bf16 Y on an H100); int32 Y scales in int32.
cublasLtMatmulDesc_t make_op(cublasComputeType_t compute, cublasLtEpilogue_t epilogue,
                             cudaDataType_t y) {
  cublasLtMatmulDesc_t op = nullptr;
  lt_check(cublasLtMatmulDescCreate(&op, compute, y == CUDA_R_32I ? CUDA_R_32I : CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  try {
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t),
             "cublasLtMatmulDescSetAttribute");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n),
             "cublasLtMatmulDescSetAttribute");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                            sizeof epilogue),
             "cublasLtMatmulDescSetAttribute");
  } catch (...) {
    cublasLtMatmulDescDestroy(op);
    throw;
  }
  return op;
}

} // namespace

cudaDataType_t Gemm::y_type(Output y) const {
  return input_type_ == CUDA_R_8I ? CUDA_R_32I : data_type(y);
}

Gemm::Gemm(cudaStream_t stream, void *workspace, size_t workspace_bytes, Inputs inputs, bool fuse)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes),
      compute_(inputs == Inputs::Tf32   ? CUBLAS_COMPUTE_32F_FAST_TF32
               : inputs == Inputs::Int8 ? CUBLAS_COMPUTE_32I
                                        : CUBLAS_COMPUTE_32F),
      input_type_(inputs == Inputs::Bf16   ? CUDA_R_16BF
                  : inputs == Inputs::Int8 ? CUDA_R_8I
                                           : CUDA_R_32F),
      fuse_(fuse) {
  const cublasLtEpilogue_t epilogue[kEpilogues] = {
      CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS};
  try {
    lt_check(cublasLtCreate(&lt_), "cublasLtCreate");
    for (int y = 0; y < kOutputs; ++y)
      for (int e = 0; e < kEpilogues; ++e)
        if (Output(y) == Output::Fp32 || inputs == Inputs::Bf16)
          op_[y][e] = make_op(compute_, epilogue[e], y_type(Output(y)));
  } catch (...) {
    release();
    throw;
  }
}

Gemm::~Gemm() { release(); }

void Gemm::release() {
  for (auto &ops : op_)
    for (auto &op : ops) {
      if (op)
        cublasLtMatmulDescDestroy(op);
      op = nullptr;
    }
  if (lt_)
    cublasLtDestroy(lt_);
  lt_ = nullptr;
}

// cuBLASLt's candidates for the layer at `rows` rows, best first, at most `most` of them, none
// splitting the sum over `in` (a split would make an image's bytes depend on the batch size).
int Gemm::candidates(Output y, Epilogue e, int in, int out, int rows,
                     cublasLtMatmulHeuristicResult_t *found, int most) {
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t bytes = workspace_bytes_;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                       sizeof bytes);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &no_reduction, sizeof no_reduction);
  int count = 0;
  Layouts l(in, out, rows, input_type_, y_type(y));
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt_, op_[int(y)][e], l.w, l.x, l.y, l.y,
                                                          pref, most, found, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  lt_check(s, "cublasLtMatmulAlgoGetHeuristic");
  return count;
}

const cublasLtMatmulAlgo_t &Gemm::algo(Output y, Epilogue e, int in, int out, int rows) {
  if (!op_[int(y)][e])
    throw Error("a GEMM with bf16 output needs bf16 inputs", Error::Kind::Runtime);
  const auto key = std::make_tuple(int(y), int(e), in, out);
  if (auto it = algos_.find(key); it != algos_.end())
    return it->second;
  if (auto it = per_size_.find(std::make_tuple(int(y), int(e), in, out, rows));
      it != per_size_.end())
    return it->second;
  const bool fallback = std::any_of(per_size_.begin(), per_size_.end(), [&](const auto &kv) {
    return std::make_tuple(std::get<0>(kv.first), std::get<1>(kv.first), std::get<2>(kv.first),
                           std::get<3>(kv.first)) == key;
  });
  if (!fallback) { // the first time: one algorithm for every row count, if cuBLASLt has one
    cublasLtMatmulHeuristicResult_t found[16];
    const int count = candidates(y, e, in, out, kReferenceRows, found, 16);
    for (int i = 0; i < count; ++i) {
      cublasLtMatmulAlgo_t a = found[i].algo;
      const int32_t one = 1; // no split-K, stated, not left to the algorithm's default
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof one);
      bool runs_everywhere = true;
      for (int r : kCheckRows) {
        Layouts l(in, out, r, input_type_, y_type(y));
        cublasLtMatmulHeuristicResult_t check;
        if (cublasLtMatmulAlgoCheck(lt_, op_[int(y)][e], l.w, l.x, l.y, l.y, &a, &check) !=
                CUBLAS_STATUS_SUCCESS ||
            check.workspaceSize > workspace_bytes_)
          runs_everywhere = false;
      }
      if (runs_everywhere)
        return algos_[key] = a;
    }
    std::fprintf(
        stderr,
        "tarnn: cuBLASLt has no one algorithm for the %d x %d layer (%s) that runs at "
        "every batch size: each batch size gets its own, so images may depend on --batch\n",
        in, out,
        input_type_ == CUDA_R_16BF ? "bf16"
        : input_type_ == CUDA_R_8I ? "int8"
                                   : "fp32");
  }
  cublasLtMatmulHeuristicResult_t best;
  if (candidates(y, e, in, out, rows, &best, 1) == 0)
    throw Error("cuBLASLt has no algorithm for a " + std::to_string(in) + " x " +
                    std::to_string(out) + " layer at " + std::to_string(rows) + " rows",
                Error::Kind::Runtime);
  return per_size_[std::make_tuple(int(y), int(e), in, out, rows)] = best.algo;
}

void Gemm::prepare(int in, int out, Act act, Output y_type) {
  if (y_type == Output::Fp32)
    algo(y_type, Plain, in, out, kReferenceRows);
  if (fuses(act))
    algo(y_type, act == Act::Relu ? ReluBias : Bias, in, out, kReferenceRows);
}

void Gemm::run(const void *w, const void *b, Act act, const void *x, void *y, int in, int out,
               int rows, Output y_out) {
  const Epilogue e = !b || !fuses(act) ? Plain : act == Act::Relu ? ReluBias : Bias;
  const cublasLtMatmulAlgo_t &a = algo(y_out, e, in, out, rows);
  cublasLtMatmulDesc_t op = op_[int(y_out)][e];
  if (e != Plain)
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b),
             "cublasLtMatmulDescSetAttribute");
  Layouts l(in, out, rows, input_type_, y_type(y_out));
  const float one = 1.0f, zero = 0.0f;
  const int32_t int_one = 1, int_zero = 0; // alpha and beta in the scale type: int32 Y's
  const bool ints = input_type_ == CUDA_R_8I;
  lt_check(cublasLtMatmul(lt_, op, ints ? static_cast<const void *>(&int_one) : &one, w, l.w, x,
                          l.x, ints ? static_cast<const void *>(&int_zero) : &zero, y, l.y, y, l.y,
                          &a, workspace_, workspace_bytes_, stream_),
           "cublasLtMatmul");
}

} // namespace tarnn
