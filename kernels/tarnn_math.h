// The arithmetic both backends share (SPEC sections 1-3): the feature map phi, the per-cell state
// update and read-out, LayerNorm, the discretized logistic mixture and Philox4x32-10. Everything
// here is __host__ __device__ under nvcc, so the CPU backend and its tests run the very functions
// the CUDA kernels call.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

// Always inlined: a CPU kernel compiled for AVX-512 or AVX2 (target attributes, chosen at run
// time) gets these bodies in its own instruction set, not a call to a baseline x86-64 copy.
#ifdef __CUDACC__
#define TARNN_HD __host__ __device__ __forceinline__
#else
#define TARNN_HD inline __attribute__((always_inline))
#endif

// Before a TARNN_HD template that calls the function object it is given (dispatch): host code
// passes host lambdas, device code device ones, and nvcc is told not to check the pairing in the
// instantiation that is never compiled for the other side (nvcc's pragma: the emulated device's
// compilers, which define __CUDACC__ too, do not know it).
#ifdef __NVCC__
#define TARNN_HD_CALLS_ANY _Pragma("nv_exec_check_disable")
#else
#define TARNN_HD_CALLS_ANY
#endif

namespace tarnn {

constexpr float kAttentionEps = 1e-6f; // fast-transformers' LinearAttention eps
constexpr float kLayerNormEps = 1e-5f; // torch.nn.LayerNorm's default
constexpr float kMinLogScale = -7.0f;  // PixelCNN++ clamp on log scales
constexpr int kMaxHeadDim = 256;       // d_head at most (config.json is checked against it)
constexpr int kMaxFeatures = 4096;     // phi's width at most (a feature map's n_dims, checked)

// ---- feature map and activations ----------------------------------------------------------------

// exp(x) for x <= 0 on the host, bit for bit glibc 2.36's expf as every x86-64 with FMA runs it
// (its __expf_fma: a 32-entry table of 2^(i/32) and a cubic in double; checked against it on all
// 2,139,095,041 floats from -0 down, tests/kernels/test_math.cpp samples that). Written out so
// that the CPU's images do not depend on the machine's libm, and so that a loop of it has no
// calls and vectorizes (phi of q and k were 40% of the attention's time as libm calls).
// Below log(2^-150) it is 0, as expf; NaN stays NaN.
inline constexpr uint64_t kExp2Table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

inline __attribute__((always_inline)) float expf_exact(float x) {
  constexpr double N = 32, kInvLn2N = 0x1.71547652b82fep+0 * N, kShift = 0x1.8p+52;
  constexpr double C0 = 0x1.c6af84b912394p-5 / N / N / N, C1 = 0x1.ebfce50fac4f3p-3 / N / N,
                   C2 = 0x1.62e42ff0c52d6p-1 / N;
  const double xd = x, z = kInvLn2N * xd; // x N / ln 2 = k + r, r in [-1/2, 1/2]
  double kd = z + kShift;                 // k rounded to nearest, in the low bits
  uint64_t ki;
  __builtin_memcpy(&ki, &kd, 8);
  kd -= kShift;
  const double r = __builtin_fma(kInvLn2N, xd, -kd);   // fused, as the FMA build computes it
  const uint64_t t = kExp2Table[ki % 32] + (ki << 47); // 2^(k/N)
  double s;
  __builtin_memcpy(&s, &t, 8);
  const double r2 = r * r;
  const double y = __builtin_fma(__builtin_fma(C0, r, C1), r2, __builtin_fma(C2, r, 1.0)) * s;
  return x < -0x1.9fe368p6f ? 0.0f : static_cast<float>(y);
}

// phi(u) = elu(u) + 1 (the paper's equation 7): positive, so the normaliser never vanishes.
TARNN_HD float phi(float u) {
#ifdef __CUDA_ARCH__
  return u > 0.0f ? u + 1.0f : expf(u);
#else
  return u > 0.0f ? u + 1.0f : expf_exact(u);
#endif
}

// ---- bfloat16 ----------------------------------------------------------------------------------

// f rounded to bfloat16, its bits: to nearest even; NaN stays NaN (quiet); zero and subnormals
// become a zero of their sign. vcvtne2ps2bf16's rule (the CPU's bf16 GEMM rounds with that
// instruction where it has it), so every path of --precision bf16 rounds alike.
TARNN_HD uint16_t bf16_bits(float f) {
#ifdef __CUDA_ARCH__
  uint32_t u = __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it one, quiet
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  if ((u & 0x7f800000u) == 0) // zero or subnormal
    return static_cast<uint16_t>((u >> 16) & 0x8000u);
  u += 0x7fffu + ((u >> 16) & 1u); // ties to even
  return static_cast<uint16_t>(u >> 16);
}

TARNN_HD float relu(float u) { return u > 0.0f ? u : 0.0f; }

// torch's exact gelu: 0.5 u (1 + erf(u / sqrt 2)).
TARNN_HD float gelu(float u) { return 0.5f * u * (1.0f + erff(u * 0.70710678118654752f)); }

// ---- linear attention in RNN mode (equations 16-20) ---------------------------------------------

// One cell (i, j) of one head's state at one position: S_ij += phi(k)_i v_j, then the read-out's
// numerator num_j accumulates phi(q)_i S_ij. Visiting i in ascending order for every j, both
// backends add the same terms in the same order.
TARNN_HD void state_cell(float &S_ij, float phik_i, float v_j, float phiq_i, float &num_j) {
  S_ij = S_ij + phik_i * v_j;
  num_j = num_j + phiq_i * S_ij;
}

// z_i += phi(k)_i, and the denominator accumulates phi(q)_i z_i.
TARNN_HD void normaliser_cell(float &z_i, float phik_i, float phiq_i, float &den) {
  z_i = z_i + phik_i;
  den = den + phiq_i * z_i;
}

TARNN_HD float attention_out(float num_j, float den) { return num_j / (den + kAttentionEps); }

// One head of one image at one position, the state updated before it is read (t attends to t),
// from phi(q) and phi(k) already taken (F = `features` wide; 0: d, as elementwise maps). S is
// F x d row-major (row i: key feature, column j: value), z is F. D > 0 fixes F = d = D at compile
// time (the same operations in the same order, the same bits), so the CPU keeps the numerators in
// vector registers.
template <int D = 0>
TARNN_HD void linear_attention_update(const float *__restrict__ fq, const float *__restrict__ fk,
                                      const float *__restrict__ v, float *__restrict__ S,
                                      float *__restrict__ z, float *__restrict__ out, int d_runtime,
                                      int features = 0) {
  const int d = D > 0 ? D : d_runtime;
  const int n = D > 0 ? D : features > 0 ? features : d;
  float den = 0.0f;
  for (int j = 0; j < d; ++j)
    out[j] = 0.0f; // used as the numerators until the last loop
  for (int i = 0; i < n; ++i) {
    normaliser_cell(z[i], fk[i], fq[i], den);
    float *row = S + i * d;
    for (int j = 0; j < d; ++j)
      state_cell(row[j], fk[i], v[j], fq[i], out[j]);
  }
  for (int j = 0; j < d; ++j)
    out[j] = attention_out(out[j], den);
}

// The same from q and k (biases included): phi first, then the update.
TARNN_HD void linear_attention_step(const float *__restrict__ q, const float *__restrict__ k,
                                    const float *__restrict__ v, float *__restrict__ S,
                                    float *__restrict__ z, float *__restrict__ out, int d) {
  float fq[kMaxHeadDim], fk[kMaxHeadDim];
  for (int i = 0; i < d; ++i) {
    fq[i] = phi(q[i]);
    fk[i] = phi(k[i]);
  }
  linear_attention_update(fq, fk, v, S, z, out, d);
}

// ---- LayerNorm (biased variance, as torch) ------------------------------------------------------

// y = (x - mean) / sqrt(var + eps) * w + b for each of G rows of x ([G, n]), two passes in float.
// x and y may alias. Each row's sums run i ascending, one chain per row, so a row's bits do not
// depend on G; G rows side by side let a CPU overlap their adds, where one row alone is n
// dependent adds, twice (a 256-wide LayerNorm row by row was 5% of a CPU step, waiting).
template <int G>
TARNN_HD void layernorm_rows(const float *x, const float *w, const float *b, float *y, int n) {
  float mean[G] = {}, var[G] = {}, rstd[G];
  for (int i = 0; i < n; ++i)
    for (int g = 0; g < G; ++g)
      mean[g] += x[size_t(g) * n + i];
  for (int g = 0; g < G; ++g)
    mean[g] /= static_cast<float>(n);
  for (int i = 0; i < n; ++i)
    for (int g = 0; g < G; ++g) {
      const float c = x[size_t(g) * n + i] - mean[g];
      var[g] += c * c;
    }
  for (int g = 0; g < G; ++g)
    rstd[g] = 1.0f / sqrtf(var[g] / static_cast<float>(n) + kLayerNormEps);
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < n; ++i)
      y[size_t(g) * n + i] = (x[size_t(g) * n + i] - mean[g]) * rstd[g] * w[i] + b[i];
}

