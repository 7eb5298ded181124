// tarnn's test-backend-ops: every kernel of kernels/ run wherever this build and machine can run
// it, against a plain reference written here from the maths:
//   twin   the kernel's CPU twin (kernels/*.h), which the CPU backend itself runs: on any machine
//   cpu    the CPU backend's own form of the op where it differs from the twin (the row-form
//          linear attention of src/cpu)
//   cuda   the kernel on the GPU, where there is one (the case says so and skips where not)
// A new kernel is one entry in cases(). `test_kernels --perf` times each instead (MNIST shapes,
// batch 256; the GPU's time is the kernel launches alone, synchronised).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "kernels/bias_act.h"
#include "kernels/embedding.h"
#include "kernels/int8_rows.h"
#include "kernels/linear_attention.h"
#include "kernels/residual_layernorm.h"
#include "kernels/round_bf16.h"
#include "kernels/sample_bytes.h"
#include "src/cpu/cpu_ops.h"
#include "src/cpu/gemm_bf16.h"
#include "tarnn/tarnn.h"
#include "test_util.h"

#ifdef TARNN_TEST_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/no_device.h"
#include "kernels/cuda_util.h"
#include "kernels/launch.h"
#include "src/cuda/cuda_backend.h"
#endif

using namespace tarnn;

namespace {

enum class Where { Reference, Twin, Cpu, Cuda };
const char *where_name(Where w) {
  return w == Where::Reference ? "reference"
         : w == Where::Twin    ? "twin"
         : w == Where::Cpu     ? "cpu"
                               : "cuda";
}

// What a run produced, compared value by value.
struct Outputs {
  std::vector<float> f;
  std::vector<uint8_t> u;
  std::vector<double> d;
};

// Reproducible uniforms in [lo, hi) and bytes (Philox, stream `s`).
std::vector<float> uniforms(size_t n, uint32_t s, float lo, float hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * uniform01(random_words(0xC0FFEE, i, s, 1).v[0]);
  return v;
}
std::vector<uint8_t> bytes(size_t n, uint32_t s) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = uint8_t(random_words(0xB17E5, i, s, 2).v[0]);
  return v;
}

using Clock = std::chrono::steady_clock;

