// The arithmetic both backends share (kernels/tarnn_math.h), against independent references.
#include <cmath>
#include <cpuid.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <immintrin.h>
#include <vector>

#include "kernels/state_format.h"
#include "kernels/tarnn_math.h"

using namespace tarnn;

TEST(Philox, MatchesRandom123KnownAnswers) {
  // kat_vectors of Random123 for philox4x32-10.
  struct Kat {
    Philox4 ctr;
    uint32_t k0, k1;
    Philox4 out;
  } kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat &k : kats) {
    const Philox4 r = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(r.v[i], k.out.v[i]) << "word " << i;
  }
}

TEST(Philox, EveryArgumentOfTheContractMatters) {
  const Philox4 base = random_words(7, 3, 10, 0);
  const Philox4 other[] = {random_words(8, 3, 10, 0),
                           random_words(7, 4, 10, 0),
                           random_words(7, 3, 11, 0),
                           random_words(7, 3, 10, 1),
                           random_words(7, 3 + (uint64_t(1) << 32), 10, 0),
                           random_words(7 + (uint64_t(1) << 32), 3, 10, 0)};
  for (const Philox4 &o : other)
    EXPECT_NE(base.v[0], o.v[0]);
  EXPECT_EQ(base.v[0], random_words(7, 3, 10, 0).v[0]); // a pure function
}

TEST(Uniform, StaysStrictlyInsideTheUnitInterval) {
  EXPECT_GT(uniform01(0), 0.0f);
  EXPECT_LT(uniform01(0xffffffffu), 1.0f);
  double mean = 0;
  for (uint32_t i = 0; i < 100000; ++i)
    mean += uniform01(random_words(1, i, 0, 0).v[0]) / 100000.0;
  EXPECT_NEAR(mean, 0.5, 0.005);
}

// A mixture whose components all sit at one mean with a tiny scale samples that mean's byte.
TEST(Sampling, TinyScaleSamplesTheMeanByte) {
  for (int b : {0, 1, 100, 254, 255}) {
    const float mean = float(b) / 255.0f * 2.0f - 1.0f;
    const float o[6] = {0.3f, -0.2f, mean, mean, -7.0f, -7.0f};
    for (uint32_t t = 0; t < 50; ++t)
      EXPECT_EQ(sample_byte(o, 2, 5, 0, t), b);
  }
}

TEST(Sampling, PicksComponentsByTheirSoftmaxWeights) {
  // component 1 has weight 3 / 4; it sits at byte 255, component 0 at byte 0
  const float o[6] = {0.0f, std::log(3.0f), -1.0f, 1.0f, -7.0f, -7.0f};
  int high = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i)
    high += sample_byte(o, 2, 11, uint64_t(i), 0) == 255;
  EXPECT_NEAR(double(high) / n, 0.75, 0.015);
}

TEST(Sampling, LogisticNoiseHasTheLogisticSpread) {
  // One component with scale s: the byte's spread around 127.5 has the logistic's variance
  // (pi s)^2 / 3 in [-1, 1] units (s = 0.05 keeps clipping negligible).
  const float s = 0.05f, o[3] = {0.0f, 0.0f, std::log(s)};
  double m2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = sample_byte(o, 1, 3, uint64_t(i), 7) / 255.0 * 2.0 - 1.0;
    m2 += x * x / n;
  }
  EXPECT_NEAR(std::sqrt(m2), M_PI * s / std::sqrt(3.0), 0.004);
}

// SPEC section 2's temperature: the logits divided by T. Weights 1 : 3 at T = 1 are
// 1 : 3^(1/T): at T = 0.5, 1 : 9; at T = 2, 1 : sqrt 3.
TEST(Sampling, TheTemperatureDividesTheLogits) {
  const float o[6] = {0.0f, std::log(3.0f), -1.0f, 1.0f, -7.0f, -7.0f};
  for (const auto &[T, want] :
       {std::pair{0.5f, 0.9}, {2.0f, std::sqrt(3.0) / (1 + std::sqrt(3.0))}, {1.0f, 0.75}}) {
    int high = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i)
      high += sample_byte(o, 2, 11, uint64_t(i), 0, T) > 127; // component 1 (its noise is 2 T e^-7)
    EXPECT_NEAR(double(high) / n, want, 0.015) << "T = " << T;
  }
}