TARNN_HD void layernorm_row(const float *x, const float *w, const float *b, float *y, int n) {
  layernorm_rows<1>(x, w, b, y, n);
}

// ---- discretized mixture of logistics (SPEC section 2) ------------------------------------------

TARNN_HD float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
TARNN_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// log P(byte b | component) for one logistic with mean `mean` and raw log scale `log_scale`.
TARNN_HD float logistic_log_prob(int b, float mean, float log_scale) {
  const float log_s = fmaxf(log_scale, kMinLogScale);
  const float y = static_cast<float>(b) / 255.0f * 2.0f - 1.0f;
  const float c = y - mean;
  const float inv = expf(-log_s);
  const float plus = inv * (c + 1.0f / 255.0f);
  const float minus = inv * (c - 1.0f / 255.0f);
  if (b == 0)
    return plus - softplus(plus);
  if (b == 255)
    return -softplus(minus);
  // sigmoid(plus) - sigmoid(minus), evaluated as sigmoid(plus) sigmoid(-minus) (1 -
  // e^(minus-plus)): the same number without the cancellation that costs float 1e-4 of log P on
  // narrow bins.
  const float delta = sigmoid(plus) * sigmoid(-minus) * -expm1f(minus - plus);
  if (delta > 1e-5f)
    return logf(fmaxf(delta, 1e-12f));
  const float mid = inv * c;
  return mid - log_s - 2.0f * softplus(mid) - 4.8481163f; // log(127.5)
}