#ifdef TARNN_TEST_CUDA
using tarnn_test::no_device;
// Runs `launch` `reps` times between synchronisations; the seconds of the launches alone.
double timed(int reps, const std::function<void()> &launch) {
  if (reps > 1) { // a timing: one launch first loads the kernel. Not in a check: most kernels
    launch();     // work in place (y += b, S += phi(k) v^T), and a second launch is a second step
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i)
    launch();
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
#else
std::string no_device() {
  return device_built(Device::Cuda) ? "this test was built without the CUDA backend"
                                    : "no CUDA backend in this build (TARNN_CUDA=OFF or no nvcc)";
}
#endif

// Times `f` `reps` times on the CPU.
double timed_cpu(int reps, const std::function<void()> &f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i)
    f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Case {
  std::string name;
  std::vector<Where> where; // besides the reference
  double tolerance_cuda;    // relative to max(1, |reference|); the twin and cpu must be exact
  std::function<Outputs(Where, bool perf, int reps, double *seconds)> run;
};

// e_t = [E[p_t] | P[t]].
Case embedding_case() {
  return {
      "embedding", {Where::Twin, Where::Cuda}, 0, [](Where w, bool perf, int reps, double *secs) {
        const int rows = perf ? 256 : 37, D = perf ? 256 : 10, H = D / 2, L = 783;
        const auto E = uniforms(256 * size_t(H), 1, -2, 2), P = uniforms(size_t(L) * H, 2, -1, 1);
        const auto cur = bytes(rows, 3);
        StepParams p;
        p.t = 500;
        Outputs o;
        o.f.assign(size_t(rows) * D, 0);
        if (w == Where::Reference) {
          for (int r = 0; r < rows; ++r)
            for (int i = 0; i < D; ++i)
              o.f[size_t(r) * D + i] =
                  i < H ? E[size_t(cur[r]) * H + i] : P[size_t(p.t) * H + i - H];
        } else if (w == Where::Twin) {
          *secs = timed_cpu(reps, [&] {
            embedding_cpu(o.f.data(), E.data(), P.data(), cur.data(), &p, rows, D);
          });
        }
#ifdef TARNN_TEST_CUDA
        else {
          DeviceArray<float> dx(o.f), dE(E), dP(P);
          DeviceArray<uint8_t> dcur(cur);
          DeviceArray<StepParams> dp(std::vector<StepParams>{p});
          *secs = timed(reps, [&] {
            launch_embedding(dx.get(), dE.get(), dP.get(), dcur.get(), dp.get(), rows, D, nullptr);
          });
          o.f = dx.download();
        }
#endif
        return o;
      }};
}

// x rounded to what format f stores with exponent e (kernels/state_format.h: quantize).
float stored(float x, StateFormat f, int e) {
  return dispatch(f, [&](auto F) { return quantize<F>(x, e); });
}

// A state of `blocks` (image, layer, head) blocks as values: S (n x d) then z (n) per block, n =
// the feature map's width, and as the bytes of format f (state_format.h's layout).
std::vector<uint8_t> to_storage(const std::vector<float> &v, int blocks, int n, int d,
                                StateFormat f, int e) {
  std::vector<uint8_t> st(size_t(blocks) * state_block_bytes(n, d, f));
  for (int b = 0; b < blocks; ++b) {
    uint8_t *block = st.data() + size_t(b) * state_block_bytes(n, d, f);
    const float *S = &v[size_t(b) * n * (d + 1)];
    for (size_t i = 0; i < size_t(n) * d; ++i)
      f == StateFormat::Fp16   ? store_state<StateFormat::Fp16>(block, i, S[i], e)
      : f == StateFormat::Bf16 ? store_state<StateFormat::Bf16>(block, i, S[i], e)
                               : store_state<StateFormat::Fp32>(block, i, S[i], e);
    std::memcpy(block + state_s_bytes(n, d, f), S + size_t(n) * d, size_t(n) * 4);
  }
  return st;
}
std::vector<float> from_storage(const std::vector<uint8_t> &st, int blocks, int n, int d,
                                StateFormat f, const std::function<int(int)> &exponent) {
  std::vector<float> v(size_t(blocks) * n * (d + 1));
  for (int b = 0; b < blocks; ++b) {
    const int e = exponent(b);
    const uint8_t *block = st.data() + size_t(b) * state_block_bytes(n, d, f);
    float *S = &v[size_t(b) * n * (d + 1)];
    for (size_t i = 0; i < size_t(n) * d; ++i)
      S[i] = f == StateFormat::Fp16   ? load_state<StateFormat::Fp16>(block, i, e)
             : f == StateFormat::Bf16 ? load_state<StateFormat::Bf16>(block, i, e)
                                      : load_state<StateFormat::Fp32>(block, i, e);
    std::memcpy(S + size_t(n) * d, block + state_s_bytes(n, d, f), size_t(n) * 4);
  }
  return v;
}

// The feature map of a case: elu + 1 (the default), or another kind with its omega drawn here.
struct MapCase {
  FeatureMap fm;
  std::string label;
};

// One layer of linear attention, three steps from a random state (equations 16-20), S stored in
// format f, phi the feature map `mc` (n = F features: S is n x d): the outputs and the whole
// state. The reference updates each cell in fp32, reads it into the numerator, then rounds it to
// the storage (kernels/state_format.h); phi is feature_map.h's (checked against PyTorch by the
// goldens of tests/golden/small-*). Positions 6, 7 and 8: fp16's exponent goes from 2 to 3.
Case attention_case(int d, StateFormat f, const MapCase &mc = {}) {
  // cuda: its expf in phi may move a cell across a rounding boundary of the storage: one unit
  // in the last place of a 16-bit format (the state's values are below 16)
  const double cuda_tolerance = f == StateFormat::Fp32   ? 2e-5
                                : f == StateFormat::Fp16 ? 16.0 * std::ldexp(1.0, -10)
                                                         : 16.0 * std::ldexp(1.0, -7);
  return {
      "linear_attention d_head " + std::to_string(d) + " state " + name(f) + mc.label,
      {Where::Twin, Where::Cpu, Where::Cuda},
      cuda_tolerance,
      [d, f, mc](Where w, bool perf, int reps, double *secs) {
        const int rows = perf ? 256 : 9, layers = 2, heads = perf ? 8 : 3, layer = 1;
        Config c;
        c.n_layers = layers;
        c.n_heads = heads;
        c.d_head = d;
        c.feature_map = mc.fm;
        const int n = c.features();
        const std::vector<float> omega =
            uniforms(size_t(d) * c.feature_map.omega_columns(), 30, -1.5f, 1.5f);
        const PhiMap m = phi_map(c, omega.data());
        const int A = heads * d, steps = perf ? 1 : 3, blocks = rows * layers * heads, t0 = 6;
        StepParams p;
        std::vector<float> state = uniforms(size_t(blocks) * n * (d + 1), 10, 0.0f, 4.0f);
        for (float &x : state) // the state as its storage holds it after position t0 - 1
          x = stored(x, f, state_scale_exponent(f, t0 - 1));
        std::vector<uint8_t> st =
            to_storage(state, blocks, n, d, f, state_scale_exponent(f, t0 - 1));
        std::vector<float> att(size_t(rows) * A);
        for (int step = 0; step < steps; ++step) {
          p.t = t0 + step;
          const int e = state_scale_exponent(f, p.t);
          const auto qkv = uniforms(size_t(rows) * 3 * A, 20 + step, -2, 2);
          if (w == Where::Reference) {
            std::vector<float> fq(static_cast<size_t>(n)), fk(static_cast<size_t>(n));
            for (int r = 0; r < rows; ++r)
              for (int h = 0; h < heads; ++h) {
                const float *q = &qkv[size_t(r) * 3 * A + h * d], *k = q + A, *v = q + 2 * A;
                phi_features(m, q, fq.data());
                phi_features(m, k, fk.data());
                float *S = &state[size_t((r * layers + layer) * heads + h) * n * (d + 1)];
                float *z = S + size_t(n) * d, den = 0;
                for (int i = 0; i < n; ++i) { // S += phi(k) v^T, z += phi(k), then read
                  z[i] += fk[size_t(i)];
                  den += fq[size_t(i)] * z[i];
                }
                for (int j = 0; j < d; ++j) {
                  float num = 0;
                  for (int i = 0; i < n; ++i) {
                    const float s = S[size_t(i) * d + j] + fk[size_t(i)] * v[j];
                    num += fq[size_t(i)] * s;
                    S[size_t(i) * d + j] = stored(s, f, e);
                  }
                  att[size_t(r) * A + h * d + j] = num / (den + kAttentionEps);
                }
              }
          } else if (w == Where::Twin) {
            *secs += timed_cpu(reps, [&] {
              linear_attention_cpu(qkv.data(), st.data(), att.data(), rows, layer, layers, heads, m,
                                   f, p.t);
            });
          } else if (w == Where::Cpu) {
            *secs += timed_cpu(reps, [&] {
              linear_attention_rows(qkv.data(), st.data(), f, p.t, att.data(), rows, layer, c, m);
            });
          }
#ifdef TARNN_TEST_CUDA
          else {
            DeviceArray<uint8_t> dstate(st);
            DeviceArray<float> dqkv(qkv), datt(att.size());
            DeviceArray<StepParams> dp(std::vector<StepParams>{p});
            DeviceArray<float> domega(omega.empty() ? std::vector<float>{0.0f} : omega);
            PhiMap dm = m; // omega where the device reads it
            dm.omega = domega.get();
            *secs += timed(reps, [&] {
              launch_linear_attention(dqkv.get(), dstate.get(), datt.get(), rows, layer, layers,
                                      heads, dm, f, dp.get(), nullptr);
            });
            st = dstate.download();
            att = datt.download();
          }
#endif
          if (perf)
            break;
        }
        Outputs o;
        // the layer stepped was stored last at t0 + steps - 1, the other one at t0 - 1
        const auto exponent = [&](int b) {
          return state_scale_exponent(f, (b / heads) % layers == layer ? t0 + steps - 1 : t0 - 1);
        };
        o.f = w == Where::Reference ? state : from_storage(st, blocks, n, d, f, exponent);
        o.f.insert(o.f.end(), att.begin(), att.end());
        return o;
      }};
}

// y = act(y + b) for none, relu and gelu.
Case bias_act_case() {
  return {
      "bias_act", {Where::Twin, Where::Cuda}, 1e-6, [](Where w, bool perf, int reps, double *secs) {
        const int rows = perf ? 256 : 13, n = perf ? 1024 : 70;
        const auto b = uniforms(n, 30, -1, 1);
        Outputs o;
        for (Act a : {Act::None, Act::Relu, Act::Gelu}) {
          std::vector<float> y = uniforms(size_t(rows) * n, 31 + int(a), -4, 4);
          if (w == Where::Reference) {
            for (int r = 0; r < rows; ++r)
              for (int j = 0; j < n; ++j) {
                const float v = y[size_t(r) * n + j] + b[j];
                y[size_t(r) * n + j] = a == Act::Relu   ? std::max(v, 0.0f)
                                       : a == Act::Gelu ? gelu(v)
                                                        : v;
              }
          } else if (w == Where::Twin) {
            *secs += timed_cpu(reps, [&] { bias_act_cpu(y.data(), b.data(), rows, n, a); });
          }
#ifdef TARNN_TEST_CUDA
          else {
            DeviceArray<float> dy(y), db(b);
            *secs += timed(reps, [&] { launch_bias_act(dy.get(), db.get(), rows, n, a, nullptr); });
            y = dy.download();
          }
#endif
          o.f.insert(o.f.end(), y.begin(), y.end());
        }
        return o;
      }};
}

// A --precision bf16 GEMM's input rounded to bfloat16: normal values (ties among them), values
// near the largest float (some round to infinity), subnormals (to a zero of their sign). The
// reference rounds by arithmetic, not by bits: x scaled to 8 significant bits, nearbyint (ties to
// even), scaled back. The CPU's form is the GEMM's own rounding (round_to_bf16_pairs).
Case round_bf16_case() {
  return {"round_bf16",
          {Where::Twin, Where::Cpu, Where::Cuda},
          0.0,
          [](Where w, bool perf, int reps, double *secs) {
            const size_t n = perf ? size_t(1) << 22 : 4096;
            std::vector<float> x = uniforms(n, 50, -4, 4);
            for (size_t i = 0; i < n; ++i) {
              if (i % 7 == 1) // a tie: 1.bbbbbbb1 x 2^e, halfway between two bf16 neighbours
                x[i] = std::ldexp(float(257 + 2 * (i % 64)) / 256.0f, int(i % 20) - 10);
              if (i % 11 == 2)
                x[i] = std::ldexp(x[i], 125); // up to 2^127, beyond it, and infinite
              if (i % 13 == 3)
                x[i] = std::ldexp(x[i], -130); // subnormal
            }
            std::vector<uint16_t> out(n);
            if (w == Where::Reference) {
              for (size_t i = 0; i < n; ++i) {
                const float v = x[i];
                float r = std::isinf(v) ? v : 0.0f; // and subnormals to zero
                if (std::fpclassify(v) == FP_NORMAL) {
                  const int e = std::ilogb(v);
                  r = float(std::ldexp(std::nearbyint(std::ldexp(double(v), 7 - e)), e - 7));
                }
                const float signed_r = std::copysign(r, v);
                uint32_t u;
                std::memcpy(&u, &signed_r, 4);
                out[i] = uint16_t(u >> 16);
              }
            } else if (w == Where::Twin) {
              *secs += timed_cpu(reps, [&] { round_bf16_cpu(x.data(), out.data(), n); });
            } else if (w == Where::Cpu) {
              std::vector<uint32_t> pairs(n / 2);
              *secs += timed_cpu(
                  reps, [&] { round_to_bf16_pairs(x.data(), int(n), 1, int(n), pairs.data()); });
              std::memcpy(out.data(), pairs.data(), n * 2);
            }
#ifdef TARNN_TEST_CUDA
            else {
              DeviceArray<float> dx(x);
              DeviceArray<uint16_t> dout(out);
              *secs += timed(reps, [&] { launch_round_bf16(dx.get(), dout.get(), n, nullptr); });
              out = dout.download();
            }
#endif
            Outputs o;
            for (uint16_t h : out)
              o.f.push_back(from_bf16(h));
            return o;
          }};
}

// GELU on the GPU: its erff is CUDA's (libdevice's polynomial and ex2.approx), within 2 ulp of
// the host's glibc erff but not its bits (docs/CUDA.md, "The emulated device"): a 1-ulp step in
// erf near -1 is 0.5 |u| ulp of 1 in gelu(u), 1.5e-7 at u = -5. bias_act's tolerance too.
constexpr double kGeluTolerance = 1e-6;

// --precision int8 on CUDA around cuBLASLt's GEMM: a GEMM input's rows quantized (with a zero, a
// NaN and an infinite row, and a row of one value) into rows int8_padded(in) apart, zeros after
// `in`, then int32 sums int8_padded(out) apart scaled back, with and without b, for `acts`. The
// reference is gemm_int8_ref.h's functions one element at a time; the GPU must give its bits (the
// CPU's int8 GEMM quantizes and scales with them), but for GELU's erff: int8_rows_gelu, y alone
// (with_q false: the quantized rows are int8_rows's), within kGeluTolerance.
Outputs int8_rows_run(const std::vector<Act> &acts, bool with_q, Where w, bool perf, int reps,
                      double *secs) {
  const int rows = perf ? 256 : 13, in = perf ? 1024 : 70, out = perf ? 1024 : 37;
  const int ldq = int8_padded(in), ldacc = int8_padded(out); // 72 and 40: padded
  std::vector<float> x = uniforms(size_t(rows) * in, 60, -3, 3);
  std::fill_n(x.begin() + 1 * in, in, 0.0f);
  x[size_t(2) * in + 5] = NAN;
  x[size_t(3) * in + 7] = -INFINITY;
  std::fill_n(x.begin() + 4 * in, in, -0.75f);
  const auto b = uniforms(size_t(out), 61, -1, 1), sw = uniforms(size_t(out), 62, 0, 0.01f);
  std::vector<int32_t> acc(size_t(rows) * ldacc, 0x7eadbeef); // the padding: never read
  const auto a = uniforms(acc.size(), 63, -1, 1);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      const size_t i = size_t(r) * out + j;
      acc[size_t(r) * ldacc + j] = int32_t(a[i] * 127 * 127 * in * (i % 5 == 0 ? 1.0f : 0.05f));
    }
  std::vector<int8_t> q(size_t(rows) * ldq, int8_t(85)); // the padding: to be written 0
  std::vector<float> sx(static_cast<size_t>(rows));
  Outputs o;
  for (Act act : acts)
    for (const float *bias : {b.data(), static_cast<const float *>(nullptr)}) {
      std::vector<float> y(size_t(rows) * out);
      if (w == Where::Reference) {
        for (int r = 0; r < rows; ++r) {
          const float *v = x.data() + size_t(r) * in;
          const Int8Scale sc = int8_scale(abs_max_bits(v, in));
          sx[size_t(r)] = sc.scale;
          for (int k = 0; k < ldq; ++k)
            q[size_t(r) * ldq + k] = sc.inv == 0.0f || k >= in ? 0 : int8_quantize(v[k], sc.inv);
          for (int j = 0; j < out; ++j)
            y[size_t(r) * out + j] =
                int8_finish(acc[size_t(r) * ldacc + j], sx[size_t(r)], sw[j], bias, j, act);
        }
      } else if (w == Where::Twin) {
        *secs += timed_cpu(reps, [&] {
          quantize_rows_int8_cpu(x.data(), rows, in, ldq, q.data(), sx.data());
          finish_int8_cpu(acc.data(), ldacc, sx.data(), sw.data(), bias, rows, out, act, y.data());
        });
      }
#ifdef TARNN_TEST_CUDA
      else {
        DeviceArray<float> dx(x), dsx(sx), dsw(sw), db(b), dy(y);
        DeviceArray<int8_t> dq(q);
        DeviceArray<int32_t> dacc(acc);
        const float *dbias = bias ? db.get() : nullptr;
        *secs += timed(reps, [&] {
          launch_quantize_rows_int8(dx.get(), rows, in, ldq, dq.get(), dsx.get(), nullptr);
          launch_finish_int8(dacc.get(), ldacc, dsx.get(), dsw.get(), dbias, rows, out, act,
                             dy.get(), nullptr);
        });
        q = dq.download();
        sx = dsx.download();
        y = dy.download();
      }
#endif
      if (with_q) {
        for (int8_t v : q)
          o.f.push_back(float(v));
        o.f.insert(o.f.end(), sx.begin(), sx.end());
      }
      o.f.insert(o.f.end(), y.begin(), y.end());
      if (perf)
        return o;
    }
  return o;
}

