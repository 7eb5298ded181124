// The int8 GEMM (src/cpu/gemm_int8.h) against its definition and plain reference
// (kernels/gemm_int8_ref.h): every path this CPU has gives the reference's bits, whatever the
// shape, the rows in a call (the reference takes each row alone), or the values (zeros, NaN, the
// largest sums an int32 must hold).
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

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

std::vector<float> make_x(int rows, int in, int seed = 0) {
  std::vector<float> x(size_t(rows) * in);
  for (size_t i = 0; i < x.size(); ++i) // rows of different sizes: each has its own scale
    x[i] = std::sin(float(i + seed) * 0.37f) * float(1 + i / in % 5);
  return x;
}

// y from path p and from the reference, compared to the bit.
void expect_reference_bits(const Linear &l, const std::vector<float> &x, int rows, Act act,
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

TEST(GemmInt8, EveryPathEqualsTheReferenceBitForBit) {
  for (Int8Path p : int8_paths()) {
    std::printf("int8 path: %s\n", name(p));
    for (int out : {1, 30, 32, 33, 100})
      for (int in : {1, 3, 4, 5, 7, 256, 1027})
        for (int rows : {1, 5, 8, 9, 17})
          for (Act e : {Act::None, Act::Relu, Act::Gelu})
            expect_reference_bits(make_linear(out, in, out + in), make_x(rows, in), rows, e, p,
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
  std::vector<float> x = make_x(4, 20);
  std::fill(x.begin(), x.begin() + 20, 0.0f);
  std::fill(x.begin() + 20, x.begin() + 40, 1e-30f);
  x[45] = NAN;
  x[70] = INFINITY;
  for (Int8Path p : int8_paths()) {
    expect_reference_bits(l, x, 4, Act::None, p);
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
      expect_reference_bits(l, x, 1, Act::None, p);
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
  const std::vector<float> x = make_x(3, 64);
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
