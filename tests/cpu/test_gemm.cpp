// The GEMM kernel against its plain reference: the same bits, whatever the shape and whatever
// rows share a call (what makes images independent of --batch and --threads).
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "kernels/cpu_features.h"
#include "src/cpu/gemm.h"
#include "src/cpu/gemm_bf16.h"

using namespace tarnn;

namespace {

Linear make_linear(int out, int in, int seed) {
  Linear l{out, in, std::vector<float>(size_t(out) * in), std::vector<float>(size_t(out))};
  for (size_t i = 0; i < l.w.size(); ++i)
    l.w[i] = std::sin(float(i * 7 + seed)) * 0.3f;
  for (int j = 0; j < out; ++j)
    l.b[j] = std::cos(float(j + seed));
  return l;
}

std::vector<float> make_x(int rows, int in) {
  std::vector<float> x(size_t(rows) * in);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(float(i) * 0.37f) * 2.0f;
  return x;
}

} // namespace

TEST(Gemm, FastPathEqualsReferenceBitForBit) {
  std::printf("linear_forward path: %s\n", cpu_path_name());
  for (int out : {1, 30, 32, 33, 100})
    for (int in : {1, 7, 256})
      for (int rows : {1, 5, 8, 9, 17})
        for (Act e : {Act::None, Act::Relu, Act::Gelu}) {
          const Linear l = make_linear(out, in, out + in);
          const PackedLinear p = pack(l);
          const std::vector<float> x = make_x(rows, in);
          std::vector<float> fast(size_t(rows) * out, -1), ref(size_t(rows) * out, -2);
          linear_forward(p, x.data(), in, rows, fast.data(), out, e);
          linear_forward_ref(l.w.data(), l.b.data(), out, in, x.data(), in, rows, ref.data(), out,
                             e);
          ASSERT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * 4))
              << out << "x" << in << " rows " << rows;
        }
}

TEST(Gemm, ARowsResultDoesNotDependOnTheRowsBesideIt) {
  const Linear l = make_linear(70, 256, 3);
  const PackedLinear p = pack(l);
  const int rows = 21;
  const std::vector<float> x = make_x(rows, 256);
  std::vector<float> all(size_t(rows) * 70);
  linear_forward(p, x.data(), 256, rows, all.data(), 70, Act::None);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> one(70);
    linear_forward(p, &x[size_t(r) * 256], 256, 1, one.data(), 70, Act::None);
    ASSERT_EQ(0, std::memcmp(one.data(), &all[size_t(r) * 70], 70 * 4)) << "row " << r;
  }
}

TEST(Gemm, ReferenceIsAnAccurateProduct) {
  const Linear l = make_linear(9, 50, 1);
  const std::vector<float> x = make_x(3, 50);
  std::vector<float> y(27);
  linear_forward_ref(l.w.data(), l.b.data(), 9, 50, x.data(), 50, 3, y.data(), 9, Act::None);
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 9; ++j) {
      double want = l.b[j];
      for (int k = 0; k < 50; ++k)
        want += double(x[r * 50 + k]) * l.w[j * 50 + k];
      EXPECT_NEAR(y[r * 9 + j], want, 1e-5);
    }
}

// Without a bias the reference is the bare product, as cuBLAS leaves it for bias_act.
TEST(Gemm, ReferenceWithoutBiasIsTheBareProduct) {
  const Linear l = make_linear(5, 20, 2);
  const std::vector<float> x = make_x(2, 20);
  std::vector<float> with(10), bare(10);
  linear_forward_ref(l.w.data(), l.b.data(), 5, 20, x.data(), 20, 2, with.data(), 5, Act::None);
  linear_forward_ref(l.w.data(), nullptr, 5, 20, x.data(), 20, 2, bare.data(), 5, Act::None);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 5; ++j)
      EXPECT_EQ(with[r * 5 + j], bare[r * 5 + j] + l.b[j]);
}

// ---- bf16 (src/cpu/gemm_bf16.h) ----------------------------------------------------------------

TEST(GemmBf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(1.0f + 1.0f / 256), 0x3f80);         // a tie: to the even neighbour, down
  EXPECT_EQ(bf16_bits(1.0f + 3.0f / 256), 0x3f82);         // a tie: to the even neighbour, up
  EXPECT_EQ(bf16_bits(1.0f + 1.0f / 256 + 1e-6f), 0x3f81); // past the tie: up
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(from_bf16(bf16_bits(NAN))));
  EXPECT_EQ(from_bf16(bf16_bits(0.15625f)), 0.15625f); // exact in bf16: unchanged
}

// Every kind of float (random bit patterns: subnormals, infinities, NaNs, ties) and every tail
// length: the instruction's rounding (on a CPU with AVX512_BF16) is bf16_bits', bit for bit.
TEST(GemmBf16, RoundingTheInputIsToBf16OnEveryFloat) {
  std::printf("round_to_bf16_pairs path: %s\n",
              cpu_has_avx512_bf16() ? "AVX512_BF16 (vcvtne2ps2bf16)" : "portable");
  uint32_t bits = 12345;
  for (int in = 1; in <= 70; ++in) {
    const int rows = 300, ldx = in + 3, pairs = (in + 1) / 2;
    std::vector<float> x(size_t(rows) * ldx);
    for (float &f : x) {
      bits = bits * 1664525u + 1013904223u;
      uint32_t u = bits;
      if ((u & 7) == 0)
        u &= 0x807fffffu; // a subnormal or a zero
      if ((u & 7) == 1)
        u = (u & 0xffff0000u) | 0x8000u; // a tie
      std::memcpy(&f, &u, 4);
    }
    std::vector<uint32_t> got(size_t(rows) * pairs, 0xdeadbeef);
    round_to_bf16_pairs(x.data(), ldx, rows, in, got.data());
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < pairs; ++k) {
        const float *xr = &x[size_t(r) * ldx];
        const uint32_t want =
            bf16_bits(xr[2 * k]) | uint32_t(2 * k + 1 < in ? bf16_bits(xr[2 * k + 1]) : 0) << 16;
        ASSERT_EQ(got[size_t(r) * pairs + k], want) << "in " << in << " row " << r << " pair " << k;
      }
  }
  EXPECT_EQ(bf16_bits(1e-40f), 0x0000);  // subnormal: zero
  EXPECT_EQ(bf16_bits(-1e-40f), 0x8000); // of its sign
}