Case int8_rows_case() {
  return {
      "int8_rows", {Where::Twin, Where::Cuda}, 0.0, [](Where w, bool perf, int reps, double *secs) {
        return int8_rows_run({Act::None, Act::Relu}, true, w, perf, reps, secs);
      }};
}

Case int8_rows_gelu_case() {
  return {"int8_rows_gelu",
          {Where::Twin, Where::Cuda},
          kGeluTolerance,
          [](Where w, bool perf, int reps, double *secs) {
            return int8_rows_run({Act::Gelu}, false, w, perf, reps, secs);
          }};
}

// A LayerNorm's outputs: x, then each element's bf16 copy less x rounded by bf16_bits where the
// copy was written (`copied`), else 0 (the reference's, and the CPU form's, which has no copy).
void append_norm(Outputs &o, const std::vector<float> &x, const std::vector<uint16_t> &x16,
                 bool copied) {
  o.f.insert(o.f.end(), x.begin(), x.end());
  for (size_t i = 0; i < x.size(); ++i)
    o.f.push_back(copied ? from_bf16(x16[i]) - from_bf16(bf16_bits(x[i])) : 0.0f);
}

// x = LayerNorm(x + y), and the final norm x = LayerNorm(x). The CPU's form takes 16 rows at a
// time where the width is a multiple of 16 (37 rows of 64: two groups and five rows after). The
// twin and the GPU kernel also write x's bf16 copy (for a bf16 GEMM after it): each element's
// difference from x rounded by bf16_bits is an output, 0 in the reference (and in the CPU's form,
// which has no copy).
Case layernorm_case() {
  return {"residual_layernorm",
          {Where::Twin, Where::Cpu, Where::Cuda},
          1e-5,
          [](Where w, bool perf, int reps, double *secs) {
            Outputs o;
            for (const auto &shape : perf ? std::vector<std::pair<int, int>>{{256, 256}}
                                          : std::vector<std::pair<int, int>>{{11, 70}, {37, 64}})
              for (bool residual : {true, false}) {
                const int rows = shape.first, n = shape.second; // (lambdas cannot capture bindings)
                const auto wt = uniforms(n, 40, 0.5f, 1.5f), nb = uniforms(n, 41, -0.2f, 0.2f);
                const auto y = uniforms(size_t(rows) * n, 42, -3, 3);
                std::vector<float> x = uniforms(size_t(rows) * n, 43, -2, 2);
                std::vector<uint16_t> x16(x.size(), 0xffff); // a NaN where not written
                bool copied = false;
                if (w == Where::Reference) {
                  for (int r = 0; r < rows; ++r) {
                    double mean = 0, var = 0;
                    std::vector<double> v(n);
                    for (int i = 0; i < n; ++i)
                      mean += v[i] =
                          x[size_t(r) * n + i] + (residual ? y[size_t(r) * n + i] : 0.0f);
                    mean /= n;
                    for (int i = 0; i < n; ++i)
                      var += (v[i] - mean) * (v[i] - mean);
                    var /= n;
                    for (int i = 0; i < n; ++i)
                      x[size_t(r) * n + i] =
                          float((v[i] - mean) / std::sqrt(var + kLayerNormEps) * wt[i] + nb[i]);
                  }
                } else if (w == Where::Twin) {
                  *secs += timed_cpu(reps, [&] {
                    residual_layernorm_cpu(x.data(), residual ? y.data() : nullptr, wt.data(),
                                           nb.data(), rows, n, x16.data());
                  });
                  copied = true;
                } else if (w == Where::Cpu) {
                  *secs += timed_cpu(reps, [&] {
                    CpuKernels{}.add_norm(x.data(), residual ? y.data() : nullptr, wt.data(),
                                          nb.data(), rows, n);
                  });
                }
#ifdef TARNN_TEST_CUDA
                else {
                  DeviceArray<float> dx(x), dy(y), dw(wt), db(nb);
                  DeviceArray<uint16_t> dx16(x16);
                  *secs += timed(reps, [&] {
                    launch_residual_layernorm(dx.get(), residual ? dy.get() : nullptr, dw.get(),
                                              db.get(), rows, n, nullptr, dx16.get());
                  });
                  x = dx.download();
                  x16 = dx16.download();
                  copied = true;
                }
#endif
                append_norm(o, x, x16, copied);
              }
            return o;
          }};
}