// ... and multiplies the logistic's scale: s T, whose spread is T times that of T = 1.
TEST(Sampling, TheTemperatureMultipliesTheScale) {
  const float s = 0.05f, o[3] = {0.0f, 0.0f, std::log(s)};
  for (const float T : {0.5f, 2.0f}) {
    double m2 = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double x = sample_byte(o, 1, 3, uint64_t(i), 7, T) / 255.0 * 2.0 - 1.0;
      m2 += x * x / n;
    }
    EXPECT_NEAR(std::sqrt(m2), M_PI * s * T / std::sqrt(3.0), 0.004 * T) << "T = " << T;
  }
}

// T = 1 is the sampler without a temperature, to the bit (the same words, the same operations:
// x / 1 and 1 * x are exact); a tiny T draws the heaviest component's mean and never overflows
// (the logits' differences from their maximum are divided, never the logits themselves).
TEST(Sampling, TemperatureOneIsExactAndATinyOneIsTheMode) {
  const float o[6] = {2.0f, 1e30f, -0.5f, 0.5f, 0.0f, 0.0f};
  for (uint32_t t = 0; t < 200; ++t) {
    EXPECT_EQ(sample_byte(o, 2, 9, 4, t, 1.0f), sample_byte(o, 2, 9, 4, t));
    EXPECT_EQ(sample_byte(o, 2, 9, 4, t, 1e-30f), 191) << t; // (0.5 + 1) / 2 * 255, rounded
  }
  const float p[6] = {2.0f, 1.0f, -0.5f, 0.5f, 0.0f, 0.0f};
  for (uint32_t t = 0; t < 200; ++t)
    EXPECT_EQ(sample_byte(p, 2, 9, 4, t, 1e-30f), 64) << t; // component 0's mean, -0.5
}

TEST(Sampling, NonFiniteParametersGiveAByteNotACrash) {
  const float o[3] = {0.0f, NAN, 0.0f};
  const int b = sample_byte(o, 1, 1, 0, 0);
  EXPECT_GE(b, 0);
  EXPECT_LE(b, 255);
}

TEST(MixtureLogProb, IsANormalisedDistributionOverBytes) {
  const float cases[][3] = {{0.0f, 0.0f, -2.0f},
                            {0.0f, 0.9f, -5.0f},
                            {0.0f, -1.0f, -7.0f},
                            {0.0f, 0.3f, 1.0f},
                            {0.0f, 0.5f, -10.0f}};
  for (const auto &o : cases) {
    double total = 0;
    for (int b = 0; b < 256; ++b)
      total += std::exp(double(mixture_log_prob(o, 1, b)));
    EXPECT_NEAR(total, 1.0, 2e-3) << "mean " << o[1] << " log scale " << o[2];
  }
}

TEST(MixtureLogProb, MatchesTheSpecFormulaInDouble) {
  const float o[6] = {0.4f, -0.1f, -0.3f, 0.6f, -3.0f, -1.5f};
  for (int b : {0, 3, 77, 128, 200, 255}) {
    double terms[2], mx = -1e300;
    const double lz = std::log(std::exp(0.4) + std::exp(-0.1));
    for (int k = 0; k < 2; ++k) {
      const double mean = o[2 + k], ls = o[4 + k], y = b / 255.0 * 2 - 1, c = y - mean;
      const double inv = std::exp(-ls), plus = inv * (c + 1 / 255.0), minus = inv * (c - 1 / 255.0);
      const auto sp = [](double x) { return std::log1p(std::exp(x)); };
      const auto sg = [](double x) { return 1 / (1 + std::exp(-x)); };
      double lp = b == 0 ? plus - sp(plus) : b == 255 ? -sp(minus) : std::log(sg(plus) - sg(minus));
      terms[k] = o[k] - lz + lp;
      mx = std::max(mx, terms[k]);
    }
    const double want = mx + std::log(std::exp(terms[0] - mx) + std::exp(terms[1] - mx));
    EXPECT_NEAR(mixture_log_prob(o, 2, b), want, 1e-5) << "byte " << b;
  }
}

