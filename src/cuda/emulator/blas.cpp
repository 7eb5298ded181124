// cuBLAS and cuBLASLt on the emulated device: each matmul a reference GEMM, D(i, j) = alpha
// (sum over k ascending of op(A)(i, k) op(B)(k, j), one fused multiply-add chain, in k-slices
// summed in order when an algorithm splits k) + beta C(i, j), then the epilogue (+ bias[i], ReLU),
// rounded to D's type. TF32 is computed as fp32 (a tensor core's rounding of the inputs is what
// only a GPU shows); bf16 and fp16 inputs are exact in fp32, so their products are too.
//
// What it accepts and refuses, as cuBLASLt documents it: column-major layouts with ld at least
// the rows (CUBLAS_STATUS_INVALID_VALUE otherwise), op(A) m x k, op(B) k x n, C and D m x n
// (INVALID_VALUE), TRANSC none; the compute/scale/A/B/C/D type combinations of cuBLASLt's table
// for COMPUTE_32F (fp32, bf16 or fp16 inputs, fp32 or the inputs' type out), 32F_FAST_TF32 and
// 32F_FAST_16BF (fp32), and COMPUTE_32I (int8 A and B, int32 C and D, int32 scale: the exact
// integer sum, alpha acc + beta C wrapping as int32 does; the DEFAULT epilogue; and what
// cuBLASLt's int8 (IMMA) kernels need on column-major layouts, as cublasLtMatmul's documentation
// says: A transposed and B not, m and k multiples of 4, the leading dimensions of A, B and C
// multiples of 4 and, by the alignment rule below with such leading dimensions, every pointer
// 4-byte aligned; an H100's cuBLASLt 13.1 refused the small golden's int8 GEMMs, of 54 outputs
// or 18 inputs, at the heuristic on 2026-11-25) (CUBLAS_STATUS_NOT_SUPPORTED otherwise);
// epilogues DEFAULT, RELU, BIAS and RELU_BIAS, the bias in the type cuBLASLt allows
// (bias_type_allowed: D's) and not null
// (INVALID_VALUE). An algorithm from the
// heuristic assumes what the preference promised and the layouts allow: each of A, B, C and D
// aligned to the largest power of two up to 16 bytes that divides both the preference's minimum
// alignment (256 by default) and its leading dimension in bytes; a matmul with a pointer aligned
// less is CUBLAS_STATUS_NOT_SUPPORTED, and a pointer not aligned to its element INVALID_VALUE.
// An operand reaching past its device allocation faults the device (cudaErrorIllegalAddress),
// as the GPU kernel would. What cuBLASLt accepts and this does not emulate (batched or row-major
// layouts, device pointer modes, GELU epilogues) is NOT_SUPPORTED, said once on stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <set>
#include <string>
#include <vector>

#include "device.h"

struct tarnn_emu_blas {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};
struct tarnn_emu_lt {};
struct tarnn_emu_matmul_desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t pointer_mode = 0;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t bias_type = -1; // D's
};
struct tarnn_emu_layout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t order = CUBLASLT_ORDER_COL, batch = 1;
};
struct tarnn_emu_preference {
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t alignment[4] = {256, 256, 256, 256}; // A, B, C, D
};