// LayerNorm(x + y) then the final norm in one pass, each row read once (launch_layernorm_rows; its
// twin layernorm_rows_cpu): x and its bf16 copy, as layernorm_case's, at widths on both sides of
// a register size (70, 256).
Case layernorm_rows_case() {
  return {"layernorm_rows final",
          {Where::Twin, Where::Cuda},
          1e-5,
          [](Where w, bool perf, int reps, double *secs) {
            Outputs o;
            for (const auto &shape : perf ? std::vector<std::pair<int, int>>{{256, 256}}
                                          : std::vector<std::pair<int, int>>{{11, 70}, {9, 256}}) {
              const int rows = shape.first, n = shape.second;
              const auto w1 = uniforms(n, 40, 0.5f, 1.5f), b1 = uniforms(n, 41, -0.2f, 0.2f);
              const auto w2 = uniforms(n, 44, 0.5f, 1.5f), b2 = uniforms(n, 45, -0.2f, 0.2f);
              const auto y = uniforms(size_t(rows) * n, 42, -3, 3);
              std::vector<float> x = uniforms(size_t(rows) * n, 43, -2, 2);
              std::vector<uint16_t> x16(x.size(), 0xffff);
              bool copied = false;
              if (w == Where::Reference) {
                for (int r = 0; r < rows; ++r) {
                  std::vector<double> v(n);
                  for (int i = 0; i < n; ++i)
                    v[i] = x[size_t(r) * n + i] + y[size_t(r) * n + i];
                  for (const auto *g : {&w1, &w2}) {
                    const auto &gain = *g, &bias = g == &w1 ? b1 : b2;
                    double mean = 0, var = 0;
                    for (double e : v)
                      mean += e / n;
                    for (double e : v)
                      var += (e - mean) * (e - mean) / n;
                    for (int i = 0; i < n; ++i)
                      v[i] =
                          float((v[i] - mean) / std::sqrt(var + kLayerNormEps) * gain[i] + bias[i]);
                  }
                  for (int i = 0; i < n; ++i)
                    x[size_t(r) * n + i] = float(v[i]);
                }
              } else if (w == Where::Twin) {
                *secs += timed_cpu(reps, [&] {
                  layernorm_rows_cpu(x.data(), y.data(), w1.data(), b1.data(), w2.data(), b2.data(),
                                     rows, n, x16.data());
                });
                copied = true;
              }
#ifdef TARNN_TEST_CUDA
              else {
                DeviceArray<float> dx(x), dy(y), dw1(w1), db1(b1), dw2(w2), db2(b2);
                DeviceArray<uint16_t> dx16(x16);
                *secs += timed(reps, [&] {
                  launch_layernorm_rows(dx.get(), dy.get(), dw1.get(), db1.get(), dw2.get(),
                                        db2.get(), rows, n, dx.get(), dx16.get(), nullptr);
                });
                x = dx.download();
                x16 = dx16.download();
                copied = true;
              }
#endif
              append_norm(o, x, x16, copied);
            }
            return o;
          }};
}

