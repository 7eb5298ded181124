// The 16-bit state's conversions (kernels/state_format.h) in every instruction set this CPU has
// (ctest runs this file again with TARNN_NO_AVX512 and TARNN_NO_AVX2): the CPU attention's
// vectorised rounding and widening against the scalar store_state and load_state, to the bit,
// over a spread of every float's bit patterns and every 16-bit pattern, with fp16's exponents.
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <vector>

#include "kernels/cpu_features.h"
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

} // namespace

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