// 0 where each of a row's n mixture parameters is finite, NaN where one is not (0 * x is NaN
// exactly for an infinite or NaN x; +0 + -0 is +0). Added to the row's log-probability whether
// its byte was fed or drawn, it changes no bit of a finite sum and makes an overflow in the
// forward pass visible to Engine::run, which refuses it instead of returning its bytes.
TARNN_HD float overflow_mark(const float *o, int n) {
  float mark = 0.0f;
  for (int j = 0; j < n; ++j)
    mark += 0.0f * o[j];
  return mark;
}

// log p(b) = logsumexp_k(log_softmax(logits)_k + log P_k); o = [logits | means | log_scales].
TARNN_HD float mixture_log_prob(const float *o, int K, int b) {
  float mx = o[0];
  for (int k = 1; k < K; ++k)
    mx = fmaxf(mx, o[k]);
  float zsum = 0.0f;
  for (int k = 0; k < K; ++k)
    zsum += expf(o[k] - mx);
  const float log_z = mx + logf(zsum);
  float terms_max = -INFINITY, terms[64];
  for (int k = 0; k < K; ++k) {
    terms[k] = o[k] - log_z + logistic_log_prob(b, o[K + k], o[2 * K + k]);
    terms_max = fmaxf(terms_max, terms[k]);
  }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc += expf(terms[k] - terms_max);
  return terms_max + logf(acc);
}

// ---- Philox4x32-10 (Salmon et al., Random123; the generator cuRAND uses) ------------------------

struct Philox4 {
  uint32_t v[4];
};

TARNN_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

TARNN_HD Philox4 philox4x32_10(Philox4 ctr, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo32(0xD2511F53u, ctr.v[0], &hi0);
    const uint32_t lo1 = mulhilo32(0xCD9E8D57u, ctr.v[2], &hi1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  return ctr;
}

// SPEC section 3: the random words of image `image` at position `t`, draw `draw`, under `seed`.
// Key = seed, counter = (t, draw, image low, image high): a pure function of the four.
TARNN_HD Philox4 random_words(uint64_t seed, uint64_t image, uint32_t t, uint32_t draw) {
  const Philox4 ctr{{t, draw, static_cast<uint32_t>(image), static_cast<uint32_t>(image >> 32)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A uniform in (0, 1) from the top 23 bits, (n + 1/2) / 2^23: exact in float, never 0 or 1.
TARNN_HD float uniform01(uint32_t w) {
  return (static_cast<float>(w >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

// Draw one byte from the mixture o = [logits | means | log_scales] at temperature T (SPEC section
// 2) with two uniforms: a component k with weight exp((logit_k - max logit) / T), then
// x = mean_k + s_k (log u - log(1 - u)), u in (1e-5, 1-1e-5), s_k = T exp(max(log_scale_k, -7)).
// The temperature's operations are a float subtraction, division and multiplication, correctly
// rounded on the CPU and on CUDA alike; T = 1 divides and multiplies by one, exactly: the bits of
// the sampler without a temperature.
TARNN_HD int sample_mixture(const float *o, int K, float u_component, float u_logistic,
                            float T = 1.0f) {
  float mx = o[0];
  for (int k = 1; k < K; ++k)
    mx = fmaxf(mx, o[k]);
  float total = 0.0f;
  for (int k = 0; k < K; ++k)
    total += expf((o[k] - mx) / T); // at most 0 before expf: no overflow for any T > 0
  const float target = u_component * total;
  int pick = K - 1; // rounding can leave target above the last partial sum
  float cum = 0.0f;
  for (int k = 0; k < K; ++k) {
    cum += expf((o[k] - mx) / T);
    if (target < cum) {
      pick = k;
      break;
    }
  }
  const float u = 1e-5f + (1.0f - 2e-5f) * u_logistic;
  const float s = T * expf(fmaxf(o[2 * K + pick], kMinLogScale));
  const float x = o[K + pick] + s * (logf(u) - logf(1.0f - u));
  const float byte = floorf((x + 1.0f) * 0.5f * 255.0f + 0.5f);
  return byte >= 0.0f ? (byte <= 255.0f ? static_cast<int>(byte) : 255) : 0; // NaN -> 0
}

// The byte for image `image` at position `t` (the byte that becomes p_{t+1}), at temperature T.
TARNN_HD int sample_byte(const float *o, int K, uint64_t seed, uint64_t image, uint32_t t,
                         float T = 1.0f) {
  const Philox4 r = random_words(seed, image, t, 0);
  return sample_mixture(o, K, uniform01(r.v[0]), uniform01(r.v[1]), T);
}

} // namespace tarnn