// p_{t+1} over 4 positions with half the bytes known: the given byte and its log-likelihood, or
// the Philox draw of SPEC section 3 at temperature 0.7.
Case sample_case() {
  return {"sample_bytes",
          {Where::Twin, Where::Cuda},
          1e-5,
          [](Where w, bool perf, int reps, double *secs) {
            const int rows = perf ? 256 : 300, K = 10, T = 6;
            const auto given = bytes(size_t(rows) * T, 50);
            std::vector<uint8_t> known = bytes(size_t(rows) * T, 51);
            for (uint8_t &m : known)
              m &= 1;
            StepParams p;
            p.has_given = p.has_known = 1;
            p.seed = 12345;
            p.image_base = 1000;
            p.temperature = 0.7f; // SPEC section 2: the logits / T, the scales x T
            Outputs o;
            o.u.assign(size_t(rows) * T + rows, 0);
            o.d.assign(rows, 0.0);
            uint8_t *out = o.u.data(), *cur = out + size_t(rows) * T;
            for (int t = 0; t < 4; ++t) {
              p.t = t;
              std::vector<float> mix = uniforms(size_t(rows) * 3 * K, 52 + t, -1, 1);
              for (int r = 0; r < rows; ++r)
                for (int i = 0; i < K; ++i) {
                  mix[size_t(r) * 3 * K + i] *= 3.0f;
                  float &s = mix[size_t(r) * 3 * K + 2 * K + i];
                  s = s * 2.5f - 3.5f;
                }
              if (w == Where::Reference) {
                for (int r = 0; r < rows; ++r) {
                  const size_t at = size_t(r) * T + t + 1;
                  const float *orow = &mix[size_t(r) * 3 * K];
                  int b = given[at];
                  if (known[at])
                    o.d[r] += mixture_log_prob(orow, K, b);
                  else
                    b = sample_byte(orow, K, p.seed, p.image_base + r, uint32_t(t), p.temperature);
                  out[at] = cur[r] = uint8_t(b);
                }
              } else if (w == Where::Twin) {
                *secs += timed_cpu(reps, [&] {
                  sample_bytes_cpu(mix.data(), K, given.data(), known.data(), T, cur, out,
                                   o.d.data(), &p, rows);
                });
              }
#ifdef TARNN_TEST_CUDA
              else {
                DeviceArray<float> dmix(mix);
                DeviceArray<uint8_t> dgiven(given), dknown(known),
                    dout(std::vector<uint8_t>(out, out + size_t(rows) * T)),
                    dcur(std::vector<uint8_t>(cur, cur + rows));
                DeviceArray<double> dlp(o.d);
                DeviceArray<StepParams> dp(std::vector<StepParams>{p});
                *secs += timed(reps, [&] {
                  launch_sample_bytes(dmix.get(), K, dgiven.get(), dknown.get(), T, dcur.get(),
                                      dout.get(), dlp.get(), dp.get(), rows, nullptr);
                });
                const auto got_out = dout.download(), got_cur = dcur.download();
                std::copy(got_out.begin(), got_out.end(), out);
                std::copy(got_cur.begin(), got_cur.end(), cur);
                o.d = dlp.download();
              }
#endif
              if (perf)
                break;
            }
            return o;
          }};
}