TEST(LayerNorm, MatchesDoublePrecision) {
  std::vector<float> x(37), w(37), b(37), y(37);
  for (int i = 0; i < 37; ++i) {
    x[i] = std::sin(1.3f * i) * 5 + 2;
    w[i] = 1 + 0.01f * i;
    b[i] = -0.02f * i;
  }
  layernorm_row(x.data(), w.data(), b.data(), y.data(), 37);
  double mean = 0, var = 0;
  for (float v : x)
    mean += v / 37.0;
  for (float v : x)
    var += (v - mean) * (v - mean) / 37.0;
  for (int i = 0; i < 37; ++i)
    EXPECT_NEAR(y[i], (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i], 1e-5);
}

// The recurrent step (state and output) against the attention recomputed from the whole history
// in double, at every one of 200 positions: errors that accumulate in S and z show up here.
TEST(LinearAttention, RecurrenceMatchesTheHistoryFormOverALongRollout) {
  const int d = 8, steps = 200;
  std::vector<float> S(d * d, 0.0f), z(d, 0.0f), out(d);
  std::vector<std::vector<double>> ks, vs;
  for (int t = 0; t < steps; ++t) {
    float q[d], k[d], v[d];
    for (int i = 0; i < d; ++i) {
      q[i] = std::sin(0.7f * t + i);
      k[i] = std::cos(0.3f * t * (i + 1));
      v[i] = std::sin(0.11f * t - i);
    }
    linear_attention_step(q, k, v, S.data(), z.data(), out.data(), d);
    ks.emplace_back(k, k + d);
    vs.emplace_back(v, v + d);
    const auto f = [](double u) { return u > 0 ? u + 1 : std::exp(u); };
    std::vector<double> num(d, 0.0), Sd(d * d, 0.0), zd(d, 0.0);
    double den = 0;
    for (int j = 0; j <= t; ++j) {
      double sim = 0;
      for (int i = 0; i < d; ++i)
        sim += f(q[i]) * f(ks[j][i]);
      for (int i = 0; i < d; ++i) {
        num[i] += sim * vs[j][i];
        zd[i] += f(ks[j][i]);
        for (int c = 0; c < d; ++c)
          Sd[i * d + c] += f(ks[j][i]) * vs[j][c];
      }
      den += sim;
    }
    for (int i = 0; i < d; ++i) {
      ASSERT_NEAR(out[i], num[i] / (den + 1e-6), 1e-5) << "t " << t;
      ASSERT_NEAR(z[i], zd[i], 1e-6 * (t + 1) * 4) << "t " << t;
      for (int c = 0; c < d; ++c)
        ASSERT_NEAR(S[i * d + c], Sd[i * d + c], 1e-6 * (t + 1) * 4) << "t " << t;
    }
  }
}

// phi's exp on the CPU (expf_exact) is glibc 2.36's expf to the bit: here on every 61st float
// from -0 down (TARNN_EXPF_ALL=1: every one of the 2,139,095,041, about a minute), and in any case
// within one ulp of exp in double. Special values as expf.
TEST(ExpfExact, IsGlibcsExpfAndWithinOneUlp) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
#if defined(__GLIBC__) && __GLIBC__ == 2 && __GLIBC_MINOR__ == 36 && defined(__x86_64__)
  const bool same_libm = true; // the version it was written from (its FMA build)
#else
  const bool same_libm = false;