TEST(GemmBf16, FastPathEqualsReferenceBitForBit) {
  std::printf("linear_forward_bf16 path: %s\n",
              cpu_has_avx512_bf16() ? "AVX512_BF16 (vdpbf16ps)" : "portable");
  for (int out : {1, 30, 32, 33, 100})
    for (int in : {1, 2, 7, 256})
      for (int rows : {1, 5, 8, 9, 17})
        for (Act e : {Act::None, Act::Relu, Act::Gelu}) {
          const Linear l = make_linear(out, in, out + in);
          const PackedLinearBf16 p = pack_bf16(l);
          const std::vector<float> x = make_x(rows, in);
          std::vector<float> fast(size_t(rows) * out, -1), ref(size_t(rows) * out, -2);
          linear_forward_bf16(p, x.data(), in, rows, fast.data(), out, e);
          linear_forward_bf16_ref(l.w.data(), l.b.data(), out, in, x.data(), in, rows, ref.data(),
                                  out, e);
          ASSERT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * 4))
              << out << "x" << in << " rows " << rows;
        }
}

// The bias is rounded to bf16 as W is (kernels/gemm_ref.h's bf16_bias: cuBLASLt adds a bias in
// its output's type only, bf16 where a GEMM writes bf16), on the fast path and the reference: with
// x = 0, y is b rounded, and b here is not a bf16 value.
TEST(GemmBf16, TheBiasIsRoundedToBf16) {
  const int out = 40, in = 6;
  Linear l = make_linear(out, in, 7);
  for (int j = 0; j < out; ++j)
    l.b[size_t(j)] = 0.3f + 0.001f * float(j) + 1e-5f;
  const std::vector<float> x(size_t(2) * in, 0.0f);
  std::vector<float> fast(size_t(2) * out), ref(size_t(2) * out);
  linear_forward_bf16(pack_bf16(l), x.data(), in, 2, fast.data(), out, Act::None);
  linear_forward_bf16_ref(l.w.data(), l.b.data(), out, in, x.data(), in, 2, ref.data(), out,
                          Act::None);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < out; ++j) {
      const float want = from_bf16(bf16_bits(l.b[size_t(j)]));
      ASSERT_NE(want, l.b[size_t(j)]);
      EXPECT_EQ(fast[size_t(r) * out + j], want) << "column " << j;
      EXPECT_EQ(ref[size_t(r) * out + j], want) << "column " << j;
    }
}

TEST(GemmBf16, ARowsResultDoesNotDependOnTheRowsBesideIt) {
  const Linear l = make_linear(70, 256, 3);
  const PackedLinearBf16 p = pack_bf16(l);
  const int rows = 21;
  const std::vector<float> x = make_x(rows, 256);
  std::vector<float> all(size_t(rows) * 70);
  linear_forward_bf16(p, x.data(), 256, rows, all.data(), 70, Act::None);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> one(70);
    linear_forward_bf16(p, &x[size_t(r) * 256], 256, 1, one.data(), 70, Act::None);
    ASSERT_EQ(0, std::memcmp(one.data(), &all[size_t(r) * 70], 70 * 4)) << "row " << r;
  }
}

// bf16 operands: each rounds by at most 2^-9 of itself, so a product by at most about 2^-8 of
// itself, and each output is off fp32's by at most 2^-8 of sum_k |x_k w_k| (plus the fp32 sums'
// own rounding); and not by nothing, else the operands were never rounded.
TEST(GemmBf16, WithinTheRoundingOfItsOperands) {
  const int out = 64, in = 256, rows = 9;
  const Linear l = make_linear(out, in, 5);
  const std::vector<float> x = make_x(rows, in);
  std::vector<float> half(size_t(rows) * out), full(size_t(rows) * out);
  linear_forward_bf16(pack_bf16(l), x.data(), in, rows, half.data(), out, Act::None);
  linear_forward_ref(l.w.data(), l.b.data(), out, in, x.data(), in, rows, full.data(), out,
                     Act::None);
  double worst = 0;
  int differ = 0;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      double magnitude = std::fabs(l.b[j]);
      for (int k = 0; k < in; ++k)
        magnitude += std::fabs(double(x[size_t(r) * in + k]) * l.w[size_t(j) * in + k]);
      const double err = std::fabs(double(half[r * out + j]) - full[r * out + j]);
      worst = std::max(worst, err / magnitude);
      differ += err > 0;
    }
  std::printf("bf16 against fp32: worst error %.3g of sum |x w|, %d of %d outputs differ\n", worst,
              differ, rows * out);
  EXPECT_LT(worst, std::ldexp(1.0, -8) + 1e-6);
  EXPECT_GT(differ, rows * out / 2);
}