std::vector<Case> cases() {
  std::vector<Case> all = {embedding_case(),      bias_act_case(),      layernorm_case(),
                           layernorm_rows_case(), sample_case(),        round_bf16_case(),
                           int8_rows_case(),      int8_rows_gelu_case()};
  for (StateFormat f : all_state_formats())
    for (int d : {32, 6, 20, 64, 256})
      all.push_back(attention_case(d, f));
  // the other feature maps (docs/SPEC.md "Feature maps"): relu at the register path's d_head and
  // off it; each random-feature map with F other than d_head (S not square), in fp32 and fp16
  auto map = [](FeatureMapKind k, int n_dims, double temp,
                FeatureMapKind fn = FeatureMapKind::Relu) {
    return MapCase{tarnn_test::feature_map_of(k, n_dims, temp, fn),
                   std::string(", ") + feature_map_name(k) +
                       (n_dims ? " n_dims " + std::to_string(n_dims) : "")};
  };
  for (StateFormat f : {StateFormat::Fp32, StateFormat::Fp16}) {
    for (int d : {32, 20})
      all.push_back(attention_case(d, f, map(FeatureMapKind::Relu, 0, 1)));
    all.push_back(attention_case(32, f, map(FeatureMapKind::RandomFourier, 40, 0.2)));
    all.push_back(attention_case(6, f, map(FeatureMapKind::SmoothedRandomFourier, 10, 0.4)));
    all.push_back(attention_case(20, f, map(FeatureMapKind::Favor, 12, 0.05)));
    all.push_back(attention_case(
        6, f, map(FeatureMapKind::GeneralizedRandom, 9, 1, FeatureMapKind::EluPlusOne)));
  }
  return all;
}