namespace tarnn_emu {

namespace {

constexpr uint64_t kMagic = 0x74617272'6e656d75ull; // an algorithm this file made

size_t element_bytes(cudaDataType_t t) {
  return t == CUDA_R_32F || t == CUDA_R_32I ? 4 : t == CUDA_R_8I ? 1 : 2;
}
const char *type_name(cudaDataType_t t) {
  return t == CUDA_R_32F    ? "fp32"
         : t == CUDA_R_16BF ? "bf16"
         : t == CUDA_R_8I   ? "int8"
         : t == CUDA_R_32I  ? "int32"
                            : "fp16";
}
bool known_type(int t) {
  return t == CUDA_R_32F || t == CUDA_R_16BF || t == CUDA_R_16F || t == CUDA_R_8I ||
         t == CUDA_R_32I;
}

void not_emulated(const std::string &what) {
  static std::set<std::string> said;
  if (said.insert(what).second)
    std::fprintf(stderr, "tarnn emulated device: cuBLASLt %s is not emulated\n", what.c_str());
}

// A refusal the real library explains only in its log (CUBLASLT_LOG_LEVEL): the same words, said
// once on stderr, since the status alone does not say which attribute was wrong.
void refused(const std::string &why) {
  static std::set<std::string> said;
  if (said.insert(why).second)
    std::fprintf(stderr, "tarnn emulated device: cuBLASLt refuses the matmul: %s\n", why.c_str());
}

// One matrix operand: its memory and layout, column-major.
struct Operand {
  const void *p = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0;
  size_t extent() const { // bytes from p to the last element
    return rows && cols ? (size_t(cols - 1) * size_t(ld) + size_t(rows)) * element_bytes(type) : 0;
  }
  float at(int64_t r, int64_t c) const {
    const size_t i = size_t(c) * size_t(ld) + size_t(r);
    if (type == CUDA_R_32F)
      return static_cast<const float *>(p)[i];
    const uint16_t h = static_cast<const uint16_t *>(p)[i];
    if (type == CUDA_R_16F)
      return __half2float(__ushort_as_half(h));
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// A whole matmul, as the call described it (its descriptor's attributes taken at the call).
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  Operand a, b, c, d;
  float alpha = 1, beta = 0;
  int32_t int_alpha = 1, int_beta = 0; // COMPUTE_32I's (alpha and beta hold them as floats too)
  bool relu = false;
  const void *bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int splits = 1;
  std::string name; // "gemm K->M TYPE[, epilogue]": its counts' name

  float op_a(int64_t i, int64_t kk) const { return ta ? a.at(kk, i) : a.at(i, kk); }
  float op_b(int64_t kk, int64_t j) const { return tb ? b.at(j, kk) : b.at(kk, j); }
};

float round_to(float v, cudaDataType_t t) {
  if (t == CUDA_R_16F)
    return __half2float(__float2half_rn(v));
  if (t != CUDA_R_16BF)
    return v;
  if (std::isnan(v))
    return v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; // to nearest even
  std::memcpy(&v, &u, 4);
  return v;
}

void store(const Operand &d, int64_t i, int64_t j, float v) {
  const size_t at = size_t(j) * size_t(d.ld) + size_t(i);
  v = round_to(v, d.type);
  if (d.type == CUDA_R_32F) {
    static_cast<float *>(const_cast<void *>(d.p))[at] = v;
    return;
  }
  uint16_t h;
  if (d.type == CUDA_R_16F) {
    h = __half_as_ushort(__float2half_rn(v));
  } else {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    h = uint16_t(u >> 16);
  }
  static_cast<uint16_t *>(const_cast<void *>(d.p))[at] = h;
}

// The sums of 8 rows i0.. of column j over k-slices [k0, k1): one fma chain each, so one row's
// bits are those of the plain loop; 8 side by side so the chains vectorise.
template <int R>
inline __attribute__((always_inline)) void chains(const float *at, const float *bt, int64_t m,
                                                  int64_t k0, int64_t k1, float *acc) {
  for (int r = 0; r < R; ++r)
    acc[r] = 0.0f;
  for (int64_t kk = k0; kk < k1; ++kk) {
    const float b = bt[kk];
    const float *a = at + kk * m;
    for (int r = 0; r < R; ++r)
      acc[r] = std::fma(a[r], b, acc[r]);
  }
}

template <int R>
inline __attribute__((always_inline)) void columns(const Problem &p, const std::vector<float> &at,
                                                   const std::vector<float> &bt) {
  const int64_t m = p.m, k = p.k;
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i0 = 0; i0 < m; i0 += R) {
      const int rows = int(std::min<int64_t>(R, m - i0));
      float total[R], part[R];
      for (int s = 0; s < p.splits; ++s) {
        const int64_t k0 = k * s / p.splits, k1 = k * (s + 1) / p.splits;
        if (rows == R)
          chains<R>(at.data() + i0, bt.data() + j * k, m, k0, k1, part);
        else
          for (int r = 0; r < rows; ++r)
            chains<1>(at.data() + i0 + r, bt.data() + j * k, m, k0, k1, part + r);
        for (int r = 0; r < rows; ++r)
          total[r] = s == 0 ? part[r] : total[r] + part[r];
      }
      for (int r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        float v = p.splits > 0 && k > 0 ? total[r] : 0.0f;
        if (p.alpha != 1.0f)
          v = p.alpha * v;
        if (p.beta != 0.0f)
          v = v + p.beta * p.c.at(i, j);
        if (p.bias)
          v = v + Operand{p.bias, p.bias_type, p.m, 1, p.m}.at(i, 0);
        if (p.relu)
          v = v > 0.0f ? v : 0.0f;
        store(p.d, i, j, v);
      }
    }
}

__attribute__((target("avx2,fma"))) void columns_fma(const Problem &p, const std::vector<float> &at,
                                                     const std::vector<float> &bt) {
  columns<8>(p, at, bt);
}
void columns_plain(const Problem &p, const std::vector<float> &at, const std::vector<float> &bt) {
  columns<8>(p, at, bt);
}

// COMPUTE_32I, TN (describe's check): D(i, j) = alpha sum_k A(k, i) B(k, j) + beta C(i, j), the
// sum exact in 64 bits, then each step in int32 wrapping as the GPU's integer units do.
void integer_columns(const Problem &p) {
  const auto *a = static_cast<const int8_t *>(p.a.p), *b = static_cast<const int8_t *>(p.b.p);
  const auto *c = static_cast<const int32_t *>(p.c.p);
  auto *d = static_cast<int32_t *>(const_cast<void *>(p.d.p));
  auto wrap = [](int64_t v) { return int32_t(uint32_t(uint64_t(v))); };
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      int64_t acc = 0;
      for (int64_t kk = 0; kk < p.k; ++kk)
        acc += int32_t(a[size_t(i * p.a.ld + kk)]) * int32_t(b[size_t(j * p.b.ld + kk)]);
      int32_t v = wrap(int64_t(p.int_alpha) * wrap(acc));
      if (p.int_beta != 0)
        v = wrap(int64_t(v) + int64_t(p.int_beta) * c[size_t(j * p.c.ld + i)]);
      d[size_t(j * p.d.ld + i)] = v;
    }
}

// Runs the matmul (on the stream's turn): operands checked against their allocations, A and B
// widened to float once (A transposed: k rows of m), then the chains (integer ones for
// COMPUTE_32I); the bytes counted.
void execute(const Problem &p) {
  const struct {
    const Operand *o;
    const char *name;
  } operands[] = {{&p.a, "A"}, {&p.b, "B"}, {&p.c, "C"}, {&p.d, "D"}};
  for (const auto &op : operands) {
    if (op.o == &p.c && p.beta == 0.0f)
      continue;
    if (device_range(op.o->p, op.o->extent()) != 0) {
      fault(cudaErrorIllegalAddress,
            p.name + ": " + op.name + " (" + std::to_string(op.o->rows) + " x " +
                std::to_string(op.o->cols) + ", ld " + std::to_string(op.o->ld) + ", " +
                type_name(op.o->type) + ": " + std::to_string(op.o->extent()) + " bytes) " +
                (device_range(op.o->p, 1) < 0 ? "is not device memory"
                                              : "runs past the end of its allocation"));
      return;
    }
  }
  if (p.bias && device_range(p.bias, size_t(p.m) * element_bytes(p.bias_type)) != 0) {
    fault(cudaErrorIllegalAddress,
          p.name + ": the bias is not " + std::to_string(p.m) + " elements of device memory");
    return;
  }
  if (p.compute == CUBLAS_COMPUTE_32I) {
    integer_columns(p);
  } else {
    std::vector<float> at(size_t(p.k) * size_t(p.m)), bt(size_t(p.n) * size_t(p.k));
    for (int64_t kk = 0; kk < p.k; ++kk)
      for (int64_t i = 0; i < p.m; ++i)
        at[size_t(kk * p.m + i)] = p.op_a(i, kk);
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t kk = 0; kk < p.k; ++kk)
        bt[size_t(j * p.k + kk)] = p.op_b(kk, j);
    static const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    (fma ? columns_fma : columns_plain)(p, at, bt);
  }
  const size_t ea = element_bytes(p.a.type), eb = element_bytes(p.b.type);
  const void *reads[] = {p.a.p, p.b.p, p.bias, p.c.p};
  const size_t bytes[] = {size_t(p.m * p.k) * ea, size_t(p.k * p.n) * eb,
                          p.bias ? size_t(p.m) * element_bytes(p.bias_type) : 0,
                          p.beta != 0.0f ? size_t(p.m * p.n) * element_bytes(p.c.type) : 0};
  count_gemm(p.name, reads, bytes,
             p.beta != 0.0f ? 4
             : p.bias       ? 3
                            : 2,
             p.d.p, size_t(p.m * p.n) * element_bytes(p.d.type));
}

