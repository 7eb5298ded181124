// The GEMM kernels, fp32, bf16 and int8, against their plain references: the same bits, whatever
// the shape and whatever rows share a call (what makes images independent of --batch and
// --threads).
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "kernels/cpu_features.h"
#include "src/cpu/gemm.h"
#include "src/cpu/gemm_bf16.h"
#include "src/cpu/gemm_int8.h"

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

// Rows of different sizes: int8 quantizes each with its own scale.
std::vector<float> make_x_scaled_rows(int rows, int in) {
  std::vector<float> x(size_t(rows) * in);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(float(i) * 0.37f) * float(1 + i / in % 5);
  return x;
}

// int8: y from path p and from the reference, compared to the bit.
void expect_int8_reference_bits(const Linear &l, const std::vector<float> &x, int rows, Act act,
                                Int8Path p, bool bias = true) {
  const PackedLinearInt8 packed = [&] {
    Linear m = l;
    if (!bias)
      m.b.clear();
    return pack_int8(m);
  }();
  std::vector<float> fast(size_t(rows) * l.out, -1), ref(size_t(rows) * l.out, -2);
  linear_forward_int8(packed, x.data(), l.in, rows, fast.data(), l.out, act, p);
  linear_forward_int8_ref(l.w.data(), bias ? l.b.data() : nullptr, l.out, l.in, x.data(), l.in,
                          rows, ref.data(), l.out, act);
  ASSERT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * 4))
      << name(p) << ": " << l.out << "x" << l.in << " rows " << rows;
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

// ---- int8 (src/cpu/gemm_int8.h; its reference: kernels/gemm_int8_ref.h) -----------------------
// Every path this CPU has gives the reference's bits, whatever the shape, the rows in a call (the
// reference takes each row alone), or the values (zeros, NaN, the largest sums an int32 must hold).

TEST(GemmInt8, EveryPathEqualsTheReferenceBitForBit) {
  for (Int8Path p : int8_paths()) {
    std::printf("int8 path: %s\n", name(p));
    for (int out : {1, 30, 32, 33, 100})
      for (int in : {1, 3, 4, 5, 7, 256, 1027})
        for (int rows : {1, 5, 8, 9, 17})
          for (Act e : {Act::None, Act::Relu, Act::Gelu})
            expect_int8_reference_bits(make_linear(out, in, out + in), make_x_scaled_rows(rows, in),
                                       rows, e, p,
                                       /*bias=*/out != 33);
  }
}

// Symmetric, per vector, rounded to nearest even: with a = 127 the scale is 1 and q = rne(x).
TEST(GemmInt8, QuantizesToNearestEvenWithTheVectorsOwnScale) {
  const float v[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -126.5f, 3.49f};
  int8_t q[8];
  EXPECT_EQ(int8_quantize_vector(v, 8, q), 1.0f);
  const int8_t want[] = {127, 0, 2, 2, 0, -2, -126, 3};
  for (int k = 0; k < 8; ++k)
    EXPECT_EQ(q[k], want[k]) << k;
  const float w[] = {-2.0f, 1.0f, 0.0f}; // a = 2: scale 2/127, -2 is -127 (never -128)
  EXPECT_EQ(int8_quantize_vector(w, 3, q), 2.0f / 127.0f);
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[1], 64); // 1 * 63.5 = 63.5: a tie, to the even 64
  EXPECT_EQ(q[2], 0);
}

// A row of zeros (or below 2^-64) adds nothing: y = b. A row holding NaN or Inf makes that row's
// outputs NaN, as fp32's would be, and leaves the other rows alone.
TEST(GemmInt8, ZeroAndNonFiniteRows) {
  const Linear l = make_linear(40, 20, 1);
  std::vector<float> x = make_x_scaled_rows(4, 20);
  std::fill(x.begin(), x.begin() + 20, 0.0f);
  std::fill(x.begin() + 20, x.begin() + 40, 1e-30f);
  x[45] = NAN;
  x[70] = INFINITY;
  for (Int8Path p : int8_paths()) {
    expect_int8_reference_bits(l, x, 4, Act::None, p);
    std::vector<float> y(160);
    linear_forward_int8(pack_int8(l), x.data(), 20, 4, y.data(), 40, Act::None, p);
    for (int j = 0; j < 40; ++j) {
      EXPECT_EQ(y[size_t(j)], l.b[size_t(j)]);
      EXPECT_EQ(y[size_t(40 + j)], l.b[size_t(j)]);
      EXPECT_TRUE(std::isnan(y[size_t(80 + j)]));
      EXPECT_TRUE(std::isnan(y[size_t(120 + j)]));
    }
  }
}

// The largest sums: every product 127 * 127 (and, on the VNNI paths, 255 * 127 before the
// offset comes off) over in = 65,536, config.h's bound: exact in int32 on every path.
TEST(GemmInt8, TheLargestSumsStayExact) {
  const int in = 65536, out = 32;
  Linear l{out, in, std::vector<float>(size_t(out) * in, 1.0f), std::vector<float>(out, 0.0f)};
  for (int k = 0; k < in; ++k)
    l.w[size_t(in) + k] = -1.0f; // output 1: all -127
  for (float sign : {1.0f, -1.0f}) {
    const std::vector<float> x(size_t(in), sign);
    for (Int8Path p : int8_paths()) {
      expect_int8_reference_bits(l, x, 1, Act::None, p);
      std::vector<float> y(out);
      linear_forward_int8(pack_int8(l), x.data(), in, 1, y.data(), out, Act::None, p);
      const float step = (1.0f / 127) * (1.0f / 127);
      EXPECT_EQ(y[0], float(127 * 127 * in) * step * sign) << name(p);
      EXPECT_EQ(y[1], -float(127 * 127 * in) * step * sign) << name(p);
    }
  }
}

// The reference is a product: within the quantization's error of the exact one (half a step of
// x and of W per term, summed).
TEST(GemmInt8, ReferenceIsCloseToTheExactProduct) {
  const Linear l = make_linear(9, 64, 1);
  const std::vector<float> x = make_x_scaled_rows(3, 64);
  std::vector<float> y(27);
  linear_forward_int8_ref(l.w.data(), l.b.data(), 9, 64, x.data(), 64, 3, y.data(), 9, Act::None);
  double worst = 0;
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 9; ++j) {
      double want = l.b[size_t(j)], bound = 0, ax = 0, aw = 0;
      for (int k = 0; k < 64; ++k) {
        want += double(x[size_t(r * 64 + k)]) * l.w[size_t(j * 64 + k)];
        ax = std::max(ax, std::fabs(double(x[size_t(r * 64 + k)])));
        aw = std::max(aw, std::fabs(double(l.w[size_t(j * 64 + k)])));
      }
      bound = 64 * (ax / 254 * aw + aw / 254 * ax); // |dx| |w| + |x| |dw| per term, at most
      EXPECT_NEAR(y[size_t(r * 9 + j)], want, bound);
      worst = std::max(worst, std::fabs(y[size_t(r * 9 + j)] - want));
    }
  EXPECT_GT(worst, 0.0); // and it does round
}