// The largest difference, relative to max(1, |reference|); 1 for any differing byte.
// got's distance from want relative to |want| (at least 1). Equal values (infinities, NaNs
// included) are 0 apart, and an infinity or NaN on one side only is infinitely far: the plain
// difference would be NaN, which std::max passes over, so such a mismatch could never fail.
double gap(double got, double want) {
  if (got == want || (std::isnan(got) && std::isnan(want)))
    return 0.0;
  if (!std::isfinite(got) || !std::isfinite(want))
    return INFINITY;
  return std::fabs(got - want) / std::max(1.0, std::fabs(want));
}

double max_error(const Outputs &got, const Outputs &want) {
  if (got.f.size() != want.f.size() || got.u.size() != want.u.size() ||
      got.d.size() != want.d.size())
    return INFINITY;
  double worst = got.u == want.u ? 0.0 : 1.0;
  for (size_t i = 0; i < want.f.size(); ++i)
    worst = std::max(worst, gap(got.f[i], want.f[i]));
  for (size_t i = 0; i < want.d.size(); ++i)
    worst = std::max(worst, gap(got.d[i], want.d[i]));
  return worst;
}

// The twin and the CPU form compute in the reference's own order here only for the twins' element
// functions; the plain reference may round differently (its own loop order, double LayerNorm).
constexpr double kTwinTolerance = 2e-6;

bool perf_mode = false;

class Kernels : public ::testing::TestWithParam<size_t> {};

// TARNN_KERNELS=cuda runs only the GPU legs (ctest's test_kernels_cuda, reported skipped where
// there is no GPU); otherwise every host leg runs.
bool only_cuda() {
  const char *e = std::getenv("TARNN_KERNELS");
  return e && std::string(e) == "cuda";
}