#endif
  int64_t checked = 0, differ = 0;
  const uint64_t stride = std::getenv("TARNN_EXPF_ALL") ? 1 : 61;
  for (uint64_t b = 0x80000000u; b <= 0xff800000u; b += stride) { // -0 down to -inf, no NaNs
    uint32_t u = uint32_t(b);
    float x;
    std::memcpy(&x, &u, 4);
    const float got = expf_exact(x);
    const double want = std::exp(double(x));
    const float lo = std::nextafter(float(want), 0.0f), hi = std::nextafter(float(want), 2.0f);
    ASSERT_TRUE(got >= lo && got <= hi) << std::hexfloat << x << ": " << got << " vs " << want;
    differ += bits(got) != bits(std::exp(x));
    ++checked;
  }
  std::printf("%lld inputs, %lld differ from this libm's expf\n", (long long)checked,
              (long long)differ);
  if (same_libm) {
    EXPECT_EQ(differ, 0);
  }
  EXPECT_EQ(bits(expf_exact(-0.0f)), bits(1.0f));
  EXPECT_EQ(expf_exact(-INFINITY), 0.0f);
  EXPECT_EQ(expf_exact(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(expf_exact(NAN)));
  EXPECT_EQ(phi(2.5f), 3.5f);
  EXPECT_EQ(bits(phi(-1.0f)), bits(expf_exact(-1.0f)));
}

// ---- the 16-bit state's formats (kernels/state_format.h) ----------------------------------------

// fp16_bits is IEEE's round to nearest even: every fp16 round-trips, the edges land where they
// must, and where the CPU has F16C, vcvtps2ph and vcvtph2ps agree on every value tried.
__attribute__((target("f16c"))) uint16_t f16c_bits(float x) {
  return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_float(uint16_t h) { return _cvtsh_ss(h); }
// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

TEST(StateFormats, Fp16IsIeeeHalfPrecision) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = from_fp16(uint16_t(h));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(from_fp16(fp16_bits(f))));
    else
      ASSERT_EQ(fp16_bits(f), h) << "fp16 0x" << std::hex << h << " does not round-trip";
  }
  EXPECT_EQ(fp16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(fp16_bits(65519.996f), 0x7bff);
  EXPECT_EQ(fp16_bits(65520.0f), 0x7c00); // the tie goes to even: infinity
  EXPECT_EQ(fp16_bits(-1e30f), 0xfc00);
  EXPECT_EQ(fp16_bits(std::ldexp(1.0f, -24)), 0x0001); // the least subnormal
  EXPECT_EQ(fp16_bits(std::ldexp(1.0f, -25)), 0x0000); // half of it: ties to even
  EXPECT_EQ(fp16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // a tie below: even
  EXPECT_EQ(fp16_bits(-0.0f), 0x8000);
  EXPECT_EQ(quantize<StateFormat::Fp16>(3.7f, 3), quantize<StateFormat::Fp16>(3.7f, 0));
  EXPECT_EQ(quantize<StateFormat::Fp16>(1e6f, 9), 999936.0f); // 1e6 fp16 overflows; scaled, not
  EXPECT_EQ(state_scale_exponent(StateFormat::Fp16, -1), 0);
  EXPECT_EQ(state_scale_exponent(StateFormat::Fp16, 0), 0);
  EXPECT_EQ(state_scale_exponent(StateFormat::Fp16, 1), 1);
  EXPECT_EQ(state_scale_exponent(StateFormat::Fp16, 782), 9);
  EXPECT_EQ(state_scale_exponent(StateFormat::Fp32, 782), 0);
  if (!cpu_has_f16c())
    GTEST_SKIP() << "no F16C on this CPU: the instructions are not compared";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = from_fp16(uint16_t(h)), b = f16c_float(uint16_t(h));
    ASSERT_EQ(0, std::memcmp(&a, &b, 4)) << "fp16 0x" << std::hex << h;
  }
  const uint64_t stride = std::getenv("TARNN_FP16_ALL") ? 1 : 61; // every float: a few seconds
  uint64_t tried = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += stride, ++tried) {
    float x;
    const uint32_t v = uint32_t(u);
    std::memcpy(&x, &v, 4);
    ASSERT_EQ(fp16_bits(x), f16c_bits(x)) << "float 0x" << std::hex << v;
  }
  std::printf("fp16_bits = vcvtps2ph on %llu floats\n", static_cast<unsigned long long>(tried));
}