// The type combinations cuBLASLt's table has for these compute types.
bool supported_types(cublasComputeType_t compute, cudaDataType_t scale, cudaDataType_t a,
                     cudaDataType_t b, cudaDataType_t c, cudaDataType_t d) {
  if (compute == CUBLAS_COMPUTE_32I)
    return scale == CUDA_R_32I && a == CUDA_R_8I && b == CUDA_R_8I && c == CUDA_R_32I &&
           d == CUDA_R_32I;
  if (scale != CUDA_R_32F || a != b || c != d || a == CUDA_R_8I || a == CUDA_R_32I)
    return false;
  switch (compute) {
  case CUBLAS_COMPUTE_32F:
    return d == CUDA_R_32F || d == a;
  case CUBLAS_COMPUTE_32F_FAST_TF32:
  case CUBLAS_COMPUTE_32F_FAST_16BF:
    return a == CUDA_R_32F && d == CUDA_R_32F;
  default:
    return false;
  }
}

std::string problem_name(const Problem &p) {
  std::string s = "gemm " + std::to_string(p.k) + "->" + std::to_string(p.m) + " " +
                  (p.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? "tf32" : type_name(p.a.type));
  if (p.ta != true || p.tb != false)
    s += std::string(" ") + (p.ta ? "T" : "N") + (p.tb ? "T" : "N");
  if (p.bias)
    s += p.relu ? ", bias+relu" : ", bias";
  else if (p.relu)
    s += ", relu";
  return s;
}

// CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's rule (cublasLt.h): the bias is D's type (the default, -1)
// but in IMMA kernels (COMPUTE_32I, C int8), whose bias is fp32 as alpha and beta are, and in fp8
// kernels (no fp8 type is emulated: refused before this). cuBLASLt 13.1 on an H100 refused an fp32
// bias for a bf16 D with INVALID_VALUE (docs/CUDA.md, the lease of 2026-11-25), which this once
// accepted.
bool bias_type_allowed(cublasComputeType_t compute, cudaDataType_t c, cudaDataType_t d, int t) {
  if (compute == CUBLAS_COMPUTE_32I && c == CUDA_R_8I)
    return t == CUDA_R_32F;
  return t == int(d);
}

// The problem a descriptor and four layouts describe, or why not. The bias pointer is needed
// only by a matmul (`run`): the heuristic and the check choose without it. Over 60 lines: one
// guard after another, each a status the real library returns for that input, in one place so
// that the emulated call refuses what cuBLASLt refuses, in the same order.
cublasStatus_t describe(const tarnn_emu_matmul_desc *op, const tarnn_emu_layout *A,
                        const tarnn_emu_layout *B, const tarnn_emu_layout *C,
                        const tarnn_emu_layout *D, Problem &p, bool run = false) {
  if (!op || !A || !B || !C || !D)
    return CUBLAS_STATUS_INVALID_VALUE;
  for (const tarnn_emu_layout *l : {A, B, C, D}) {
    if (l->order != CUBLASLT_ORDER_COL || l->batch != 1) {
      not_emulated("with a row-major or batched layout");
      return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (l->ld < std::max<int64_t>(1, int64_t(l->rows)))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (op->transc != CUBLAS_OP_N)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (op->pointer_mode != 0) {
    not_emulated("with a device pointer mode");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p.ta = op->transa == CUBLAS_OP_T;
  p.tb = op->transb == CUBLAS_OP_T;
  p.m = int64_t(p.ta ? A->cols : A->rows);
  p.k = int64_t(p.ta ? A->rows : A->cols);
  const int64_t kb = int64_t(p.tb ? B->cols : B->rows);
  p.n = int64_t(p.tb ? B->rows : B->cols);
  if (kb != p.k || int64_t(D->rows) != p.m || int64_t(D->cols) != p.n || C->rows != D->rows ||
      C->cols != D->cols)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported_types(op->compute, op->scale, A->type, B->type, C->type, D->type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (op->compute == CUBLAS_COMPUTE_32I &&
      (!p.ta || p.tb || op->epilogue != CUBLASLT_EPILOGUE_DEFAULT || p.m % 4 || p.k % 4 ||
       A->ld % 4 || B->ld % 4 || C->ld % 4))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (op->epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
  case CUBLASLT_EPILOGUE_RELU:
  case CUBLASLT_EPILOGUE_BIAS:
  case CUBLASLT_EPILOGUE_RELU_BIAS:
    break;
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
    not_emulated("GELU epilogue");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p.relu = op->epilogue & CUBLASLT_EPILOGUE_RELU;
  if (op->epilogue & CUBLASLT_EPILOGUE_BIAS) {
    const int t = op->bias_type < 0 ? int(D->type) : op->bias_type;
    if (!bias_type_allowed(op->compute, C->type, D->type, t)) {
      refused("Unsupported config of bias pointer type for chosen precision, got (" +
              std::to_string(t) + ")");
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (run && !op->bias)
      return CUBLAS_STATUS_INVALID_VALUE;
    p.bias = op->bias;
    p.bias_type = cudaDataType_t(t);
  }
  p.compute = op->compute;
  auto operand = [](const tarnn_emu_layout *l) {
    Operand o;
    o.type = l->type;
    o.rows = int64_t(l->rows);
    o.cols = int64_t(l->cols);
    o.ld = l->ld;
    return o;
  };
  p.a = operand(A);
  p.b = operand(B);
  p.c = operand(C);
  p.d = operand(D);
  return CUBLAS_STATUS_SUCCESS;
}

// An attribute's value into its field, if it is the field's size.
template <class T> cublasStatus_t set_field(T &field, const void *value, size_t bytes) {
  if (!value || bytes != sizeof field)
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, value, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

// ---- algorithms
// --------------------------------------------------------------------------------------

// The vector width (bytes) an algorithm assumes of a matrix: a power of two up to 16 dividing
// the promised alignment and the leading dimension in bytes.
uint32_t width(uint32_t promised, const tarnn_emu_layout *l) {
  const uint64_t ld_bytes = uint64_t(l->ld) * element_bytes(l->type);
  uint32_t w = 16;
  while (w > 1 && (promised % w || ld_bytes % w))
    w /= 2;
  return w;
}

struct Algo {
  uint64_t id = 0, splits = 1, reduction = 0;
  uint32_t width[4] = {1, 1, 1, 1}; // A, B, C, D
};

cublasLtMatmulAlgo_t pack(const Algo &a) {
  cublasLtMatmulAlgo_t out{};
  out.data[0] = kMagic;
  out.data[1] = a.id;
  out.data[2] = a.splits;
  out.data[3] = a.reduction;
  out.data[4] = uint64_t(a.width[0]) | uint64_t(a.width[1]) << 16 | uint64_t(a.width[2]) << 32 |
                uint64_t(a.width[3]) << 48;
  return out;
}

bool unpack(const cublasLtMatmulAlgo_t *in, Algo &a) {
  if (!in || in->data[0] != kMagic)
    return false;
  a.id = in->data[1];
  a.splits = in->data[2];
  a.reduction = in->data[3];
  for (int i = 0; i < 4; ++i)
    a.width[i] = uint32_t(in->data[4] >> (16 * i)) & 0xffffu;
  return true;
}

Algo choose(const tarnn_emu_preference *pref, const tarnn_emu_layout *const layouts[4]) {
  static const tarnn_emu_preference none;
  Algo a;
  for (int i = 0; i < 4; ++i)
    a.width[i] = width((pref ? pref : &none)->alignment[i], layouts[i]);
  return a;
}

// An algorithm runs on layouts whose leading dimensions keep its widths.
bool fits(const Algo &a, const tarnn_emu_layout *const layouts[4]) {
  for (int i = 0; i < 4; ++i)
    if ((uint64_t(layouts[i]->ld) * element_bytes(layouts[i]->type)) % a.width[i])
      return false;
  return a.splits >= 1;
}

} // namespace

} // namespace tarnn_emu

using namespace tarnn_emu;

extern "C" {

// ---- cuBLAS
// ----------------------------------------------------------------------------------------

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new tarnn_emu_blas;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *, size_t) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS 13.1's words (libcublasLt.so.13's own strings; the lease of 2026-11-25 printed the
// first refusal the emulated device had not made: INVALID_VALUE's)
const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "an unsupported value or parameter was passed to the function";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "the function requires an architectural feature absent from the device";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "an access to GPU memory space failed";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "the function failed to launch on the GPU";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "an internal operation failed";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "the requested functionality is not supported";
  }
  return "unrecognized status";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *beta, void *C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if (m < 0 || n < 0 || k < 0 || !alpha || !beta || lda < std::max(1, ta ? k : m) ||
      ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported_types(computeType, CUDA_R_32F, Atype, Btype, Ctype, Ctype))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ta = ta;
  p.tb = tb;
  p.a = Operand{A, Atype, ta ? k : m, ta ? m : k, lda};
  p.b = Operand{B, Btype, tb ? n : k, tb ? k : n, ldb};
  p.c = p.d = Operand{C, Ctype, m, n, ldc};
  p.alpha = *static_cast<const float *>(alpha);
  p.beta = *static_cast<const float *>(beta);
  p.compute = computeType;
  p.name = problem_name(p);
  return submit(handle->stream, cudaGraphNodeTypeKernel, p.name, [p] { execute(p); })
             ? CUBLAS_STATUS_EXECUTION_FAILED
             : CUBLAS_STATUS_SUCCESS;
}

// ---- cuBLASLt
// --------------------------------------------------------------------------------------

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (!handle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new tarnn_emu_lt;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc)
    return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new tarnn_emu_matmul_desc;
  (*desc)->compute = compute;
  (*desc)->scale = scale;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *value, size_t bytes) {
  if (!desc || !value)
    return CUBLAS_STATUS_INVALID_VALUE;
  auto set = [&](auto &field) { return set_field(field, value, bytes); };
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    return set(desc->compute);
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
    return set(desc->scale);
  case CUBLASLT_MATMUL_DESC_POINTER_MODE:
    return set(desc->pointer_mode);
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return set(desc->transa);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return set(desc->transb);
  case CUBLASLT_MATMUL_DESC_TRANSC:
    return set(desc->transc);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return set(desc->epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return set(desc->bias);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return set(desc->bias_type);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!known_type(type)) {
    not_emulated("with a data type other than fp32, bf16, fp16, int8 and int32");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  *layout = new tarnn_emu_layout;
  (*layout)->type = type;
  (*layout)->rows = rows;
  (*layout)->cols = cols;
  (*layout)->ld = ld;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new tarnn_emu_preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *value, size_t bytes) {
  if (!pref || !value)
    return CUBLAS_STATUS_INVALID_VALUE;
  auto set = [&](auto &field) { return set_field(field, value, bytes); };
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_SEARCH_MODE: {
    uint32_t unused;
    return set(unused);
  }
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return set(pref->max_workspace);
  case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    return set(pref->reduction_mask);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return set(pref->alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES]);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!returned || requested < 1 || !results)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Problem p;
  if (cublasStatus_t s = describe(desc, A, B, C, D, p))
    return s;
  const tarnn_emu_layout *const layouts[4] = {A, B, C, D};
  Algo a = choose(pref, layouts);
  const int count = std::min(requested, 2); // two algorithms, the same arithmetic
  for (int i = 0; i < count; ++i) {
    a.id = uint64_t(i);
    results[i] = cublasLtMatmulHeuristicResult_t{};
    results[i].algo = pack(a);
    results[i].workspaceSize = 0;
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  *returned = count;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    const void *value, size_t bytes) {
  Algo a;
  if (!unpack(algo, a) || !value)
    return CUBLAS_STATUS_INVALID_VALUE;
  int32_t v = 0;
  if (attr == CUBLASLT_ALGO_CONFIG_TILE_ID)
    return CUBLAS_STATUS_SUCCESS;
  if (bytes != sizeof(uint32_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&v, value, 4);
  switch (attr) {
  case CUBLASLT_ALGO_CONFIG_ID:
    a.id = uint64_t(v);
    break;
  case CUBLASLT_ALGO_CONFIG_SPLITK_NUM:
    if (v < 1)
      return CUBLAS_STATUS_INVALID_VALUE;
    a.splits = uint64_t(v);
    break;
  case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME:
    a.reduction = uint64_t(v);
    break;
  default:
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *algo = pack(a);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                       cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                       cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                       const cublasLtMatmulAlgo_t *algo,
                                       cublasLtMatmulHeuristicResult_t *result) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  Algo a;
  if (!result || !unpack(algo, a))
    return CUBLAS_STATUS_INVALID_VALUE;
  Problem p;
  if (cublasStatus_t s = describe(desc, A, B, C, D, p))
    return s;
  const tarnn_emu_layout *const layouts[4] = {A, B, C, D};
  if (!fits(a, layouts))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *result = cublasLtMatmulHeuristicResult_t{};
  result->algo = *algo;
  result->workspaceSize = 0;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0f;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t,
                              cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  Problem p;
  if (cublasStatus_t s = describe(desc, Adesc, Bdesc, Cdesc, Ddesc, p, true))
    return s;
  if (!alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  const tarnn_emu_layout *const layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
  Algo a = choose(nullptr, layouts); // no algorithm given: the heuristic's first
  if (algo && !unpack(algo, a))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!fits(a, layouts))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc->scale == CUDA_R_32I) {
    p.int_alpha = *static_cast<const int32_t *>(alpha);
    p.int_beta = *static_cast<const int32_t *>(beta);
    p.alpha = float(p.int_alpha);
    p.beta = float(p.int_beta);
  } else {
    p.alpha = *static_cast<const float *>(alpha);
    p.beta = *static_cast<const float *>(beta);
  }
  p.a.p = A;
  p.b.p = B;
  p.c.p = C;
  p.d.p = D;
  const void *pointers[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(pointers[i]);
    if (i == 2 && p.beta == 0.0f)
      continue;
    if (at % element_bytes(layouts[i]->type) ||
        (p.bias && reinterpret_cast<uintptr_t>(p.bias) % element_bytes(p.bias_type)))
      return CUBLAS_STATUS_INVALID_VALUE;
    if (at % a.width[i])
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p.splits = int(a.splits);
  p.name = problem_name(p);
  return submit(stream, cudaGraphNodeTypeKernel, p.name, [p] { execute(p); })
             ? CUBLAS_STATUS_EXECUTION_FAILED
             : CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