TEST_P(Kernels, MatchTheReferenceOnEveryBackend) {
  const Case c = cases()[GetParam()];
  if (only_cuda() && !no_device().empty())
    GTEST_SKIP() << "no GPU: " << no_device();
  double unused = 0;
  const Outputs ref = c.run(Where::Reference, false, 1, &unused);
  Outputs twin = c.run(Where::Twin, false, 1, &unused);
  for (Where w : c.where) {
    if ((w == Where::Cuda) != only_cuda())
      continue;
    const Outputs got = c.run(w, false, 1, &unused);
    const double err = max_error(got, ref);
    const double tol = w == Where::Cuda ? c.tolerance_cuda : kTwinTolerance;
    std::printf("%-28s %-6s max error %.3g (tolerance %.3g)\n", c.name.c_str(), where_name(w), err,
                tol);
    EXPECT_LE(err, tol) << c.name << " on " << where_name(w);
    if (w == Where::Cpu) { // the CPU backend's own form runs the twin's arithmetic to the bit
      EXPECT_EQ(max_error(got, twin), 0.0) << c.name << ": cpu and twin differ";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, Kernels, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t> &i) {
                           std::string n = cases()[i.param].name;
                           for (char &ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch)))
                               ch = '_';
                           return n;
                         });

#ifdef TARNN_TEST_CUDA
// The toolkit's fp16 conversions (the emulated device's, where it is the build's: the ones its
// kernels run) give kernels/state_format.h's host forms' bits: every fp16 widened, and floats
// around every fp16 and every tie between two, the subnormals' and 65504's and 65520's included,
// narrowed (a NaN stays a NaN).
TEST(DeviceIntrinsics, Fp16ConversionsAsTheHostForms) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = from_fp16(uint16_t(h)), got = __half2float(__ushort_as_half(uint16_t(h)));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << h;
    // the value and the floats either side of it, the midpoint to the next and either side of it
    const float mid = (h & 0x7fffu) >= 0x7bffu ? want : 0.5f * (want + from_fp16(uint16_t(h + 1)));
    for (float x : {want, std::nextafter(want, INFINITY), std::nextafter(want, -INFINITY), mid,
                    std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)})
      ASSERT_EQ(__half_as_ushort(__float2half_rn(x)), fp16_bits(x))
          << x << " (after fp16 " << h << ")";
  }
  for (float x : {65504.0f, 65519.99f, 65520.0f, 1e30f, -1e-30f, std::ldexp(1.0f, -25),
                  std::ldexp(1.5f, -25), INFINITY, -INFINITY})
    EXPECT_EQ(__half_as_ushort(__float2half_rn(x)), fp16_bits(x)) << x;
  EXPECT_TRUE(std::isnan(from_fp16(__half_as_ushort(__float2half_rn(NAN)))));
}

// bfloat16: __float2bfloat16 rounds every normal float as bf16_bits does (to nearest even), and
// keeps the subnormals that bf16_bits sends to zero (vcvtne2ps2bf16's rule, which the bf16 GEMMs
// of both backends use: a kernel that rounded with __float2bfloat16 would differ there).
TEST(DeviceIntrinsics, Bf16RoundingAsBf16BitsButForSubnormals) {
  for (uint32_t top = 0; top < 65536; ++top)
    for (uint32_t low : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t u = top << 16 | low;
      float f;
      std::memcpy(&f, &u, 4);
      const uint16_t got = __bfloat16_as_ushort(__float2bfloat16(f));
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(from_bf16(got))) << u;
      } else if (std::fpclassify(f) == FP_SUBNORMAL) {
        ASSERT_EQ(got, uint16_t((u + 0x7fffu + (u >> 16 & 1u)) >> 16)) << u; // kept, rounded
        ASSERT_EQ(from_bf16(bf16_bits(f)), 0.0f) << u;
      } else {
        ASSERT_EQ(got, bf16_bits(f)) << u;
      }
      const float widened = __bfloat162float(__ushort_as_bfloat16(uint16_t(top))),
                  want = from_bf16(uint16_t(top));
      ASSERT_EQ(std::memcmp(&widened, &want, 4), 0) << top; // exact, NaNs included
    }
}
#endif

// --perf: microseconds per call at MNIST shapes, batch 256, every backend present.
int run_perf() {
  for (const Case &c : cases()) {
    for (Where w : c.where) {
      if (w == Where::Cuda && !no_device().empty())
        continue;
      const int reps = w == Where::Cuda ? 200 : 20;
      double secs = 0;
      c.run(w, true, reps, &secs);
      std::printf("%-28s %-6s %10.2f us per call\n", c.name.c_str(), where_name(w),
                  secs / reps * 1e6);
    }
  }
  if (!no_device().empty())
    std::printf("(cuda: %s)\n", no_device().c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    perf_mode = perf_mode || std::strcmp(argv[i], "--perf") == 0;
  if (perf_mode)
    return run_perf();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
