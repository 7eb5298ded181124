// The 16-bit state's conversions (kernels/state_format.h) in every instruction set this CPU has
// (ctest runs this file again with TARNN_NO_AVX512 and TARNN_NO_AVX2): the CPU attention's
// vectorised rounding and widening against the scalar store_state and load_state, to the bit,
// over a spread of every float's bit patterns and every 16-bit pattern, with fp16's exponents;
// and the attention's fused fp16 update against the scalar update on a widened copy.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/feature_map.h"
#include "kernels/linear_attention.h"
#include "kernels/state_format.h"
#include "src/cpu/cpu_ops.h"

using namespace tarnn;

namespace {

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <StateFormat F> void expect_rounding_is_the_scalar_one(int e) {
  // every 4099th bit pattern (a prime stride: every exponent, mantissas all over), and the edges
  std::vector<float> x;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099)
    x.push_back(float_of(uint32_t(u)));
  for (uint32_t u : {0x477fefffu, 0x477ff000u, 0x477fe000u, 0x38800000u, 0x387fffffu, 0x33000000u,
                     0x33000001u, 0x7f800000u, 0x7fc00001u, 0x7f800001u, 0x80000000u, 0x00000001u})
    for (uint32_t sign : {0u, 0x80000000u})
      x.push_back(float_of(u | sign));
  x.resize(x.size() / 16 * 16 + 7); // and a tail that is not a whole vector
  std::vector<uint16_t> fast(x.size()), plain(x.size());
  narrow_state_rows(x.data(), fast.data(), x.size(), F, e);
  for (size_t i = 0; i < x.size(); ++i)
    store_state<F>(plain.data(), i, x[i], e);
  size_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (fast[i] != plain[i] && differ++ < 5)
      ADD_FAILURE() << name(F) << " e " << e << ": " << x[i] << " (0x" << std::hex
                    << (*reinterpret_cast<uint32_t *>(&x[i])) << ") -> 0x" << fast[i]
                    << ", the scalar rounding gives 0x" << plain[i];
  EXPECT_EQ(differ, 0u) << name(F) << " on the " << cpu_path_name() << " path";
}

template <StateFormat F> void expect_widening_is_the_scalar_one(int e) {
  std::vector<uint16_t> h(65536 + 5);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = uint16_t(i);
  std::vector<float> fast(h.size()), plain(h.size());
  widen_state_rows(h.data(), fast.data(), h.size(), F, e);
  for (size_t i = 0; i < h.size(); ++i)
    plain[i] = load_state<F>(h.data(), i, e);
  EXPECT_EQ(0, std::memcmp(fast.data(), plain.data(), fast.size() * 4))
      << name(F) << " e " << e << " on the " << cpu_path_name() << " path";
}

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// One head's q, k and v (d each, at q, q + A, q + 2A): ordinary values, or with a few of one
// kind of edge of the fp16 update's scaled path (cpu_kernels.cpp: scaled_update_exact): zeros,
// its bounds 2^-50 and 2^50 (phi(k) = 2^-50 at k = -34.657...), values just past them, products
// whose scaled value would leave the normal range, infinities and NaN.
void attention_head_input(std::mt19937 &rng, float *q, int A, int d) {
  static const float edges[] = {0.0f,     -0.0f,       0x1p-50f,        -0x1p-50f,
                                0x1p50f,  -34.6574f,   0x1.fffffep-51f, 0x1.000002p50f,
                                0x1p-70f, 0x1.8p-122f, 1e-40f,          -90.0f,
                                1e20f,    INFINITY,    -INFINITY,       NAN};
  constexpr int kinds = int(sizeof edges / sizeof edges[0]);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const int kind = int(rng() % (2 * kinds)); // half the heads: ordinary values only
  for (int part = 0; part < 3; ++part)
    for (int i = 0; i < d; ++i)
      q[part * A + i] = kind < kinds && rng() % 8 == 0 ? edges[kind] : u(rng);
}

} // namespace

// linear_attention_rows on the fp16 state (the CPU's fused update, in this CPU's instruction set)
// against phi, load_state, linear_attention_update and store_state one cell at a time, to the bit
// (S's halves, z and the outputs; a NaN as any NaN: the vector conversions keep its payload, the
// scalar rule makes its own), over positions where the stored exponent
// stays and where it grows, the state started from every kind of half (subnormals, infinities).
TEST(StateConversions, Fp16AttentionStepAsTheScalarUpdate) {
  Config c;
  c.n_layers = 1;
  c.n_heads = 2; // d_head 32: the fused path
  const PhiMap m = phi_map(c, nullptr);
  const int rows = 256, d = c.d_head, A = c.d_attn();
  const size_t block = state_block_bytes(d, d, StateFormat::Fp16);
  const size_t s_bytes = state_s_bytes(d, d, StateFormat::Fp16);
  std::mt19937 rng(7);
  std::vector<unsigned char> fast(size_t(rows) * c.n_heads * block), plain;
  for (size_t b = 0; b < fast.size() / block; ++b) {
    auto *S = reinterpret_cast<uint16_t *>(&fast[b * block]);
    for (int i = 0; i < d * d; ++i) // halves of every exponent, now and then an edge
      S[i] =
          uint16_t(rng() % 4 != 0 ? (rng() & 0x83ffu) | ((rng() % 24 + 4) << 10) : rng() & 0xffffu);
    auto *z = reinterpret_cast<float *>(&fast[b * block + s_bytes]);
    for (int i = 0; i < d; ++i)
      z[i] = float(rng() % 100) / 10.0f;
  }
  std::vector<float> qkv(size_t(rows) * 3 * A), att(size_t(rows) * A), ref(att.size());
  size_t differ = 0;
  for (int t : {0, 1, 2, 3, 4, 5, 6, 7, 8, 100, 254, 255, 256, 781, 782}) {
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < c.n_heads; ++h)
        attention_head_input(rng, &qkv[size_t(r) * 3 * A + h * d], A, d);
    for (size_t b = 0; b < fast.size() / block; b += 4) // a quarter of S zero at every position
      std::memset(&fast[b * block], 0, s_bytes);
    plain = fast;
    linear_attention_rows(qkv.data(), fast.data(), StateFormat::Fp16, t, att.data(), rows, 0, c, m);
    const int e_in = state_scale_exponent<StateFormat::Fp16>(t - 1);
    const int e_out = state_scale_exponent<StateFormat::Fp16>(t);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < c.n_heads; ++h) {
        const float *q = &qkv[size_t(r) * 3 * A + h * d];
        float fq[32], fk[32], S[32 * 32];
        for (int i = 0; i < d; ++i)
          fq[i] = phi(q[i]), fk[i] = phi(q[A + i]);
        unsigned char *at = &plain[(size_t(r) * c.n_heads + h) * block];
        for (int i = 0; i < d * d; ++i)
          S[i] = load_state<StateFormat::Fp16>(at, size_t(i), e_in);
        linear_attention_update<32>(fq, fk, q + 2 * A, S, reinterpret_cast<float *>(at + s_bytes),
                                    &ref[size_t(r) * A + h * d], d);
        for (int i = 0; i < d * d; ++i)
          store_state<StateFormat::Fp16>(at, size_t(i), S[i], e_out);
      }
    for (size_t b = 0; b < fast.size() / block; ++b) // S's halves, then z
      for (size_t i = 0; i < block / 2; ++i) {
        uint16_t x, y;
        std::memcpy(&x, &fast[b * block + 2 * i], 2);
        std::memcpy(&y, &plain[b * block + 2 * i], 2);
        const bool in_s = 2 * i < s_bytes;
        if (x != y && !(in_s && half_is_nan(x) && half_is_nan(y)) && differ++ < 5)
          ADD_FAILURE() << "position " << t << ", block " << b << ": " << (in_s ? "S" : "z")
                        << " half-word " << i << " is 0x" << std::hex << x << ", not 0x" << y;
      }
    for (size_t i = 0; i < att.size(); ++i)
      if (std::memcmp(&att[i], &ref[i], 4) != 0 && !(std::isnan(att[i]) && std::isnan(ref[i])) &&
          differ++ < 5)
        ADD_FAILURE() << "position " << t << ": output " << i << " is " << att[i] << ", not "
                      << ref[i];
  }
  EXPECT_EQ(differ, 0u) << "on the " << cpu_path_name() << " path";
}

TEST(StateConversions, Fp16RoundsAsTheScalarRule) {
  for (int e : {0, 3, 9})
    expect_rounding_is_the_scalar_one<StateFormat::Fp16>(e);
}

TEST(StateConversions, Bf16RoundsAsTheScalarRule) {
  expect_rounding_is_the_scalar_one<StateFormat::Bf16>(0);
}

TEST(StateConversions, WideningIsExact) {
  for (int e : {0, 3, 9})
    expect_widening_is_the_scalar_one<StateFormat::Fp16>(e);
  expect_widening_is_the_scalar_one<StateFormat::Bf16>(0);
}
